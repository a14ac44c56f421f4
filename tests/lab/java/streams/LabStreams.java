import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Kafka Streams in the lab: streams groups (KIP-1071, {@code group.protocol=streams}, Kafka 4.1+) and Kafka's own
 * description of them. A JSON-lines process like {@code LabClient}: one request per stdin line
 * {@code {"id", "op", ...}}, one response per stdout line {@code {"id", "ok", "result"|"error"}}.
 *
 * <pre>
 * java -cp STREAMS_CLASSPATH:CLASSES LabStreams BOOTSTRAP
 * </pre>
 *
 * Ops: {@code create_topics} {names, partitions}; {@code produce} {topic, partitions, count, keys} (String key
 * {@code k<i % keys>}, value {@code v<i>}, acks=all); {@code start} {name, app_id, input, output, counts, threads,
 * state_dir, commit_ms, protocol} (one KafkaStreams instance, see {@link #topology}); {@code states};
 * {@code processed}; {@code describe} {group} (Admin {@code describeStreamsGroups}); {@code committed} {group}
 * (Admin {@code listStreamsGroupOffsets}); {@code end_offsets} {topics}; {@code partitions} {topics};
 * {@code close} {name, timeout_ms}; {@code quit} (exits at once, closing nothing: the members stay in the group).
 *
 * <p>Compiled separately from {@code tests/lab/java/*.java} (against the {@code -Pstreams} classpath of
 * {@code tests/lab/pom.xml}). The streams-group Admin API (4.1+) is reached by reflection, so this compiles against
 * Kafka 3.9.2's jars too.
 */
public final class LabStreams {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String bootstrap;
    private final Admin admin;
    private final Map<String, KafkaStreams> apps = new LinkedHashMap<>();
    private final Map<String, AtomicLong> processed = new LinkedHashMap<>();

    private LabStreams(String bootstrap) {
        this.bootstrap = bootstrap;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "lab-streams-admin");
        this.admin = Admin.create(p);
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err); // Kafka's and Streams' own output must never reach the protocol stream
        LabStreams lab = new LabStreams(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode r = JSON.readTree(line);
            if ("quit".equals(r.path("op").asText())) {
                out.println(JSON.createObjectNode().put("id", r.path("id").asLong()).put("ok", true));
                out.flush();
                Runtime.getRuntime().halt(0);
            }
            ObjectNode resp = JSON.createObjectNode();
            resp.put("id", r.path("id").asLong());
            try {
                resp.set("result", lab.handle(r));
                resp.put("ok", true);
            } catch (Throwable t) {
                Throwable c = t;
                while ((c instanceof java.util.concurrent.ExecutionException
                        || c instanceof java.lang.reflect.InvocationTargetException) && c.getCause() != null) {
                    c = c.getCause();
                }
                resp.put("ok", false);
                resp.put("error", c.getClass().getName() + ": " + c.getMessage());
            }
            out.println(JSON.writeValueAsString(resp));
            out.flush();
        }
        Runtime.getRuntime().halt(0);
    }

    private JsonNode handle(JsonNode r) throws Exception {
        switch (r.path("op").asText()) {
            case "create_topics": return createTopics(r);
            case "produce": return produce(r);
            case "start": return start(r);
            case "states": {
                ObjectNode o = JSON.createObjectNode();
                for (var e : apps.entrySet()) o.put(e.getKey(), e.getValue().state().name());
                return o;
            }
            case "processed": {
                ObjectNode o = JSON.createObjectNode();
                for (var e : processed.entrySet()) o.put(e.getKey(), e.getValue().get());
                return o;
            }
            case "describe": return describe(r.get("group").asText());
            case "committed": return committed(r.get("group").asText());
            case "end_offsets": return endOffsets(strings(r.get("topics")));
            case "partitions": return partitions(strings(r.get("topics")));
            case "close": {
                KafkaStreams s = apps.remove(r.get("name").asText());
                if (s == null) throw new IllegalArgumentException("no instance " + r.get("name").asText());
                return JSON.getNodeFactory().booleanNode(s.close(Duration.ofMillis(r.path("timeout_ms").asLong(30000))));
            }
            default: throw new IllegalArgumentException("unknown op " + r.path("op").asText());
        }
    }

    private static List<String> strings(JsonNode arr) {
        List<String> out = new ArrayList<>();
        for (JsonNode n : arr) out.add(n.asText());
        return out;
    }

    private JsonNode createTopics(JsonNode r) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        for (String name : strings(r.get("names"))) {
            topics.add(new NewTopic(name, r.path("partitions").asInt(4), (short) r.path("rf").asInt(1)));
        }
        admin.createTopics(topics).all().get();
        return null;
    }

    private JsonNode produce(JsonNode r) throws Exception {
        String topic = r.get("topic").asText();
        int partitions = r.get("partitions").asInt(), count = r.get("count").asInt(), keys = r.path("keys").asInt(16);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "lab-streams-producer");
        int sent = 0;
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int part = 0; part < partitions; part++) {
                for (int i = 0; i < count; i++) {
                    prod.send(new ProducerRecord<>(topic, part, "k" + (sent % keys), "v" + sent));
                    sent++;
                }
            }
            prod.flush();
        }
        return JSON.getNodeFactory().numberNode(sent);
    }

    /**
     * Two subtopologies: (0) {@code input} → mapValues → {@code output}, and {@code input} re-keyed (map: key
     * {@code r<n % 24>} of value {@code v<n>}) into the repartition topic {@code <app_id>-rekeyed-repartition}; (1) that
     * repartition topic → count (in-memory store {@code counts}, changelog {@code <app_id>-counts-changelog}) →
     * {@code counts}.
     */
    private Topology topology(String name, String input, String output, String counts) {
        AtomicLong n = processed.computeIfAbsent(name, k -> new AtomicLong());
        StreamsBuilder b = new StreamsBuilder();
        KStream<String, String> in = b.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
        in.peek((k, v) -> n.incrementAndGet())
                .mapValues(v -> v.toUpperCase())
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        in.map((k, v) -> KeyValue.pair("r" + Integer.parseInt(v.substring(1)) % 24, v))
                .groupByKey(Grouped.with("rekeyed", Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(counts, Produced.with(Serdes.String(), Serdes.Long()));
        return b.build();
    }

    private JsonNode start(JsonNode r) {
        String name = r.get("name").asText();
        if (apps.containsKey(name)) throw new IllegalArgumentException("instance " + name + " already started");
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, r.get("app_id").asText());
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.CLIENT_ID_CONFIG, r.path("client_id").asText(name));
        // StreamsConfig.GROUP_PROTOCOL_CONFIG (4.1+; a string here so that this compiles against 3.9)
        p.put("group.protocol", r.path("protocol").asText("streams"));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, r.path("threads").asInt(1));
        p.put(StreamsConfig.STATE_DIR_CONFIG, r.get("state_dir").asText());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, r.path("commit_ms").asInt(200));
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, r.path("rf").asInt(1));
        p.put("consumer.auto.offset.reset", "earliest");
        p.put("statestore.cache.max.bytes", 0); // every count forwarded at once
        KafkaStreams s = new KafkaStreams(
                topology(name, r.get("input").asText(), r.get("output").asText(), r.get("counts").asText()), p);
        s.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        apps.put(name, s);
        s.start();
        return null;
    }

    // ------------------------------------------------------------------ Admin, streams groups by reflection
    private static Object call(Object o, String method, Object... args) throws Exception {
        for (Method m : o.getClass().getMethods()) {
            if (m.getName().equals(method) && m.getParameterCount() == args.length) {
                m.setAccessible(true);
                return m.invoke(o, args);
            }
        }
        throw new NoSuchMethodException(o.getClass().getName() + "." + method + "/" + args.length);
    }

    private static String opt(Object optional) {
        return optional instanceof Optional ? ((Optional<?>) optional).map(String::valueOf).orElse(null) : null;
    }

    private static ArrayNode tasks(Object assignment, String kind) throws Exception {
        ArrayNode arr = JSON.createArrayNode();
        if (assignment == null) return arr;
        for (Object t : (Collection<?>) call(assignment, kind)) {
            ObjectNode o = arr.addObject();
            o.put("subtopology_id", (String) call(t, "subtopologyId"));
            ArrayNode parts = o.putArray("partitions");
            for (Object p : (Collection<?>) call(t, "partitions")) parts.add((Integer) p);
        }
        return arr;
    }

    /** Admin.describeStreamsGroups: the group's state, epochs, subtopologies and members. */
    private JsonNode describe(String group) throws Exception {
        Method m = Admin.class.getMethod("describeStreamsGroups", Collection.class);
        Object result = m.invoke(admin, List.of(group));
        Map<?, ?> all = (Map<?, ?>) ((KafkaFuture<?>) call(result, "all")).get();
        Object d = all.get(group);
        ObjectNode o = JSON.createObjectNode();
        o.put("group", (String) call(d, "groupId"));
        o.put("state", String.valueOf(call(d, "groupState")));
        o.put("group_epoch", (Integer) call(d, "groupEpoch"));
        o.put("target_assignment_epoch", (Integer) call(d, "targetAssignmentEpoch"));
        o.put("topology_epoch", (Integer) call(d, "topologyEpoch"));
        Object coordinator = call(d, "coordinator");
        o.put("coordinator", coordinator == null ? null : ((org.apache.kafka.common.Node) coordinator).id());
        try {
            o.put("assignor", opt(call(d, "assignorName")));
        } catch (NoSuchMethodException e) {
            o.putNull("assignor");
        }
        ArrayNode subs = o.putArray("subtopologies");
        for (Object s : (Collection<?>) call(d, "subtopologies")) {
            ObjectNode so = subs.addObject();
            so.put("subtopology_id", (String) call(s, "subtopologyId"));
            ArrayNode src = so.putArray("source_topics");
            for (Object t : (Collection<?>) call(s, "sourceTopics")) src.add((String) t);
            ArrayNode sinks = so.putArray("repartition_sink_topics");
            for (Object t : (Collection<?>) call(s, "repartitionSinkTopics")) sinks.add((String) t);
            ObjectNode rsrc = so.putObject("repartition_source_topics");
            for (var e : ((Map<?, ?>) call(s, "repartitionSourceTopics")).entrySet()) {
                rsrc.put((String) e.getKey(), (Integer) call(e.getValue(), "partitions"));
            }
            ArrayNode changelogs = so.putArray("state_changelog_topics");
            for (Object t : ((Map<?, ?>) call(s, "stateChangelogTopics")).keySet()) changelogs.add((String) t);
        }
        ArrayNode members = o.putArray("members");
        for (Object mem : (Collection<?>) call(d, "members")) {
            ObjectNode mo = members.addObject();
            mo.put("member_id", (String) call(mem, "memberId"));
            mo.put("member_epoch", (Integer) call(mem, "memberEpoch"));
            mo.put("instance_id", opt(call(mem, "instanceId")));
            mo.put("rack_id", opt(call(mem, "rackId")));
            mo.put("client_id", (String) call(mem, "clientId"));
            mo.put("client_host", (String) call(mem, "clientHost"));
            mo.put("process_id", (String) call(mem, "processId"));
            mo.put("topology_epoch", (Integer) call(mem, "topologyEpoch"));
            mo.put("is_classic", (Boolean) call(mem, "isClassic"));
            Object a = call(mem, "assignment"), ta = call(mem, "targetAssignment");
            mo.set("active_tasks", tasks(a, "activeTasks"));
            mo.set("standby_tasks", tasks(a, "standbyTasks"));
            mo.set("warmup_tasks", tasks(a, "warmupTasks"));
            mo.set("target_active_tasks", tasks(ta, "activeTasks"));
        }
        return o;
    }

    /** Admin.listStreamsGroupOffsets (every partition the group committed). */
    private JsonNode committed(String group) throws Exception {
        Class<?> spec = Class.forName("org.apache.kafka.clients.admin.ListStreamsGroupOffsetsSpec");
        Method m = Admin.class.getMethod("listStreamsGroupOffsets", Map.class);
        Object result = m.invoke(admin, Map.of(group, spec.getConstructor().newInstance()));
        Map<?, ?> offsets = (Map<?, ?>) ((KafkaFuture<?>) call(result, "partitionsToOffsetAndMetadata", group)).get();
        ArrayNode arr = JSON.createArrayNode();
        for (var e : offsets.entrySet()) {
            TopicPartition tp = (TopicPartition) e.getKey();
            OffsetAndMetadata om = (OffsetAndMetadata) e.getValue();
            if (om == null) continue;
            ObjectNode o = arr.addObject();
            o.put("group", group);
            o.put("topic", tp.topic());
            o.put("partition", tp.partition());
            o.put("offset", om.offset());
            o.put("leader_epoch", om.leaderEpoch().orElse(null));
        }
        return arr;
    }

    private JsonNode partitions(List<String> topics) throws Exception {
        Map<String, TopicDescription> d = admin.describeTopics(topics).allTopicNames().get();
        ObjectNode o = JSON.createObjectNode();
        for (var e : d.entrySet()) o.put(e.getKey(), e.getValue().partitions().size());
        return o;
    }

    private JsonNode endOffsets(List<String> topics) throws Exception {
        Map<String, TopicDescription> d = admin.describeTopics(topics).allTopicNames().get();
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        for (var e : d.entrySet()) {
            for (var p : e.getValue().partitions()) req.put(new TopicPartition(e.getKey(), p.partition()), OffsetSpec.latest());
        }
        var res = admin.listOffsets(req).all().get();
        ArrayNode arr = JSON.createArrayNode();
        for (var e : res.entrySet()) {
            ObjectNode o = arr.addObject();
            o.put("topic", e.getKey().topic());
            o.put("partition", e.getKey().partition());
            o.put("offset", e.getValue().offset());
        }
        return arr;
    }
}
