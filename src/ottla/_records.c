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
        if (key_len < -1 || value_len < -1) {
            /* Kafka reads any negative length as null; no client writes one below -1,
             * and librdkafka consumers stall on such a record: refused here. */
            snprintf(detail, sizeof detail, "Invalid negative record %s size %d (only -1, "
                     "null, may be negative)", key_len < -1 ? "key" : "value",
                     key_len < -1 ? key_len : value_len);
            problem = detail;
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
                if (skip_bytes(&r, &hvalue)) {
                    problem = "Found invalid record structure";
                } else if (hvalue < -1) {
                    snprintf(detail, sizeof detail, "Invalid negative header value size %d "
                             "(only -1, null, may be negative)", hvalue);
                    problem = detail;
                }
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

/* ---- decode_arrow: a fetch's records as Arrow columns -------------------------------
 *
 * decode_arrow(batches, start, end, include_headers)
 *
 * ``batches`` is a list of (data, base_offset, base_timestamp, max_timestamp,
 * log_append_time, record_count): the decompressed records of each v2 batch a reader
 * keeps (control batches and aborted ones already left out). Every record whose offset
 * is in [start, end) becomes one row. Two passes: the first checks each record's framing
 * and sizes every buffer exactly, the second fills them; neither holds the GIL, and no
 * Python object is made per record. The buffers are bytes objects in Arrow's layout, so
 * pyarrow wraps them without a copy (pa.Array.from_buffers):
 *
 * (rows, offsets int64[rows], timestamps int64[rows] in microseconds (LogAppendTime
 *  batches: the batch's max timestamp for every record), timestamp_types int32[rows],
 *  key_validity, key_offsets int32[rows+1], key_data, key_nulls,
 *  value_validity, value_offsets, value_data, value_nulls,
 *  headers)
 *
 * A validity is None when nothing is null. ``headers`` is None unless include_headers,
 * else (list_offsets int32[rows+1], count, key_offsets int32[count+1], key_data,
 * value_validity, value_offsets int32[count+1], value_data, value_nulls,
 * invalid_utf8_keys): header keys are Arrow strings, so the caller repairs the keys that
 * are not UTF-8 (there are ``invalid_utf8_keys`` of them) as Kafka's clients decode
 * them, with replacement characters. Malformed records raise ValueError.
 */

typedef struct {
    Py_buffer view;
    int64_t base_offset, base_ts, max_ts;
    int log_append;
    Py_ssize_t count;
} arrow_batch;

typedef struct {
    const uint8_t *end; /* the record's last byte + 1 */
    int64_t ts_delta;
    int32_t offset_delta;
    const uint8_t *key, *value;
    int32_t key_len, value_len; /* negative: null */
    int32_t headers;
    const uint8_t *first_header;
} record_view;

typedef struct {
    Py_ssize_t rows, key_bytes, value_bytes, key_nulls, value_nulls;
    Py_ssize_t headers, hkey_bytes, hvalue_bytes, hvalue_nulls, bad_keys;
} arrow_sizes;

/* A length-prefixed field inside ``c``; a negative length is null. */
static int read_field(cursor *c, const uint8_t **data, int32_t *length) {
    if (read_varint(c, length))
        return -1;
    if (*length < 0) {
        *data = NULL;
        return 0;
    }
    if ((Py_ssize_t)*length > c->end - c->p)
        return -1;
    *data = c->p;
    c->p += *length;
    return 0;
}

/* The record at ``c`` (moving ``c`` past it); its headers are walked later. */
static const char *read_record(cursor *c, record_view *r) {
    int32_t length;
    if (read_varint(c, &length))
        return "record runs past the end of the batch";
    if (length < 1 || (Py_ssize_t)length > c->end - c->p)
        return "record length runs past the end of the batch";
    cursor body = {c->p + 1, c->p + length}; /* after the attributes byte */
    c->p += length;
    r->end = body.end;
    if (read_varlong(&body, &r->ts_delta) || read_varint(&body, &r->offset_delta) ||
            read_field(&body, &r->key, &r->key_len) ||
            read_field(&body, &r->value, &r->value_len) || read_varint(&body, &r->headers))
        return "record length does not match its fields";
    if (r->headers < 0)
        return "negative number of record headers";
    r->first_header = body.p;
    return NULL;
}

static int utf8_valid(const uint8_t *s, int32_t n) {
    int32_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        int32_t more;
        uint32_t cp;
        if ((b & 0xe0) == 0xc0) {
            more = 1;
            cp = b & 0x1f;
        } else if ((b & 0xf0) == 0xe0) {
            more = 2;
            cp = b & 0x0f;
        } else if ((b & 0xf8) == 0xf0) {
            more = 3;
            cp = b & 0x07;
        } else {
            return 0;
        }
        if (n - i <= more)
            return 0;
        for (int32_t k = 1; k <= more; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((more == 1 && cp < 0x80) || (more == 2 && cp < 0x800) ||
                (more == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
                (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += more + 1;
    }
    return 1;
}

/* Walk every header of ``r``; with ``sizes`` count them (the record is kept). */
static const char *walk_headers(const record_view *r, arrow_sizes *sizes) {
    cursor h = {r->first_header, r->end};
    for (int32_t i = 0; i < r->headers; i++) {
        const uint8_t *key, *value;
        int32_t key_len, value_len;
        if (read_field(&h, &key, &key_len) || read_field(&h, &value, &value_len))
            return "record length does not match its fields";
        if (key_len < 0)
            return "record header with a null key";
        if (sizes != NULL) {
            sizes->headers++;
            sizes->hkey_bytes += key_len;
            if (value_len < 0)
                sizes->hvalue_nulls++;
            else
                sizes->hvalue_bytes += value_len;
            if (!utf8_valid(key, key_len))
                sizes->bad_keys++;
        }
    }
    if (h.p != h.end)
        return "record length does not match its fields";
    return NULL;
}

static int timestamp_us(const arrow_batch *b, const record_view *r, int64_t *out) {
    int64_t ms = b->max_ts;
    if (!b->log_append && __builtin_add_overflow(b->base_ts, r->ts_delta, &ms))
        return -1;
    return __builtin_mul_overflow(ms, (int64_t)1000, out) ? -1 : 0;
}

static const char *size_batches(const arrow_batch *batches, Py_ssize_t n, int64_t start,
                                int64_t end, int include_headers, arrow_sizes *s) {
    for (Py_ssize_t i = 0; i < n; i++) {
        const arrow_batch *b = &batches[i];
        cursor c = {(const uint8_t *)b->view.buf, (const uint8_t *)b->view.buf + b->view.len};
        for (Py_ssize_t k = 0; k < b->count; k++) {
            record_view r;
            const char *problem = read_record(&c, &r);
            if (problem != NULL)
                return problem;
            int64_t offset = b->base_offset + r.offset_delta, ts;
            int keep = offset >= start && offset < end;
            problem = walk_headers(&r, keep && include_headers ? s : NULL);
            if (problem != NULL)
                return problem;
            if (!keep)
                continue;
            if (timestamp_us(b, &r, &ts))
                return "record timestamp out of range";
            s->rows++;
            if (r.key_len < 0)
                s->key_nulls++;
            else
                s->key_bytes += r.key_len;
            if (r.value_len < 0)
                s->value_nulls++;
            else
                s->value_bytes += r.value_len;
        }
        if (c.p != c.end)
            return "bytes left over after the last record";
    }
    if (s->key_bytes > INT32_MAX || s->value_bytes > INT32_MAX || s->headers > INT32_MAX ||
            s->hkey_bytes > INT32_MAX || s->hvalue_bytes > INT32_MAX)
        return "more than 2 GiB in one column: decode fewer batches at a time";
    return NULL;
}

typedef struct {
    int64_t *offsets, *timestamps;
    int32_t *types;
    uint8_t *key_valid, *value_valid, *hvalue_valid;
    int32_t *key_offsets, *value_offsets, *list_offsets, *hkey_offsets, *hvalue_offsets;
    uint8_t *key_data, *value_data, *hkey_data, *hvalue_data;
} arrow_out;

static inline void put_binary(const uint8_t *data, int32_t length, Py_ssize_t row,
                              uint8_t *valid, int32_t *offsets, uint8_t *out) {
    int32_t at = offsets[row];
    if (length >= 0) {
        memcpy(out + at, data, (size_t)length);
        at += length;
        if (valid != NULL)
            valid[row >> 3] |= (uint8_t)(1u << (row & 7));
    }
    offsets[row + 1] = at;
}

/* The second pass: ``size_batches`` has checked every record, so nothing fails here. */
static void fill_batches(const arrow_batch *batches, Py_ssize_t n, int64_t start, int64_t end,
                         int include_headers, arrow_out *o) {
    Py_ssize_t row = 0, header = 0;
    o->key_offsets[0] = o->value_offsets[0] = 0;
    if (include_headers)
        o->list_offsets[0] = o->hkey_offsets[0] = o->hvalue_offsets[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const arrow_batch *b = &batches[i];
        cursor c = {(const uint8_t *)b->view.buf, (const uint8_t *)b->view.buf + b->view.len};
        for (Py_ssize_t k = 0; k < b->count; k++) {
            record_view r;
            read_record(&c, &r);
            int64_t offset = b->base_offset + r.offset_delta;
            if (offset < start || offset >= end)
                continue;
            o->offsets[row] = offset;
            timestamp_us(b, &r, &o->timestamps[row]);
            o->types[row] = b->log_append;
            put_binary(r.key, r.key_len, row, o->key_valid, o->key_offsets, o->key_data);
            put_binary(r.value, r.value_len, row, o->value_valid, o->value_offsets,
                       o->value_data);
            if (include_headers) {
                cursor h = {r.first_header, r.end};
                for (int32_t j = 0; j < r.headers; j++, header++) {
                    const uint8_t *key = NULL, *value = NULL;
                    int32_t key_len = 0, value_len = 0;
                    read_field(&h, &key, &key_len);
                    read_field(&h, &value, &value_len);
                    put_binary(key, key_len, header, NULL, o->hkey_offsets, o->hkey_data);
                    put_binary(value, value_len, header, o->hvalue_valid, o->hvalue_offsets,
                               o->hvalue_data);
                }
                o->list_offsets[row + 1] = (int32_t)header;
            }
            row++;
        }
    }
}

/* A new bytes object of ``size`` bytes; its start in ``*data``; zeroed if ``zero``. */
static PyObject *new_buffer(Py_ssize_t size, void *data, int zero) {
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, size);
    if (bytes != NULL) {
        *(void **)data = PyBytes_AS_STRING(bytes);
        if (zero)
            memset(PyBytes_AS_STRING(bytes), 0, (size_t)size);
    }
    return bytes;
}

/* A validity bitmap (None when no entry is null). */
static PyObject *new_validity(Py_ssize_t entries, Py_ssize_t nulls, uint8_t **data) {
    *data = NULL;
    if (nulls == 0)
        Py_RETURN_NONE;
    return new_buffer((entries + 7) / 8, data, 1);
}

#define ARROW_BUFFERS 16

static PyObject *decode_arrow(PyObject *self, PyObject *args) {
    PyObject *list;
    long long start, end;
    int include_headers;
    if (!PyArg_ParseTuple(args, "O!LLp", &PyList_Type, &list, &start, &end,
                          &include_headers))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list), got = 0;
    arrow_batch *batches = PyMem_Calloc(n ? (size_t)n : 1, sizeof(arrow_batch));
    if (batches == NULL)
        return PyErr_NoMemory();
    PyObject *buffers[ARROW_BUFFERS] = {NULL};
    PyObject *result = NULL;
    for (; got < n; got++) {
        arrow_batch *b = &batches[got];
        long long base_offset, base_ts, max_ts;
        PyObject *item = PyList_GET_ITEM(list, got);
        if (!PyTuple_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "each batch is a tuple");
            goto done;
        }
        if (!PyArg_ParseTuple(item, "y*LLLpn", &b->view, &base_offset, &base_ts, &max_ts,
                              &b->log_append, &b->count))
            goto done;
        b->base_offset = base_offset;
        b->base_ts = base_ts;
        b->max_ts = max_ts;
        if (b->count < 0) {
            got++;
            PyErr_SetString(PyExc_ValueError, "negative record count");
            goto done;
        }
    }

    arrow_sizes s = {0};
    const char *problem;
    Py_BEGIN_ALLOW_THREADS
    problem = size_batches(batches, n, start, end, include_headers, &s);
    Py_END_ALLOW_THREADS
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        goto done;
    }

    arrow_out o;
    memset(&o, 0, sizeof o);
    Py_ssize_t rows = s.rows;
    int k = 0;
    if ((buffers[k++] = new_buffer(rows * 8, &o.offsets, 0)) == NULL ||
            (buffers[k++] = new_buffer(rows * 8, &o.timestamps, 0)) == NULL ||
            (buffers[k++] = new_buffer(rows * 4, &o.types, 0)) == NULL ||
            (buffers[k++] = new_validity(rows, s.key_nulls, &o.key_valid)) == NULL ||
            (buffers[k++] = new_buffer((rows + 1) * 4, &o.key_offsets, 0)) == NULL ||
            (buffers[k++] = new_buffer(s.key_bytes, &o.key_data, 0)) == NULL ||
            (buffers[k++] = new_validity(rows, s.value_nulls, &o.value_valid)) == NULL ||
            (buffers[k++] = new_buffer((rows + 1) * 4, &o.value_offsets, 0)) == NULL ||
            (buffers[k++] = new_buffer(s.value_bytes, &o.value_data, 0)) == NULL)
        goto done;
    if (include_headers &&
            ((buffers[k++] = new_buffer((rows + 1) * 4, &o.list_offsets, 0)) == NULL ||
             (buffers[k++] = new_buffer((s.headers + 1) * 4, &o.hkey_offsets, 0)) == NULL ||
             (buffers[k++] = new_buffer(s.hkey_bytes, &o.hkey_data, 0)) == NULL ||
             (buffers[k++] = new_validity(s.headers, s.hvalue_nulls, &o.hvalue_valid)) == NULL ||
             (buffers[k++] = new_buffer((s.headers + 1) * 4, &o.hvalue_offsets, 0)) == NULL ||
             (buffers[k++] = new_buffer(s.hvalue_bytes, &o.hvalue_data, 0)) == NULL))
        goto done;

    Py_BEGIN_ALLOW_THREADS
    fill_batches(batches, n, start, end, include_headers, &o);
    Py_END_ALLOW_THREADS

    PyObject *headers = Py_None;
    if (include_headers) {
        headers = Py_BuildValue("(OnOOOOOnn)", buffers[9], s.headers, buffers[10],
                                buffers[11], buffers[12], buffers[13], buffers[14],
                                s.hvalue_nulls, s.bad_keys);
        if (headers == NULL)
            goto done;
    } else {
        Py_INCREF(headers);
    }
    result = Py_BuildValue("(nOOOOOOnOOOnN)", rows, buffers[0], buffers[1], buffers[2],
                           buffers[3], buffers[4], buffers[5], s.key_nulls, buffers[6],
                           buffers[7], buffers[8], s.value_nulls, headers);

done:
    for (int i = 0; i < ARROW_BUFFERS; i++)
        Py_XDECREF(buffers[i]);
    for (Py_ssize_t i = 0; i < got; i++)
        if (batches[i].view.obj != NULL)
            PyBuffer_Release(&batches[i].view);
    PyMem_Free(batches);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, count, base_timestamp, min_timestamp, max_timestamp, need_key, "
     "max_record_bytes) -> (error, index, max_timestamp, record_errors)"},
    {"decode_arrow", decode_arrow, METH_VARARGS,
     "decode_arrow(batches, start, end, include_headers) -> the kept records as Arrow "
     "buffers"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_records",
    "Walks the records of a v2 batch as Kafka's LogValidator does.", -1, methods,
};

PyMODINIT_FUNC PyInit__records(void) { return PyModule_Create(&module); }
