import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.NoOffsetForPartitionException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * The Kafka lab's Java side: Kafka's own clients driving a real cluster, and the oracle.
 *
 * <p>A JSON-lines server: each stdin line is {"id", "op", ...}; each answer is one stdout line
 * {"id", "ok": true, "result": ...} or {"id", "ok": false, "error": "Class: message"}.
 *
 * <p>The oracle ("verdicts"): for each group-partition, a fresh KafkaConsumer with that group.id,
 * enable.auto.commit=false and auto.offset.reset=none is assigned the partition (it never joins
 * the group, never commits) and polled. It resumes from the committed offset and leader epoch it
 * fetches itself (OffsetFetch), validates that position with OffsetsForLeaderEpoch (KIP-320) and
 * reports what Kafka's consumer does: OK, LogTruncationException (with divergentOffsets()),
 * OffsetOutOfRangeException or NoOffsetForPartitionException; NO_VERDICT when none surfaced
 * in the time allowed (e.g. a committed epoch newer than any metadata the consumer sees).
 */
public final class LabClient {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final String bootstrap;
    private final Admin admin;
    private final Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();

    private LabClient(String bootstrap) {
        this.bootstrap = bootstrap;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        this.admin = Admin.create(p);
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err); // client logging never mixes with answers
        LabClient client = new LabClient(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode req = JSON.readTree(line);
            ObjectNode resp = JSON.createObjectNode();
            resp.set("id", req.get("id"));
            try {
                if ("quit".equals(req.path("op").asText())) break;
                resp.set("result", client.handle(req));
                resp.put("ok", true);
            } catch (Throwable t) {
                Throwable c = (t instanceof ExecutionException && t.getCause() != null) ? t.getCause() : t;
                resp.put("ok", false);
                resp.put("error", c.getClass().getName() + ": " + c.getMessage());
            }
            out.println(JSON.writeValueAsString(resp));
        }
        client.close();
        out.println("{\"bye\":true}");
        System.exit(0);
    }

    private final List<Thread> held = new ArrayList<>();
    private final java.util.concurrent.atomic.AtomicBoolean releasing = new java.util.concurrent.atomic.AtomicBoolean();

    /**
     * A group member that stays: subscribe (classic or KIP-848 "consumer" protocol), then poll and commitSync
     * in a background thread until "release". {"group", "topics", "client_id", "protocol", "instance_id"?}.
     * Returns once the member has an assignment and has committed it.
     */
    private JsonNode hold(JsonNode r) throws Exception {
        Properties p = consumerProps(r.get("group").asText(), r.path("protocol").asText("classic"));
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, r.get("client_id").asText());
        if (r.hasNonNull("instance_id")) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, r.get("instance_id").asText());
        List<String> topics = new ArrayList<>();
        for (JsonNode t : r.get("topics")) topics.add(t.asText());
        java.util.concurrent.CountDownLatch ready = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.atomic.AtomicReference<Throwable> failed = new java.util.concurrent.atomic.AtomicReference<>();
        releasing.set(false);
        Thread t = new Thread(() -> {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                c.subscribe(topics);
                while (!releasing.get()) {
                    c.poll(Duration.ofMillis(200));
                    if (!c.assignment().isEmpty()) {
                        c.commitSync(Duration.ofSeconds(20));
                        ready.countDown();
                    }
                }
            } catch (Throwable e) {
                failed.set(e);
                ready.countDown();
            }
        }, "held-" + r.get("client_id").asText());
        t.setDaemon(true);
        t.start();
        held.add(t);
        if (!ready.await(60, TimeUnit.SECONDS)) throw new IllegalStateException("no assignment within 60 s");
        if (failed.get() != null) throw new IllegalStateException(failed.get().toString());
        return null;
    }

    /** Stop every held member (each leaves its group as KafkaConsumer.close does). */
    private JsonNode release() throws Exception {
        releasing.set(true);
        for (Thread t : held) t.join(30000);
        held.clear();
        return null;
    }

    /** Admin.describeConsumerGroups: state, type and each member's id, instance id, client id, host, assignment. */
    private JsonNode describeGroups(JsonNode r) throws Exception {
        List<String> groups = new ArrayList<>();
        for (JsonNode g : r.get("groups")) groups.add(g.asText());
        var d = admin.describeConsumerGroups(groups).all().get();
        ArrayNode outArr = JSON.createArrayNode();
        for (var e : d.entrySet()) {
            var desc = e.getValue();
            ObjectNode o = outArr.addObject();
            o.put("group", e.getKey());
            Object state;
            try { // 4.x: groupState(); 3.9: state()
                state = desc.getClass().getMethod("groupState").invoke(desc);
            } catch (NoSuchMethodException ex) {
                state = desc.getClass().getMethod("state").invoke(desc);
            }
            o.put("state", String.valueOf(state));
            o.put("type", String.valueOf(desc.getClass().getMethod("type").invoke(desc)));
            ArrayNode members = o.putArray("members");
            for (var m : desc.members()) {
                ObjectNode mo = members.addObject();
                mo.put("member_id", m.consumerId());
                mo.put("instance_id", m.groupInstanceId().orElse(null));
                mo.put("client_id", m.clientId());
                mo.put("host", m.host());
                ArrayNode parts = mo.putArray("partitions");
                for (TopicPartition tp : m.assignment().topicPartitions()) {
                    ArrayNode x = parts.addArray();
                    x.add(tp.topic());
                    x.add(tp.partition());
                }
            }
        }
        return outArr;
    }

    private void close() {
        releasing.set(true);
        for (KafkaProducer<byte[], byte[]> p : producers.values()) p.close(Duration.ofSeconds(5));
        admin.close(Duration.ofSeconds(5));
    }

    /**
     * Admin deleteRecords. The leader moves its log start offset at once, but answers only when every live, caught-up
     * follower has fetched past it (its low watermark); a follower back from a restart moments before can miss the
     * call's 30 s. Asking again is idempotent, so a timeout is retried twice before it is the op's error.
     */
    private JsonNode deleteRecords(JsonNode r) throws Exception {
        Map<TopicPartition, RecordsToDelete> req = Map.of(tp(r), RecordsToDelete.beforeOffset(r.get("before").asLong()));
        for (int attempt = 1; ; attempt++) {
            try {
                admin.deleteRecords(req).all().get();
                return null;
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof org.apache.kafka.common.errors.TimeoutException) || attempt == 3) throw e;
                System.err.println("delete_records " + tp(r) + ": attempt " + attempt + " timed out, asking again");
            }
        }
    }

    private JsonNode handle(JsonNode r) throws Exception {
        switch (r.path("op").asText()) {
            case "create_topic": return createTopic(r);
            case "delete_topic":
                admin.deleteTopics(List.of(r.get("topic").asText())).all().get();
                return null;
            case "create_partitions":
                admin.createPartitions(Map.of(r.get("topic").asText(), NewPartitions.increaseTo(r.get("total").asInt())))
                        .all().get();
                return null;
            case "delete_records": return deleteRecords(r);
            case "alter_topic_config": return alterTopicConfig(r);
            case "elect": return elect(r);
            case "describe": return describe(r);
            case "list_topics": {  // every topic name, the internal ones (__consumer_offsets ...) too
                ArrayNode names = JSON.createArrayNode();
                admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get().stream().sorted()
                        .forEach(names::add);
                return names;
            }
            case "offsets": return offsets(r);
            case "tiered_offsets": return tieredOffsets(r);
            case "offsets_for_times": return offsetsForTimes(r);
            case "hold": return hold(r);
            case "release": return release();
            case "describe_groups": return describeGroups(r);
            case "produce": return produce(r);
            case "consume_commit": return consumeCommit(r);
            case "commit": return commit(r);
            case "alter_offsets": return alterOffsets(r);
            case "txn_commit": return txnCommit(r);
            case "delete_group":
                admin.deleteConsumerGroups(List.of(r.get("group").asText())).all().get();
                return null;
            case "list_offsets": return listGroupOffsets(r.get("group").asText());
            case "verdicts": return verdicts(r);
            case "read_topic": return readTopic(r);
            case "share_open": return shareOpen(r);
            case "share_poll": return sharePoll(r);
            case "share_close": return shareClose(r);
            case "share_offsets": return shareOffsets(r);
            case "bulk_commit": return bulkCommit(r);
            case "set_quota": {  // a client quota on a client.id (null rate: removed): {"client_id", "key", "rate"}
                var entity = new org.apache.kafka.common.quota.ClientQuotaEntity(
                        Map.of(org.apache.kafka.common.quota.ClientQuotaEntity.CLIENT_ID, r.get("client_id").asText()));
                Double rate = r.path("rate").isNull() || r.path("rate").isMissingNode() ? null : r.get("rate").asDouble();
                var op = new org.apache.kafka.common.quota.ClientQuotaAlteration.Op(r.get("key").asText(), rate);
                admin.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(entity, List.of(op))))
                        .all().get();
                return null;
            }
            case "set_logger": {  // a broker's log4j logger level, changed live (KIP-412): {"broker", "logger", "level"}
                ConfigResource res = new ConfigResource(ConfigResource.Type.BROKER_LOGGER, r.get("broker").asText());
                AlterConfigOp op = new AlterConfigOp(new ConfigEntry(r.get("logger").asText(), r.get("level").asText()),
                        AlterConfigOp.OpType.SET);
                admin.incrementalAlterConfigs(Map.of(res, List.of(op))).all().get();
                return null;
            }
            case "create_acls": admin.createAcls(aclBindings(r)).all().get(); return null;
            case "create_topics": {  // many topics in one CreateTopics request: {"names": [...], "partitions", "rf"}
                List<NewTopic> ts = new ArrayList<>();
                for (JsonNode n : r.get("names")) ts.add(new NewTopic(n.asText(), r.path("partitions").asInt(1), (short) r.path("rf").asInt(1)));
                admin.createTopics(ts).all().get();
                return null;
            }
            case "delete_acls": {
                List<org.apache.kafka.common.acl.AclBindingFilter> fs = new ArrayList<>();
                for (org.apache.kafka.common.acl.AclBinding b : aclBindings(r)) fs.add(b.toFilter());
                admin.deleteAcls(fs).all().get();
                return null;
            }
            default: throw new IllegalArgumentException("unknown op " + r.path("op").asText());
        }
    }

    /** {"principal": "User:x", "acls": [{"resource_type": "TOPIC", "name": "*", "operation": "DESCRIBE"}, ...]}:
     *  ALLOW bindings on LITERAL patterns, any host (kafka-acls --add --allow-principal). */
    private static List<org.apache.kafka.common.acl.AclBinding> aclBindings(JsonNode r) {
        List<org.apache.kafka.common.acl.AclBinding> out = new ArrayList<>();
        for (JsonNode a : r.get("acls")) {
            out.add(new org.apache.kafka.common.acl.AclBinding(
                new org.apache.kafka.common.resource.ResourcePattern(
                    org.apache.kafka.common.resource.ResourceType.valueOf(a.get("resource_type").asText()),
                    a.get("name").asText(), org.apache.kafka.common.resource.PatternType.LITERAL),
                new org.apache.kafka.common.acl.AccessControlEntry(r.get("principal").asText(), "*",
                    org.apache.kafka.common.acl.AclOperation.valueOf(a.get("operation").asText()),
                    org.apache.kafka.common.acl.AclPermissionType.ALLOW)));
        }
        return out;
    }

    private static TopicPartition tp(JsonNode r) {
        return new TopicPartition(r.get("topic").asText(), r.get("partition").asInt());
    }

    private static Optional<Integer> epochOf(JsonNode n) {
        JsonNode e = n.get("epoch");
        return (e == null || e.isNull()) ? Optional.empty() : Optional.of(e.asInt());
    }

    private static Map<TopicPartition, OffsetAndMetadata> offsetMap(JsonNode arr) {
        Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
        for (JsonNode o : arr) {
            m.put(tp(o), new OffsetAndMetadata(o.get("offset").asLong(), epochOf(o), o.path("metadata").asText("")));
        }
        return m;
    }

    private JsonNode createTopic(JsonNode r) throws Exception {
        String topic = r.get("topic").asText();
        NewTopic nt;
        if (r.has("assignments")) {
            Map<Integer, List<Integer>> a = new HashMap<>();
            Iterator<Map.Entry<String, JsonNode>> it = r.get("assignments").fields();
            while (it.hasNext()) {
                Map.Entry<String, JsonNode> e = it.next();
                List<Integer> replicas = new ArrayList<>();
                for (JsonNode b : e.getValue()) replicas.add(b.asInt());
                a.put(Integer.parseInt(e.getKey()), replicas);
            }
            nt = new NewTopic(topic, a);
        } else {
            nt = new NewTopic(topic, r.path("partitions").asInt(1), (short) r.path("rf").asInt(1));
        }
        Map<String, String> configs = new HashMap<>();
        if (r.has("configs")) r.get("configs").fields().forEachRemaining(e -> configs.put(e.getKey(), e.getValue().asText()));
        nt.configs(configs);
        admin.createTopics(List.of(nt)).all().get();
        return null;
    }

    private JsonNode alterTopicConfig(JsonNode r) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, r.get("topic").asText());
        List<AlterConfigOp> ops = new ArrayList<>();
        r.get("configs").fields().forEachRemaining(e -> ops.add(
                new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue().asText()), AlterConfigOp.OpType.SET)));
        admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
        return null;
    }

    private JsonNode elect(JsonNode r) throws Exception {
        ElectionType type = "unclean".equals(r.get("type").asText()) ? ElectionType.UNCLEAN : ElectionType.PREFERRED;
        Set<TopicPartition> tps = new HashSet<>();
        for (JsonNode p : r.get("partitions")) tps.add(new TopicPartition(p.get(0).asText(), p.get(1).asInt()));
        Map<TopicPartition, Optional<Throwable>> res = admin.electLeaders(type, tps).partitions().get();
        ArrayNode outArr = JSON.createArrayNode();
        for (Map.Entry<TopicPartition, Optional<Throwable>> e : res.entrySet()) {
            ObjectNode o = outArr.addObject();
            o.put("topic", e.getKey().topic());
            o.put("partition", e.getKey().partition());
            o.put("error", e.getValue().map(t -> t.getClass().getSimpleName() + ": " + t.getMessage()).orElse(null));
        }
        return outArr;
    }

    private JsonNode describe(JsonNode r) throws Exception {
        List<String> topics = new ArrayList<>();
        for (JsonNode t : r.get("topics")) topics.add(t.asText());
        Map<String, TopicDescription> d = admin.describeTopics(topics).allTopicNames().get();
        ArrayNode outArr = JSON.createArrayNode();
        for (TopicDescription td : d.values()) {
            for (TopicPartitionInfo pi : td.partitions()) {
                ObjectNode o = outArr.addObject();
                o.put("topic", td.name());
                o.put("topic_id", td.topicId().toString());
                o.put("partition", pi.partition());
                o.put("leader", pi.leader() == null || pi.leader().isEmpty() ? -1 : pi.leader().id());
                ArrayNode isr = o.putArray("isr");
                for (Node n : pi.isr()) isr.add(n.id());
                ArrayNode reps = o.putArray("replicas");
                for (Node n : pi.replicas()) reps.add(n.id());
                try { // KIP-966 eligible leader replicas (3.9/4.x clients)
                    @SuppressWarnings("unchecked")
                    List<Node> elr = (List<Node>) TopicPartitionInfo.class.getMethod("elr").invoke(pi);
                    ArrayNode e = o.putArray("elr");
                    if (elr != null) for (Node n : elr) e.add(n.id());
                } catch (ReflectiveOperationException ignored) {
                }
            }
        }
        return outArr;
    }

    /** ListOffsets(timestamp): the first offset whose record timestamp is at or after it, -1 when none. */
    private JsonNode offsetsForTimes(JsonNode r) throws Exception {
        Map<TopicPartition, OffsetSpec> q = new HashMap<>();
        for (JsonNode p : r.get("partitions"))
            q.put(new TopicPartition(p.get(0).asText(), p.get(1).asInt()), OffsetSpec.forTimestamp(r.get("timestamp").asLong()));
        var res = admin.listOffsets(q).all().get();
        ArrayNode outArr = JSON.createArrayNode();
        for (TopicPartition t : q.keySet()) {
            ObjectNode o = outArr.addObject();
            o.put("topic", t.topic());
            o.put("partition", t.partition());
            o.put("offset", res.get(t).offset());
            o.put("timestamp", res.get(t).timestamp());
        }
        return outArr;
    }

    private JsonNode offsets(JsonNode r) throws Exception {
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
        for (JsonNode p : r.get("partitions")) {
            TopicPartition t = new TopicPartition(p.get(0).asText(), p.get(1).asInt());
            latest.put(t, OffsetSpec.latest());
            earliest.put(t, OffsetSpec.earliest());
        }
        var l = admin.listOffsets(latest).all().get();
        var e = admin.listOffsets(earliest).all().get();
        ArrayNode outArr = JSON.createArrayNode();
        for (TopicPartition t : latest.keySet()) {
            ObjectNode o = outArr.addObject();
            o.put("topic", t.topic());
            o.put("partition", t.partition());
            o.put("log_start_offset", e.get(t).offset());
            o.put("high_watermark", l.get(t).offset());
            o.put("leader_epoch", l.get(t).leaderEpoch().orElse(-1));
        }
        return outArr;
    }

    /**
     * Tiered storage (KIP-405), what the partition leaders answer to ListOffsets: {"partitions": [[topic, p], ...]} ->
     * [{topic, partition, log_start_offset (EARLIEST), local_log_start_offset (EARLIEST_LOCAL, KIP-1005),
     * highest_tiered_offset (LATEST_TIERED: the last offset in remote storage, -1: none), high_watermark (LATEST),
     * leader_epoch, earliest_pending_upload (4.x's EARLIEST_PENDING_UPLOAD, KIP-1023; absent on 3.9)}].
     */
    private JsonNode tieredOffsets(JsonNode r) throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
        for (JsonNode p : r.get("partitions")) tps.add(new TopicPartition(p.get(0).asText(), p.get(1).asInt()));
        Map<String, OffsetSpec> specs = new java.util.LinkedHashMap<>();
        specs.put("log_start_offset", OffsetSpec.earliest());
        specs.put("local_log_start_offset", OffsetSpec.earliestLocal());
        specs.put("highest_tiered_offset", OffsetSpec.latestTiered());
        specs.put("high_watermark", OffsetSpec.latest());
        try {
            specs.put("earliest_pending_upload", (OffsetSpec) OffsetSpec.class.getMethod("earliestPendingUpload").invoke(null));
        } catch (NoSuchMethodException ignored) { // 3.9
        }
        Map<String, Map<TopicPartition, org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo>> got = new HashMap<>();
        for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
            Map<TopicPartition, OffsetSpec> q = new HashMap<>();
            for (TopicPartition t : tps) q.put(t, e.getValue());
            got.put(e.getKey(), admin.listOffsets(q).all().get());
        }
        ArrayNode outArr = JSON.createArrayNode();
        for (TopicPartition t : tps) {
            ObjectNode o = outArr.addObject();
            o.put("topic", t.topic());
            o.put("partition", t.partition());
            for (String k : specs.keySet()) o.put(k, got.get(k).get(t).offset());
            o.put("leader_epoch", got.get("high_watermark").get(t).leaderEpoch().orElse(-1));
        }
        return outArr;
    }

    private KafkaProducer<byte[], byte[]> producer(String acks) {
        return producers.computeIfAbsent(acks, a -> {
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.ACKS_CONFIG, a);
            // not idempotent: a batch retried across an unclean election must not wait on sequence state
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
            p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
            p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
            p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "8000");
            p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
            p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
            p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "1000");
            p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
            return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
        });
    }

    /**
     * Produce ``count`` records to one partition (records that time out are sent again, up to 3
     * rounds); returns the first and last offset written and how many could not be written.
     */
    private JsonNode produce(JsonNode r) throws Exception {
        TopicPartition t = tp(r);
        int remaining = r.get("count").asInt();
        byte[] value = new byte[r.path("value_size").asInt(100)];
        KafkaProducer<byte[], byte[]> p = producer(r.path("acks").asText("1"));
        long first = -1, last = -1;
        String err = null;
        for (int round = 0; round < r.path("rounds").asInt(3) && remaining > 0; round++) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < remaining; i++) {
                fs.add(p.send(new ProducerRecord<>(t.topic(), t.partition(), ("k" + i).getBytes(StandardCharsets.UTF_8), value)));
            }
            p.flush();
            int failed = 0;
            for (Future<RecordMetadata> f : fs) {
                try {
                    RecordMetadata m = f.get();
                    if (first < 0 || m.offset() < first) first = m.offset();
                    last = Math.max(last, m.offset());
                } catch (ExecutionException e) {
                    failed++;
                    err = e.getCause().toString();
                }
            }
            remaining = failed;
        }
        ObjectNode o = JSON.createObjectNode();
        o.put("first", first);
        o.put("last", last);
        o.put("failed", remaining);
        o.put("error", remaining > 0 ? err : null);
        return o;
    }

    private Properties consumerProps(String group, String protocol) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        if (protocol != null && !protocol.isEmpty() && !"classic".equals(protocol)) {
            p.put("group.protocol", protocol);
        }
        return p;
    }

    /**
     * Consume with a group and commit what was consumed: subscribe (the group's own protocol:
     * classic or KIP-848 "consumer") or assign, poll up to max_records, commitSync() of the
     * positions (each carries the leader epoch of the last record consumed), leave.
     */
    private JsonNode consumeCommit(JsonNode r) throws Exception {
        String group = r.get("group").asText();
        Properties p = consumerProps(group, r.path("protocol").asText("classic"));
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(Math.max(1, r.path("max_poll").asInt(500))));
        int max = r.path("max_records").asInt(Integer.MAX_VALUE);
        long deadline = System.currentTimeMillis() + r.path("timeout_ms").asLong(15000);
        int got = 0;
        Map<TopicPartition, Long> positions = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<String> topics = new ArrayList<>();
            for (JsonNode t : r.get("topics")) topics.add(t.asText());
            c.subscribe(topics);
            int idle = 0;
            while (got < max && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(300));
                if (recs.isEmpty()) {
                    if (!c.assignment().isEmpty() && ++idle >= r.path("idle_polls").asInt(4)) break;
                    continue;
                }
                idle = 0;
                got += recs.count();
                if (got >= max) break;
            }
            if (r.path("commit").asBoolean(true)) c.commitSync(Duration.ofSeconds(20));
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment(), Duration.ofSeconds(20));
            ArrayNode arr = offsetsJson(committed);
            ObjectNode o = JSON.createObjectNode();
            o.put("consumed", got);
            o.set("committed", arr);
            return o;
        }
    }

    /** Commit the given offsets (with the given leader epochs) for a group, as an assigned consumer. */
    private JsonNode commit(JsonNode r) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m = offsetMap(r.get("offsets"));
        Properties p = consumerProps(r.get("group").asText(), r.path("protocol").asText("classic"));
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(m.keySet());
            c.commitSync(m, Duration.ofSeconds(20));
        }
        return null;
    }

    /** kafka-consumer-groups --reset-offsets: Admin.alterConsumerGroupOffsets (no leader epoch: -1). */
    private JsonNode alterOffsets(JsonNode r) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
        for (JsonNode o : r.get("offsets")) m.put(tp(o), new OffsetAndMetadata(o.get("offset").asLong()));
        admin.alterConsumerGroupOffsets(r.get("group").asText(), m).all().get();
        return null;
    }

    /**
     * Offset commits in bulk for groups with no members (the live-scale benchmark fills __consumer_offsets with
     * them): {"groups": [g, ...], "topics": [[t, ...] per group], "partitions": n, "rounds": r, "offset": o,
     * "epoch": e, "in_flight": k}. Each round commits, for every group, every partition 0..n-1 of its topics at
     * offset o with leader epoch e in one OffsetCommit (Admin.alterConsumerGroupOffsets), k calls in flight.
     * Returns {"requests", "records", "errors", "first_error"}.
     */
    private JsonNode bulkCommit(JsonNode r) throws Exception {
        int parts = r.get("partitions").asInt();
        int rounds = r.path("rounds").asInt(1);
        long offset = r.path("offset").asLong(0);
        Optional<Integer> epoch = Optional.of(r.path("epoch").asInt(0));
        int inFlight = r.path("in_flight").asInt(64);
        List<String> groups = new ArrayList<>();
        List<Map<TopicPartition, OffsetAndMetadata>> commits = new ArrayList<>();
        Map<String, Map<TopicPartition, OffsetAndMetadata>> byTopics = new HashMap<>();
        for (int i = 0; i < r.get("groups").size(); i++) {
            groups.add(r.get("groups").get(i).asText());
            JsonNode ts = r.get("topics").get(i);
            commits.add(byTopics.computeIfAbsent(ts.toString(), k -> {
                Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
                for (JsonNode t : ts)
                    for (int p = 0; p < parts; p++) m.put(new TopicPartition(t.asText(), p), new OffsetAndMetadata(offset, epoch, ""));
                return m;
            }));
        }
        java.util.concurrent.Semaphore sem = new java.util.concurrent.Semaphore(inFlight);
        java.util.concurrent.atomic.AtomicLong errors = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicReference<String> firstError = new java.util.concurrent.atomic.AtomicReference<>();
        long requests = 0, records = 0;
        for (int round = 0; round < rounds; round++) {
            for (int i = 0; i < groups.size(); i++) {
                sem.acquire();
                admin.alterConsumerGroupOffsets(groups.get(i), commits.get(i)).all().whenComplete((v, e) -> {
                    if (e != null) {
                        errors.incrementAndGet();
                        firstError.compareAndSet(null, e.toString());
                    }
                    sem.release();
                });
                requests++;
                records += commits.get(i).size();
            }
        }
        sem.acquire(inFlight);
        sem.release(inFlight);
        ObjectNode o = JSON.createObjectNode();
        o.put("requests", requests);
        o.put("records", records);
        o.put("errors", errors.get());
        o.put("first_error", firstError.get());
        return o;
    }

    /** A transactional offset commit (sendOffsetsToTransaction), committed or aborted. */
    private JsonNode txnCommit(JsonNode r) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, r.get("transactional_id").asText());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            prod.initTransactions();
            prod.beginTransaction();
            if (r.has("produce_topic")) {
                prod.send(new ProducerRecord<>(r.get("produce_topic").asText(), r.path("produce_partition").asInt(0),
                        null, new byte[10])).get();
            }
            prod.sendOffsetsToTransaction(offsetMap(r.get("offsets")), new ConsumerGroupMetadata(r.get("group").asText()));
            if (r.path("abort").asBoolean(false)) prod.abortTransaction();
            else prod.commitTransaction();
        }
        return null;
    }

    private JsonNode listGroupOffsets(String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        return offsetsJson(m);
    }

    /** [{topic, partition, offset, epoch (-1: none)}] of the non-null entries. */
    private static ArrayNode offsetsJson(Map<TopicPartition, OffsetAndMetadata> m) {
        ArrayNode arr = JSON.createArrayNode();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet()) {
            if (e.getValue() == null) continue;
            ObjectNode o = arr.addObject();
            o.put("topic", e.getKey().topic());
            o.put("partition", e.getKey().partition());
            o.put("offset", e.getValue().offset());
            o.put("epoch", e.getValue().leaderEpoch().orElse(-1));
        }
        return arr;
    }

    /** The oracle: one verdict per group-partition, judged in parallel by independent consumers. */
    private JsonNode verdicts(JsonNode r) throws Exception {
        long timeoutMs = r.path("timeout_ms").asLong(6000);
        List<Object[]> jobs = new ArrayList<>();
        for (JsonNode gp : r.get("group_partitions")) {
            jobs.add(new Object[]{gp.get(0).asText(), new TopicPartition(gp.get(1).asText(), gp.get(2).asInt())});
        }
        ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, r.path("parallelism").asInt(8)));
        List<Future<ObjectNode>> fs = new ArrayList<>();
        for (Object[] j : jobs) fs.add(pool.submit(() -> verdict((String) j[0], (TopicPartition) j[1], timeoutMs)));
        ArrayNode arr = JSON.createArrayNode();
        for (Future<ObjectNode> f : fs) arr.add(f.get());
        pool.shutdown();
        pool.awaitTermination(10, TimeUnit.SECONDS);
        return arr;
    }

    /**
     * Kafka's consumer as the reference reader of a topic (the audit's reads of __consumer_offsets are compared
     * with it): no group, read_committed, every partition assigned from the beginning and read up to the
     * read_committed end offset (the last stable offset) captured first. Returns, per partition, the offsets of
     * the records returned, in order: {"<partition>": [offset, ...], ...}; with "epochs": true each is
     * [offset, leader epoch (-1: none)].
     */
    private JsonNode readTopic(JsonNode r) throws Exception {
        String topic = r.get("topic").asText();
        Properties p = consumerProps(null, "classic");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.EXCLUDE_INTERNAL_TOPICS_CONFIG, "false");
        ObjectNode out = JSON.createObjectNode();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (var info : c.partitionsFor(topic, Duration.ofSeconds(20))) tps.add(new TopicPartition(topic, info.partition()));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofSeconds(20));
            Map<TopicPartition, ArrayNode> got = new HashMap<>();
            for (TopicPartition t : tps) got.put(t, out.putArray(Integer.toString(t.partition())));
            long deadline = System.currentTimeMillis() + r.path("timeout_ms").asLong(60000);
            Set<TopicPartition> left = new HashSet<>(tps);
            while (!left.isEmpty() && System.currentTimeMillis() < deadline) {
                left.removeIf(t -> c.position(t) >= ends.get(t));
                if (left.isEmpty()) break;
                for (var rec : c.poll(Duration.ofMillis(200))) {
                    TopicPartition t = new TopicPartition(rec.topic(), rec.partition());
                    if (rec.offset() >= ends.get(t)) continue;
                    if (r.path("epochs").asBoolean(false)) got.get(t).addArray().add(rec.offset()).add(rec.leaderEpoch().orElse(-1));
                    else got.get(t).add(rec.offset());
                }
            }
            if (!left.isEmpty()) throw new IllegalStateException("read_topic: not at the end offsets of " + left);
        }
        return out;
    }

    // ------------------------------------------------------------------ share groups (KIP-932, Kafka 4.x)
    // KafkaShareConsumer, AcknowledgeType, ConsumerRecord.deliveryCount() and Admin.listShareGroupOffsets are 4.x-only:
    // reached by reflection, so this file compiles against the kafka-clients of 3.9.2 as well.

    /** A long-lived KafkaShareConsumer (explicit acknowledgement), its held records and the log of its deliveries. */
    private static final class ShareHandle {
        final String group;
        final Object consumer;
        final List<ConsumerRecord<?, ?>> held = new ArrayList<>();
        final ArrayNode log = JSON.createArrayNode();

        ShareHandle(String group, Object consumer) {
            this.group = group;
            this.consumer = consumer;
        }
    }

    private final Map<String, ShareHandle> shares = new HashMap<>();
    private final Set<String> shareGroupsConfigured = new HashSet<>();

    private static Object shareCall(Object target, String method, Object... args) throws Exception {
        for (java.lang.reflect.Method m : target.getClass().getMethods()) {
            if (m.getName().equals(method) && m.getParameterCount() == args.length) {
                Class<?>[] ps = m.getParameterTypes();
                boolean fits = true;
                for (int i = 0; i < ps.length && fits; i++) fits = args[i] == null || box(ps[i]).isInstance(args[i]);
                if (!fits) continue;
                try {
                    return m.invoke(target, args);
                } catch (java.lang.reflect.InvocationTargetException e) {
                    throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
                }
            }
        }
        throw new NoSuchMethodException(target.getClass().getName() + "." + method);
    }

    private static Class<?> box(Class<?> c) {
        if (!c.isPrimitive()) return c;
        return c == int.class ? Integer.class : c == long.class ? Long.class : c == boolean.class ? Boolean.class : Object.class;
    }

    private static Object ackType(String ack) throws Exception {
        Class<?> cls = Class.forName("org.apache.kafka.clients.consumer.AcknowledgeType");
        return cls.getMethod("valueOf", String.class).invoke(null, ack.toUpperCase(java.util.Locale.ROOT));
    }

    /**
     * {"name", "group", "topics", "config": {share consumer config overrides}}: a KafkaShareConsumer with
     * share.acknowledgement.mode=explicit subscribed to the topics. Before the first open of a group here, the
     * group's config share.auto.offset.reset=earliest is set (incrementalAlterConfigs on a GROUP resource).
     */
    private JsonNode shareOpen(JsonNode r) throws Exception {
        String name = r.get("name").asText(), group = r.get("group").asText();
        if (shares.containsKey(name)) throw new IllegalStateException("share handle " + name + " is open");
        if (shareGroupsConfigured.add(group)) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.valueOf("GROUP"), group);
            AlterConfigOp op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(res, List.of(op))).all().get();
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        p.put("share.acknowledgement.mode", "explicit");
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        if (r.has("config")) r.get("config").fields().forEachRemaining(e -> p.put(e.getKey(), e.getValue().asText()));
        Class<?> cls = Class.forName("org.apache.kafka.clients.consumer.KafkaShareConsumer");
        Object c = cls.getConstructor(Properties.class, org.apache.kafka.common.serialization.Deserializer.class,
                org.apache.kafka.common.serialization.Deserializer.class)
                .newInstance(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        List<String> topics = new ArrayList<>();
        for (JsonNode t : r.get("topics")) topics.add(t.asText());
        cls.getMethod("subscribe", java.util.Collection.class).invoke(c, topics);
        shares.put(name, new ShareHandle(group, c));
        return null;
    }

    /** The first rule of "acks" [{topic?, partition, from, to (exclusive), ack, delivery?}] that covers the record. */
    private static String ackFor(JsonNode rules, String dflt, ConsumerRecord<?, ?> rec, int delivery) {
        if (rules != null) {
            for (JsonNode a : rules) {
                if (a.has("topic") && !a.get("topic").asText().equals(rec.topic())) continue;
                if (a.has("partition") && a.get("partition").asInt() != rec.partition()) continue;
                if (rec.offset() < a.path("from").asLong(0) || rec.offset() >= a.path("to").asLong(Long.MAX_VALUE)) continue;
                if (a.has("delivery") && a.get("delivery").asInt() != delivery) continue;
                return a.get("ack").asText();
            }
        }
        return dflt;
    }

    private static ObjectNode shareEntry(ConsumerRecord<?, ?> rec, int delivery, String ack) {
        ObjectNode o = JSON.createObjectNode();
        o.put("topic", rec.topic());
        o.put("partition", rec.partition());
        o.put("offset", rec.offset());
        o.put("leader_epoch", rec.leaderEpoch().orElse(-1));
        o.put("delivery_count", delivery);
        o.put("ack", ack);
        return o;
    }

    /** commitSync of the pending acknowledgements; each entry of "entries" for a partition that failed gets "commit_error". */
    private static ArrayNode shareCommit(Object consumer, List<ObjectNode> entries) throws Exception {
        Map<?, ?> res = (Map<?, ?>) shareCall(consumer, "commitSync", Duration.ofSeconds(20));
        ArrayNode errors = JSON.createArrayNode();
        for (Map.Entry<?, ?> e : res.entrySet()) {
            Optional<?> err = (Optional<?>) e.getValue();
            if (err.isEmpty()) continue;
            Object tip = e.getKey(); // TopicIdPartition
            String topic = (String) shareCall(tip, "topic");
            int partition = (Integer) shareCall(tip, "partition");
            String text = err.get().getClass().getSimpleName() + ": " + ((Throwable) err.get()).getMessage();
            ObjectNode o = errors.addObject();
            o.put("topic", topic);
            o.put("partition", partition);
            o.put("error", text);
            for (ObjectNode en : entries) {
                if (en.get("topic").asText().equals(topic) && en.get("partition").asInt() == partition) en.put("commit_error", text);
            }
        }
        return errors;
    }

    /**
     * {"name", "acks": [{topic?, partition, from, to, ack: accept|release|reject|hold, delivery?}], "default_ack"
     * (accept), "held_ack" (release), "max_records", "polls" (non-empty polls at most), "poll_ms" (500),
     * "idle_polls" (3: consecutive empty polls that end it once a record came or "min_ms" (0) passed), "timeout_ms" (30000)}.
     * Records held by an earlier share_poll are first acknowledged with held_ack and committed ("late": true in
     * the log). Each delivered record is acknowledged by the first matching rule ("hold": left acquired, not
     * acknowledged; a poll with a held record ends the op, since explicit mode allows no poll before it is
     * acknowledged), then commitSync. Returns {"records": [{topic, partition, offset, leader_epoch,
     * delivery_count, ack, commit_error?}], "late": [...], "commit_errors": [...], "polls", "held"}.
     */
    private JsonNode sharePoll(JsonNode r) throws Exception {
        ShareHandle h = shares.get(r.get("name").asText());
        if (h == null) throw new IllegalStateException("no share handle " + r.get("name").asText());
        Object c = h.consumer;
        java.lang.reflect.Method ack = c.getClass().getMethod("acknowledge", ConsumerRecord.class,
                Class.forName("org.apache.kafka.clients.consumer.AcknowledgeType"));
        ObjectNode out = JSON.createObjectNode();
        ArrayNode records = out.putArray("records"), late = out.putArray("late"), errors = out.putArray("commit_errors");
        if (!h.held.isEmpty()) {
            String t = r.path("held_ack").asText("release");
            List<ObjectNode> entries = new ArrayList<>();
            for (ConsumerRecord<?, ?> rec : h.held) {
                ack.invoke(c, rec, ackType(t));
                ObjectNode o = shareEntry(rec, deliveryCount(rec), t);
                o.put("late", true);
                entries.add(o);
            }
            h.held.clear();
            errors.addAll(shareCommit(c, entries));
            late.addAll(entries);
            h.log.addAll(entries);
        }
        String dflt = r.path("default_ack").asText("accept");
        long start = System.currentTimeMillis();
        long deadline = start + r.path("timeout_ms").asLong(30000);
        long minMs = r.path("min_ms").asLong(0);
        int max = r.path("max_records").asInt(Integer.MAX_VALUE), maxPolls = r.path("polls").asInt(Integer.MAX_VALUE);
        int idleMax = r.path("idle_polls").asInt(3), idle = 0, polls = 0, got = 0;
        java.lang.reflect.Method poll = c.getClass().getMethod("poll", Duration.class);
        while (got < max && polls < maxPolls && System.currentTimeMillis() < deadline) {
            ConsumerRecords<?, ?> recs = (ConsumerRecords<?, ?>) poll.invoke(c, Duration.ofMillis(r.path("poll_ms").asLong(500)));
            if (recs.isEmpty()) {
                if (++idle >= idleMax && (got > 0 || System.currentTimeMillis() - start >= minMs)) break;
                continue;
            }
            idle = 0;
            polls++;
            List<ObjectNode> entries = new ArrayList<>();
            for (ConsumerRecord<?, ?> rec : recs) {
                int delivery = deliveryCount(rec);
                String a = ackFor(r.get("acks"), dflt, rec, delivery);
                if ("hold".equals(a)) h.held.add(rec);
                else ack.invoke(c, rec, ackType(a));
                entries.add(shareEntry(rec, delivery, a));
                got++;
            }
            errors.addAll(shareCommit(c, entries));
            records.addAll(entries);
            h.log.addAll(entries);
            if (!h.held.isEmpty()) break;
        }
        out.put("polls", polls);
        out.put("held", h.held.size());
        return out;
    }

    private static int deliveryCount(ConsumerRecord<?, ?> rec) throws Exception {
        Optional<?> d = (Optional<?>) shareCall(rec, "deliveryCount");
        return d.isPresent() ? ((Number) d.get()).intValue() : -1;
    }

    /** {"name"}: close the share consumer (records still held are left to the broker); returns {"log": every
     *  delivery and late acknowledgement of the handle, "held": records held at close, "error": close's exception}. */
    private JsonNode shareClose(JsonNode r) throws Exception {
        ShareHandle h = shares.remove(r.get("name").asText());
        if (h == null) throw new IllegalStateException("no share handle " + r.get("name").asText());
        ObjectNode out = JSON.createObjectNode();
        out.put("held", h.held.size());
        try {
            shareCall(h.consumer, "close", Duration.ofSeconds(20));
            out.putNull("error");
        } catch (Exception e) {
            out.put("error", e.getClass().getName() + ": " + e.getMessage());
        }
        out.set("log", h.log);
        return out;
    }

    /** {"group"}: Admin.listShareGroupOffsets, what the brokers report: [{topic, partition, start_offset,
     *  leader_epoch (-1: none), lag (null: unknown)}]; a partition without an offset: start_offset null. */
    private JsonNode shareOffsets(JsonNode r) throws Exception {
        String group = r.get("group").asText();
        Object spec = Class.forName("org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec").getConstructor().newInstance();
        Object res = Admin.class.getMethod("listShareGroupOffsets", Map.class).invoke(admin, Map.of(group, spec));
        Map<?, ?> m = (Map<?, ?>) ((KafkaFuture<?>) shareCall(res, "partitionsToOffsetInfo", group)).get();
        ArrayNode arr = JSON.createArrayNode();
        for (Map.Entry<?, ?> e : m.entrySet()) {
            TopicPartition t = (TopicPartition) e.getKey();
            ObjectNode o = arr.addObject();
            o.put("topic", t.topic());
            o.put("partition", t.partition());
            Object info = e.getValue();
            if (info == null) {
                o.putNull("start_offset");
                o.put("leader_epoch", -1);
                o.putNull("lag");
                continue;
            }
            o.put("start_offset", (Long) shareCall(info, "startOffset"));
            o.put("leader_epoch", ((Optional<?>) shareCall(info, "leaderEpoch")).map(x -> (Integer) x).orElse(-1));
            Optional<?> lag = (Optional<?>) shareCall(info, "lag");
            if (lag.isPresent()) o.put("lag", (Long) lag.get());
            else o.putNull("lag");
        }
        return arr;
    }

    private ObjectNode verdict(String group, TopicPartition t, long timeoutMs) {
        ObjectNode o = JSON.createObjectNode();
        o.put("group", group);
        o.put("topic", t.topic());
        o.put("partition", t.partition());
        Properties p = consumerProps(group, "classic");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(List.of(t));
            OffsetAndMetadata committed = c.committed(Collections.singleton(t), Duration.ofSeconds(20)).get(t);
            o.put("committed_offset", committed == null ? null : committed.offset());
            o.put("committed_epoch", committed == null ? null : committed.leaderEpoch().orElse(-1));
            long deadline = System.currentTimeMillis() + timeoutMs;
            String verdict = "NO_VERDICT";
            try {
                while (System.currentTimeMillis() < deadline) {
                    ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                    if (!recs.isEmpty()) {
                        verdict = "OK";
                        o.put("first_fetched_offset", recs.iterator().next().offset());
                        break;
                    }
                    // at the log end there is nothing to fetch: a validated position that is not
                    // awaiting validation or reset is as good as a fetched record
                    if (positionSettled(c, t)) {
                        verdict = "OK";
                        break;
                    }
                }
                o.put("position", safePosition(c, t));
            } catch (LogTruncationException e) {
                verdict = "LogTruncationException";
                OffsetAndMetadata d = e.divergentOffsets().get(t);
                o.put("divergent_offset", d == null ? null : d.offset());
                o.put("divergent_epoch", d == null ? null : d.leaderEpoch().orElse(-1));
                o.put("message", e.getMessage());
            } catch (OffsetOutOfRangeException e) {
                verdict = "OffsetOutOfRangeException";
                o.put("message", e.getMessage());
            } catch (NoOffsetForPartitionException e) {
                verdict = "NoOffsetForPartitionException";
                o.put("message", e.getMessage());
            }
            o.put("verdict", verdict);
        } catch (NoOffsetForPartitionException e) {
            o.put("verdict", "NoOffsetForPartitionException");
            o.put("message", e.getMessage());
        } catch (Exception e) {
            o.put("verdict", "ERROR");
            o.put("message", e.toString());
        }
        return o;
    }

    private static Long safePosition(KafkaConsumer<byte[], byte[]> c, TopicPartition t) {
        try {
            return c.position(t, Duration.ofMillis(100));
        } catch (Exception e) {
            return null;
        }
    }

    private static boolean positionSettled(KafkaConsumer<byte[], byte[]> c, TopicPartition t) {
        // currentLag is known only once the position is valid (validated, not awaiting reset) and a
        // fetch response has given the high watermark
        return c.currentLag(t).isPresent();
    }
}
