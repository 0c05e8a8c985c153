package ottla.clients;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's own Java clients (4.4) driven by one JSON command: the tests that check Ottla
 * with the reference clients start this program, give it a command as the first
 * argument and read JSON lines from its standard output (one per event, then a last
 * line with "event":"done"). An error prints "event":"error" with the exception's class
 * and message and exits 1, so a test sees what the client saw.
 */
public final class JavaClients {
    private static final ObjectMapper JSON = new ObjectMapper();

    private JavaClients() {
    }

    public static void main(String[] args) throws Exception {
        JsonNode command = JSON.readTree(args[0]);
        String op = command.get("op").asText();
        try {
            switch (op) {
                case "produce" -> produce(command);
                case "consume" -> consume(command);
                case "share-consume" -> shareConsume(command);
                case "admin" -> admin(command);
                default -> throw new IllegalArgumentException("unknown op " + op);
            }
            emit(Map.of("event", "done"));
            System.exit(0);
        } catch (Throwable e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            Map<String, Object> error = new LinkedHashMap<>();
            error.put("event", "error");
            error.put("error", cause.getClass().getName());
            error.put("message", String.valueOf(cause.getMessage()));
            emit(error);
            System.exit(1);
        }
    }

    static synchronized void emit(Map<String, ?> event) {
        try {
            System.out.println(JSON.writeValueAsString(event));
            System.out.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static Properties properties(JsonNode command) {
        Properties props = new Properties();
        props.put("bootstrap.servers", command.get("bootstrap").asText());
        JsonNode config = command.get("config");
        if (config != null) {
            for (Map.Entry<String, JsonNode> entry : config.properties()) {
                props.put(entry.getKey(), entry.getValue().asText());
            }
        }
        return props;
    }

    static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }

    static byte[] bytes(String text) {
        return text == null ? null : text.getBytes(StandardCharsets.UTF_8);
    }

    // --- producing --------------------------------------------------------------------------

    /**
     * Produce "count" records "prefix0".."prefixN" (keys "k0".., or no key) to "topic" (a
     * "partition" if given), in "transactions" transactions of equal size when the config
     * has a transactional.id, each committed unless its index is in "abort"; reports every
     * acknowledged offset per partition and every error. "pace_ms" spaces the sends, for a
     * producer that must live a known time (its telemetry pushes on an interval).
     */
    static void produce(JsonNode command) throws Exception {
        Properties props = properties(command);
        String topic = command.get("topic").asText();
        int count = command.path("count").asInt(1);
        long paceMs = command.path("pace_ms").asLong(0);
        String prefix = command.path("prefix").asText("v");
        boolean keyed = command.path("keyed").asBoolean(true);
        Integer partition = command.has("partition") ? command.get("partition").asInt() : null;
        boolean transactional = props.containsKey("transactional.id");
        int transactions = transactional ? command.path("transactions").asInt(1) : 1;
        Set<Integer> aborted = new HashSet<>();
        command.path("abort").forEach(n -> aborted.add(n.asInt()));
        AtomicInteger acked = new AtomicInteger();
        List<String> errors = new ArrayList<>();
        Map<String, List<Long>> offsets = new HashMap<>();
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            if (transactional) {
                producer.initTransactions();
            }
            int per = (count + transactions - 1) / transactions;
            for (int t = 0, i = 0; t < transactions; t++) {
                if (transactional) {
                    producer.beginTransaction();
                }
                for (int j = 0; j < per && i < count; j++, i++) {
                    if (paceMs > 0 && i > 0) {
                        Thread.sleep(paceMs);
                    }
                    String key = keyed ? "k" + i : null;
                    producer.send(new ProducerRecord<>(topic, partition, bytes(key), bytes(prefix + i)),
                        (RecordMetadata metadata, Exception e) -> {
                            synchronized (errors) {
                                if (e != null) {
                                    errors.add(e.getClass().getSimpleName() + ": " + e.getMessage());
                                } else {
                                    acked.incrementAndGet();
                                    offsets.computeIfAbsent(String.valueOf(metadata.partition()),
                                        p -> new ArrayList<>()).add(metadata.offset());
                                }
                            }
                        });
                }
                if (transactional) {
                    producer.flush(); // the aborted records are written too, then marked
                    if (aborted.contains(t)) {
                        producer.abortTransaction();
                    } else {
                        producer.commitTransaction();
                    }
                }
            }
            producer.flush();
        }
        Map<String, Object> done = new LinkedHashMap<>();
        done.put("event", "produced");
        done.put("acked", acked.get());
        done.put("errors", errors);
        done.put("offsets", offsets);
        emit(done);
    }

    // --- consuming --------------------------------------------------------------------------

    /**
     * Subscribe "group" to "topics" (group.protocol from the config: classic or consumer)
     * and print every record and every assignment change until "count" records or
     * "timeout_ms"; commit synchronously after each poll unless "commit" is false.
     */
    static void consume(JsonNode command) throws Exception {
        Properties props = properties(command);
        props.putIfAbsent("group.id", command.path("group").asText("java-group"));
        props.putIfAbsent("auto.offset.reset", "earliest");
        props.putIfAbsent("enable.auto.commit", "false");
        List<String> topics = new ArrayList<>();
        command.get("topics").forEach(n -> topics.add(n.asText()));
        int count = command.path("count").asInt(Integer.MAX_VALUE);
        long deadline = System.currentTimeMillis() + command.path("timeout_ms").asLong(30000);
        boolean commit = command.path("commit").asBoolean(true);
        int seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(topics, new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    emit(Map.of("event", "revoked", "partitions", names(partitions)));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    emit(Map.of("event", "assigned", "partitions", names(partitions)));
                }
            });
            while (seen < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    Map<String, Object> event = new LinkedHashMap<>();
                    event.put("event", "record");
                    event.put("topic", r.topic());
                    event.put("partition", r.partition());
                    event.put("offset", r.offset());
                    event.put("key", text(r.key()));
                    event.put("value", text(r.value()));
                    emit(event);
                    seen++;
                }
                if (commit && !records.isEmpty()) {
                    consumer.commitSync();
                }
            }
        }
        emit(Map.of("event", "consumed", "count", seen));
    }

    static List<String> names(Collection<TopicPartition> partitions) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            out.add(tp.topic() + "-" + tp.partition());
        }
        out.sort(null);
        return out;
    }

    /**
     * A KafkaShareConsumer of "group" on "topics": prints each record with its delivery
     * count; in explicit mode acknowledges it as "acks" says for its value (ACCEPT by
     * default; "first_only": the rule applies at the first delivery, later ones ACCEPT),
     * then commitSync. With "die_after" it halts (no close, like kill -9) after that many
     * records, holding them.
     */
    static void shareConsume(JsonNode command) throws Exception {
        Properties props = properties(command);
        props.putIfAbsent("group.id", command.path("group").asText("java-share-group"));
        boolean explicit = "explicit".equals(props.getProperty("share.acknowledgement.mode"));
        List<String> topics = new ArrayList<>();
        command.get("topics").forEach(n -> topics.add(n.asText()));
        int count = command.path("count").asInt(Integer.MAX_VALUE);
        int dieAfter = command.path("die_after").asInt(-1);
        long deadline = System.currentTimeMillis() + command.path("timeout_ms").asLong(30000);
        JsonNode acks = command.path("acks");
        boolean firstOnly = command.path("first_only").asBoolean(true);
        int seen = 0;
        KafkaShareConsumer<byte[], byte[]> consumer =
            new KafkaShareConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        consumer.subscribe(topics);
        while (seen < count && System.currentTimeMillis() < deadline) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
            for (ConsumerRecord<byte[], byte[]> r : records) {
                int delivery = r.deliveryCount().map(Short::intValue).orElse(-1);
                Map<String, Object> event = new LinkedHashMap<>();
                event.put("event", "record");
                event.put("topic", r.topic());
                event.put("partition", r.partition());
                event.put("offset", r.offset());
                event.put("value", text(r.value()));
                event.put("delivery_count", delivery);
                emit(event);
                seen++;
                if (dieAfter > 0 && seen >= dieAfter) {
                    Runtime.getRuntime().halt(3);
                }
                if (explicit) {
                    String kind = acks.path(text(r.value())).asText("ACCEPT");
                    if (firstOnly && delivery > 1) {
                        kind = "ACCEPT";
                    }
                    consumer.acknowledge(r, AcknowledgeType.valueOf(kind));
                }
            }
            if (!records.isEmpty()) {
                consumer.commitSync();
            }
        }
        consumer.close();
        emit(Map.of("event", "consumed", "count", seen));
    }

    // --- administering ----------------------------------------------------------------------

    /** Each of "calls" in turn on one Admin client; one "result" line per call. */
    static void admin(JsonNode command) throws Exception {
        try (Admin admin = Admin.create(properties(command))) {
            for (JsonNode call : command.get("calls")) {
                Map<String, Object> result = new LinkedHashMap<>();
                result.put("event", "result");
                result.put("call", call.get("call").asText());
                try {
                    result.put("value", adminCall(admin, call));
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause() != null ? e.getCause() : e;
                    result.put("error", cause.getClass().getSimpleName());
                    result.put("message", String.valueOf(cause.getMessage()));
                }
                emit(result);
            }
        }
    }

    static TopicPartition tp(JsonNode node) {
        return new TopicPartition(node.get("topic").asText(), node.get("partition").asInt());
    }

    static List<String> strings(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(n -> out.add(n.asText()));
        return out;
    }

    static ConfigResource resource(JsonNode call) {
        return new ConfigResource(ConfigResource.Type.valueOf(call.get("type").asText()),
            call.get("name").asText());
    }

    static Map<String, Object> node(Node node) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("id", node.id());
        out.put("host", node.host());
        out.put("port", node.port());
        out.put("rack", node.rack());
        return out;
    }

    static Object adminCall(Admin admin, JsonNode call) throws Exception {
        String name = call.get("call").asText();
        switch (name) {
            case "create_topics": {
                List<NewTopic> topics = new ArrayList<>();
                for (JsonNode t : call.get("topics")) {
                    NewTopic topic = new NewTopic(t.get("name").asText(),
                        t.has("partitions") ? Optional.of(t.get("partitions").asInt()) : Optional.empty(),
                        t.has("replication_factor") ? Optional.of((short) t.get("replication_factor").asInt())
                            : Optional.empty());
                    Map<String, String> configs = new HashMap<>();
                    for (Map.Entry<String, JsonNode> e : t.path("configs").properties()) {
                        configs.put(e.getKey(), e.getValue().asText());
                    }
                    topics.add(topic.configs(configs));
                }
                // Admin retries a topic refused by a controller mutation quota (KIP-599)
                // until it passes, unless told not to.
                admin.createTopics(topics, new CreateTopicsOptions().retryOnQuotaViolation(
                    call.path("retry_on_quota_violation").asBoolean(true))).all().get();
                return "ok";
            }
            case "list_topics":
                return new ArrayList<>(admin.listTopics(new ListTopicsOptions().listInternal(
                    call.path("internal").asBoolean(false))).names().get());
            case "describe_topics": {
                Map<String, Object> out = new LinkedHashMap<>();
                for (TopicDescription d : admin.describeTopics(strings(call.get("topics")))
                         .allTopicNames().get().values()) {
                    List<Map<String, Object>> parts = new ArrayList<>();
                    for (TopicPartitionInfo p : d.partitions()) {
                        Map<String, Object> part = new LinkedHashMap<>();
                        part.put("partition", p.partition());
                        part.put("leader", p.leader() == null ? -1 : p.leader().id());
                        part.put("replicas", p.replicas().stream().map(Node::id).toList());
                        part.put("isr", p.isr().stream().map(Node::id).toList());
                        parts.add(part);
                    }
                    out.put(d.name(), Map.of("internal", d.isInternal(), "topic_id", d.topicId().toString(),
                        "partitions", parts));
                }
                return out;
            }
            case "create_partitions": {
                admin.createPartitions(Map.of(call.get("topic").asText(),
                    NewPartitions.increaseTo(call.get("total").asInt()))).all().get();
                return "ok";
            }
            case "delete_topics":
                admin.deleteTopics(strings(call.get("topics"))).all().get();
                return "ok";
            case "describe_configs": {
                ConfigResource resource = resource(call);
                Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
                Map<String, Object> out = new LinkedHashMap<>();
                for (ConfigEntry e : config.entries()) {
                    Map<String, Object> entry = new LinkedHashMap<>();
                    entry.put("value", e.value());
                    entry.put("source", e.source().name());
                    entry.put("read_only", e.isReadOnly());
                    entry.put("sensitive", e.isSensitive());
                    out.put(e.name(), entry);
                }
                return out;
            }
            case "incremental_alter_configs": {
                List<AlterConfigOp> ops = new ArrayList<>();
                for (JsonNode op : call.get("ops")) {
                    ops.add(new AlterConfigOp(new ConfigEntry(op.get("name").asText(),
                        op.path("value").isNull() ? null : op.path("value").asText(null)),
                        AlterConfigOp.OpType.valueOf(op.path("op").asText("SET"))));
                }
                admin.incrementalAlterConfigs(Map.of(resource(call), ops)).all().get();
                return "ok";
            }
            case "describe_cluster": {
                DescribeClusterResult result = admin.describeCluster();
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("cluster_id", result.clusterId().get());
                out.put("controller", result.controller().get().id());
                List<Map<String, Object>> nodes = new ArrayList<>();
                for (Node n : result.nodes().get()) {
                    nodes.add(node(n));
                }
                out.put("nodes", nodes);
                return out;
            }
            case "describe_log_dirs": {
                List<Integer> brokers = new ArrayList<>();
                call.get("brokers").forEach(n -> brokers.add(n.asInt()));
                Map<String, Object> out = new LinkedHashMap<>();
                for (Map.Entry<Integer, Map<String, LogDirDescription>> b :
                         admin.describeLogDirs(brokers).allDescriptions().get().entrySet()) {
                    Map<String, Object> dirs = new LinkedHashMap<>();
                    for (Map.Entry<String, LogDirDescription> d : b.getValue().entrySet()) {
                        Map<String, Object> replicas = new LinkedHashMap<>();
                        for (Map.Entry<TopicPartition, ReplicaInfo> r : d.getValue().replicaInfos().entrySet()) {
                            replicas.put(r.getKey().toString(), r.getValue().size());
                        }
                        dirs.put(d.getKey(), Map.of("error", String.valueOf(d.getValue().error()),
                            "replicas", replicas, "cordoned", d.getValue().isCordoned()));
                    }
                    out.put(String.valueOf(b.getKey()), dirs);
                }
                return out;
            }
            case "describe_producers": {
                TopicPartition tp = tp(call);
                List<Map<String, Object>> out = new ArrayList<>();
                for (ProducerState p : admin.describeProducers(List.of(tp)).partitionResult(tp).get()
                         .activeProducers()) {
                    out.add(Map.of("producer_id", p.producerId(), "epoch", p.producerEpoch(),
                        "last_sequence", p.lastSequence()));
                }
                return out;
            }
            case "describe_transactions": {
                Map<String, Object> out = new LinkedHashMap<>();
                for (Map.Entry<String, TransactionDescription> t :
                         admin.describeTransactions(strings(call.get("ids"))).all().get().entrySet()) {
                    out.put(t.getKey(), Map.of("state", t.getValue().state().toString(),
                        "producer_id", t.getValue().producerId(),
                        "partitions", names(t.getValue().topicPartitions())));
                }
                return out;
            }
            case "list_transactions": {
                List<Map<String, Object>> out = new ArrayList<>();
                for (TransactionListing t : admin.listTransactions().all().get()) {
                    out.add(Map.of("id", t.transactionalId(), "producer_id", t.producerId(),
                        "state", t.state().toString()));
                }
                return out;
            }
            case "list_groups": {
                List<Map<String, Object>> out = new ArrayList<>();
                for (GroupListing g : admin.listGroups().all().get()) {
                    out.add(Map.of("group", g.groupId(), "type", g.type().map(Object::toString).orElse(""),
                        "state", g.groupState().map(Object::toString).orElse("")));
                }
                return out;
            }
            case "describe_consumer_groups": {
                Map<String, Object> out = new LinkedHashMap<>();
                for (ConsumerGroupDescription g : admin.describeConsumerGroups(strings(call.get("groups")))
                         .all().get().values()) {
                    List<Map<String, Object>> members = new ArrayList<>();
                    for (MemberDescription m : g.members()) {
                        members.add(Map.of("client_id", m.clientId(),
                            "partitions", names(m.assignment().topicPartitions())));
                    }
                    out.put(g.groupId(), Map.of("state", g.groupState().toString(), "type", g.type().toString(),
                        "members", members));
                }
                return out;
            }
            case "list_offsets_of_group": {
                Map<String, Object> out = new LinkedHashMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : admin.listConsumerGroupOffsets(
                        call.get("group").asText()).partitionsToOffsetAndMetadata().get().entrySet()) {
                    out.put(e.getKey().toString(), e.getValue() == null ? null : e.getValue().offset());
                }
                return out;
            }
            case "alter_offsets_of_group": {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (JsonNode o : call.get("offsets")) {
                    offsets.put(tp(o), new OffsetAndMetadata(o.get("offset").asLong()));
                }
                admin.alterConsumerGroupOffsets(call.get("group").asText(), offsets).all().get();
                return "ok";
            }
            case "delete_offsets_of_group": {
                Set<TopicPartition> partitions = new HashSet<>();
                call.get("partitions").forEach(p -> partitions.add(tp(p)));
                admin.deleteConsumerGroupOffsets(call.get("group").asText(), partitions).all().get();
                return "ok";
            }
            case "delete_groups":
                admin.deleteConsumerGroups(strings(call.get("groups"))).all().get();
                return "ok";
            case "elect_leaders": {
                Set<TopicPartition> partitions = new HashSet<>();
                call.get("partitions").forEach(p -> partitions.add(tp(p)));
                Map<String, Object> out = new LinkedHashMap<>();
                for (Map.Entry<TopicPartition, Optional<Throwable>> e : admin.electLeaders(
                        ElectionType.valueOf(call.path("type").asText("PREFERRED")), partitions)
                         .partitions().get().entrySet()) {
                    out.put(e.getKey().toString(), e.getValue().map(t -> t.getClass().getSimpleName()).orElse("ok"));
                }
                return out;
            }
            case "reassign": {
                Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new HashMap<>();
                for (JsonNode m : call.get("moves")) {
                    List<Integer> replicas = new ArrayList<>();
                    m.get("replicas").forEach(r -> replicas.add(r.asInt()));
                    moves.put(tp(m), Optional.of(new NewPartitionReassignment(replicas)));
                }
                admin.alterPartitionReassignments(moves).all().get();
                return "ok";
            }
            case "list_reassignments": {
                Map<String, Object> out = new LinkedHashMap<>();
                for (Map.Entry<TopicPartition, PartitionReassignment> e :
                         admin.listPartitionReassignments().reassignments().get().entrySet()) {
                    out.put(e.getKey().toString(), e.getValue().replicas());
                }
                return out;
            }
            case "describe_features": {
                FeatureMetadata features = admin.describeFeatures().featureMetadata().get();
                Map<String, Object> finalized = new LinkedHashMap<>();
                features.finalizedFeatures().forEach((k, v) -> finalized.put(k, v.maxVersionLevel()));
                Map<String, Object> supported = new LinkedHashMap<>();
                features.supportedFeatures().forEach((k, v) -> supported.put(k,
                    List.of(v.minVersion(), v.maxVersion())));
                return Map.of("finalized", finalized, "supported", supported);
            }
            case "describe_quorum": {
                QuorumInfo quorum = admin.describeMetadataQuorum().quorumInfo().get();
                return Map.of("leader", quorum.leaderId(), "epoch", quorum.leaderEpoch(),
                    "voters", quorum.voters().stream().map(QuorumInfo.ReplicaState::replicaId).toList(),
                    "observers", quorum.observers().stream().map(QuorumInfo.ReplicaState::replicaId).toList());
            }
            case "list_offsets": {
                TopicPartition tp = tp(call);
                String spec = call.path("spec").asText("latest");
                OffsetSpec offsetSpec = switch (spec) {
                    case "earliest" -> OffsetSpec.earliest();
                    case "max_timestamp" -> OffsetSpec.maxTimestamp();
                    case "latest" -> OffsetSpec.latest();
                    default -> OffsetSpec.forTimestamp(Long.parseLong(spec));
                };
                return admin.listOffsets(Map.of(tp, offsetSpec)).partitionResult(tp).get().offset();
            }
            case "delete_records": {
                TopicPartition tp = tp(call);
                return admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(call.get("before").asLong())))
                    .lowWatermarks().get(tp).get().lowWatermark();
            }
            case "describe_share_groups": {
                Map<String, Object> out = new LinkedHashMap<>();
                for (ShareGroupDescription g : admin.describeShareGroups(strings(call.get("groups")))
                         .all().get().values()) {
                    List<Map<String, Object>> members = new ArrayList<>();
                    for (ShareMemberDescription m : g.members()) {
                        members.add(Map.of("client_id", m.clientId(),
                            "partitions", names(m.assignment().topicPartitions())));
                    }
                    out.put(g.groupId(), Map.of("state", g.groupState().toString(), "members", members));
                }
                return out;
            }
            default:
                throw new IllegalArgumentException("unknown admin call " + name);
        }
    }
}
