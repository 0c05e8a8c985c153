package ottla.streams;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.WindowStore;

/**
 * A Kafka Streams application for the tests: page views keyed by user are re-keyed by page
 * (a repartition topic), counted per page in tumbling one-minute windows of event time (a
 * windowed state store with its changelog), and written as "page@windowStart" -> count.
 *
 * <p>Usage: {@code WindowedCounts INPUT OUTPUT streams.properties}. It prints JSON lines:
 * {@code {"event":"state","state":S,"active":[tasks]}} on every state change (the active
 * tasks once RUNNING), {@code {"event":"error",...}} if a stream thread dies, and
 * {@code {"event":"closed"}} after a clean close on SIGTERM.
 */
public final class WindowedCounts {
    /** Late records (event time behind the stream time) still count: the result must not
     * depend on the order in which the repartitioned records reach a task. */
    static final Duration WINDOW = Duration.ofMinutes(1);
    static final Duration GRACE = Duration.ofDays(1);

    private WindowedCounts() {
    }

    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .groupBy((user, page) -> page, Grouped.with("by-page", Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeAndGrace(WINDOW, GRACE))
            .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("page-counts")
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .map((window, count) -> KeyValue.pair(
                window.key() + "@" + window.window().start(), Long.toString(count)))
            .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    public static void main(String[] args) throws IOException {
        Properties config = new Properties();
        try (InputStream in = new FileInputStream(args[2])) {
            config.load(in);
        }
        KafkaStreams streams = new KafkaStreams(topology(args[0], args[1]), config);
        streams.setStateListener((now, before) -> {
            TreeSet<String> active = new TreeSet<>();
            if (now == KafkaStreams.State.RUNNING) {
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    thread.activeTasks().forEach(t -> active.add(t.taskId().toString()));
                }
            }
            emit("{\"event\":\"state\",\"state\":\"" + now + "\",\"active\":"
                 + quoted(active) + "}");
        });
        streams.setUncaughtExceptionHandler(e -> {
            emit("{\"event\":\"error\",\"error\":" + quoted(e.toString()) + "}");
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            emit("{\"event\":\"closed\"}");
        }));
        streams.start();
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String quoted(Iterable<String> items) {
        StringBuilder out = new StringBuilder("[");
        for (String item : items) {
            out.append(out.length() > 1 ? "," : "").append(quoted(item));
        }
        return out.append(']').toString();
    }

    private static String quoted(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }
}
