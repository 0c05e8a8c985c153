package ottla.connect;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * Sends the complete lines of a file that may still grow. The source offset of each record
 * is the byte position after its line, so a restarted task resumes after the last line whose
 * offset Connect committed.
 */
public final class LineFileSourceTask extends SourceTask {
    private static final int CHUNK = 64 * 1024;
    private String file;
    private String topic;
    private Map<String, String> partition;
    private long position;

    @Override
    public void start(Map<String, String> props) {
        file = props.get("file");
        topic = props.get("topic");
        partition = Map.of("file", file);
        Map<String, Object> offset = context.offsetStorageReader().offset(partition);
        position = offset == null ? 0L : ((Number) offset.get("position")).longValue();
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        byte[] chunk = new byte[CHUNK];
        int read;
        try (RandomAccessFile in = new RandomAccessFile(file, "r")) {
            in.seek(position);
            read = Math.max(in.read(chunk), 0);
        } catch (IOException e) {
            throw new ConnectException("reading " + file, e);
        }
        List<SourceRecord> records = new ArrayList<>();
        int start = 0;
        for (int i = 0; i < read; i++) {
            if (chunk[i] == '\n') {  // a line without its newline yet waits for the next poll
                String line = new String(chunk, start, i - start, StandardCharsets.UTF_8);
                position += i + 1 - start;
                start = i + 1;
                records.add(new SourceRecord(partition, Map.of("position", position), topic,
                                             null, null, null, Schema.STRING_SCHEMA, line));
            }
        }
        if (records.isEmpty()) {
            Thread.sleep(100);  // nothing new: poll again soon, without spinning
            return null;
        }
        return records;
    }

    @Override
    public void stop() {
    }

    @Override
    public String version() {
        return "1";
    }
}
