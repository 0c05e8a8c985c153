/*
 * ottla._records: walks the records of a v2 record batch as Kafka's LogValidator does,
 * at memory speed, without building a Python object per record.
 *
 * scan(data, count, base_timestamp, min_timestamp, max_timestamp, need_key,
 *      max_record_bytes)
 *
 * ``data`` holds the batch's records, decompressed. Each record's framing is checked
 * against the bytes it claims (length, attributes, timestamp delta, offset delta, key,
 * value, header count, header keys and values), offset deltas must run 0, 1, 2, ...,
 * and after ``count`` records no byte may be left. Those are the checks that make a
 * record unreadable when they fail: the first one that fails ends the scan.
 *
 * The checks Kafka reports per record (KIP-467) are collected for every record: a
 * timestamp (base + delta, when it is not -1) outside [min_timestamp, max_timestamp],
 * and a null key when ``need_key`` (a compacted topic).
 *
 * Returns (error, index, max_timestamp, record_errors):
 *   error          None, or the message of the structural error at record ``index``
 *   max_timestamp  the largest record timestamp (what the batch header must say)
 *   record_errors  [(index, kind, timestamp)] with kind 1 = timestamp out of range,
 *                  2 = null key; empty when all is well
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} cursor;

/* Zigzag varint of at most 5 bytes (Kafka's ByteUtils.readVarint). */
static int read_varint(cursor *c, int32_t *out) {
    uint32_t value = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (c->p >= c->end)
            return -1;
        uint8_t b = *c->p++;
        value |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int32_t)((value >> 1) ^ (~(value & 1) + 1));
            return 0;
        }
    }
    return -2;
}

/* Zigzag varlong of at most 10 bytes (ByteUtils.readVarlong). */
static int read_varlong(cursor *c, int64_t *out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (c->p >= c->end)
            return -1;
        uint8_t b = *c->p++;
        value |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)((value >> 1) ^ (~(value & 1) + 1));
            return 0;
        }
    }
    return -2;
}

/* Skip a length-prefixed field; a negative length is null (Utils.readBytes). */
static int skip_bytes(cursor *c, int32_t *length) {
    if (read_varint(c, length))
        return -1;
    if (*length < 0)
        return 0;
    if ((Py_ssize_t)*length > c->end - c->p)
        return -1;
    c->p += *length;
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long base_ts, min_ts, max_ts;
    int need_key;
    Py_ssize_t max_record;
    if (!PyArg_ParseTuple(args, "y*nLLLpn", &view, &count, &base_ts, &min_ts, &max_ts,
                          &need_key, &max_record))
        return NULL;
    PyObject *errors = PyList_New(0);
    if (errors == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const char *problem = NULL;
    char detail[160];
    Py_ssize_t index = 0;
    int64_t largest = -1;
    int first = 1;
    cursor c = {(const uint8_t *)view.buf, (const uint8_t *)view.buf + view.len};

    Py_BEGIN_ALLOW_THREADS
    for (index = 0; index < count; index++) {
        int32_t length, offset_delta, key_len, value_len, headers;
        int64_t ts_delta;
        if (read_varint(&c, &length)) {
            problem = "Incorrect declared batch size, premature EOF reached";
            break;
        }
        if (length < 0 || (Py_ssize_t)length > c.end - c.p) {
            snprintf(detail, sizeof detail, "Invalid record size: expected %d bytes in "
                     "record payload, but instead the buffer has only %zd remaining bytes.",
                     length, (Py_ssize_t)(c.end - c.p));
            problem = detail;
            break;
        }
        if ((Py_ssize_t)length > max_record) {
            snprintf(detail, sizeof detail, "Record size %d exceeds the largest allowed "
                     "decompressed record (max.decompressed.message.bytes=%zd)", length,
                     max_record);
            problem = detail;
            break;
        }
        cursor r = {c.p, c.p + length};
        c.p += length;
        r.p += 1; /* attributes: unused in v2 */
        if (length < 1 || read_varlong(&r, &ts_delta) || read_varint(&r, &offset_delta) ||
                skip_bytes(&r, &key_len) || skip_bytes(&r, &value_len) ||
                read_varint(&r, &headers)) {
            problem = "Found invalid record structure";
            break;
        }
        if (offset_delta != index) {
            snprintf(detail, sizeof detail, "Inner record offset delta %d does not follow "
                     "the one before it (expected %zd)", offset_delta, index);
            problem = detail;
            break;
        }
        if (headers < 0) {
            snprintf(detail, sizeof detail, "Found invalid number of record headers %d",
                     headers);
            problem = detail;
            break;
        }
        if ((Py_ssize_t)headers > r.end - r.p) {
            snprintf(detail, sizeof detail, "Found invalid number of record headers. %d is "
                     "larger than the remaining size of the buffer", headers);
            problem = detail;
            break;
        }
        for (int32_t h = 0; h < headers && problem == NULL; h++) {
            int32_t hkey, hvalue;
            if (read_varint(&r, &hkey)) {
                problem = "Found invalid record structure";
            } else if (hkey < 0) {
                snprintf(detail, sizeof detail, "Invalid negative header key size %d", hkey);
                problem = detail;
            } else if ((Py_ssize_t)hkey > r.end - r.p) {
                problem = "Found invalid record structure";
            } else {
                r.p += hkey;
                if (skip_bytes(&r, &hvalue))
                    problem = "Found invalid record structure";
            }
        }
        if (problem != NULL)
            break;
        if (r.p != r.end) {
            snprintf(detail, sizeof detail, "Invalid record size: expected to read %d bytes "
                     "in record payload, but instead read %zd", length,
                     (Py_ssize_t)(r.p - (r.end - length)));
            problem = detail;
            break;
        }
        int64_t ts;
        if (__builtin_add_overflow((int64_t)base_ts, ts_delta, &ts)) {
            problem = "Record timestamp overflows a 64-bit integer";
            break;
        }
        if (first || ts > largest) {
            largest = ts;
            first = 0;
        }
        int kind = 0;
        if (need_key && key_len < 0)
            kind = 2;
        else if (ts != -1 && (ts < min_ts || ts > max_ts))
            kind = 1;
        if (kind) {
            PyGILState_STATE gil = PyGILState_Ensure();
            PyObject *entry = Py_BuildValue("(niL)", index, kind, (long long)ts);
            int failed = entry == NULL || PyList_Append(errors, entry) < 0;
            Py_XDECREF(entry);
            PyGILState_Release(gil);
            if (failed) {
                problem = "";
                break;
            }
        }
    }
    if (problem == NULL && c.p != c.end)
        problem = "Incorrect declared batch size, records still remaining in file";
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&view);
    if (problem != NULL && problem[0] == '\0') {
        Py_DECREF(errors);
        return NULL; /* the Python error set while appending */
    }
    PyObject *result;
    if (problem != NULL)
        result = Py_BuildValue("(snLO)", problem, index, (long long)largest, errors);
    else
        result = Py_BuildValue("(OnLO)", Py_None, count, (long long)largest, errors);
    Py_DECREF(errors);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, count, base_timestamp, min_timestamp, max_timestamp, need_key, "
     "max_record_bytes) -> (error, index, max_timestamp, record_errors)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_records",
    "Walks the records of a v2 batch as Kafka's LogValidator does.", -1, methods,
};

PyMODINIT_FUNC PyInit__records(void) { return PyModule_Create(&module); }
