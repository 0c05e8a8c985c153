package ottla.connect;

import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Collection;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/**
 * Appends record values to a file. Connect commits the consumer's offsets only after
 * {@link #flush}, so what was written is what a restarted task does not get again.
 */
public final class LineFileSinkTask extends SinkTask {
    private String file;
    private Writer out;

    @Override
    public void start(Map<String, String> props) {
        file = props.get("file");
        try {
            out = Files.newBufferedWriter(Path.of(file), StandardCharsets.UTF_8,
                                          StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new ConnectException("opening " + file, e);
        }
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        try {
            for (SinkRecord record : records) {
                out.write(record.value() + "\n");
            }
        } catch (IOException e) {
            throw new ConnectException("writing " + file, e);
        }
    }

    @Override
    public void flush(Map<TopicPartition, OffsetAndMetadata> offsets) {
        try {
            out.flush();
        } catch (IOException e) {
            throw new ConnectException("flushing " + file, e);
        }
    }

    @Override
    public void stop() {
        try {
            out.close();
        } catch (IOException e) {
            throw new ConnectException("closing " + file, e);
        }
    }

    @Override
    public String version() {
        return "1";
    }
}
