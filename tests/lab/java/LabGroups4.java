import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;

/**
 * Lab helper for group types newer than the classic protocol, to make brokers write their records into
 * {@code __consumer_offsets}. Everything 4.x-only is reached by reflection, so this compiles against the
 * kafka-clients of both 4.4.0 and 3.9.2.
 *
 * <pre>
 * java -cp CLASSPATH LabGroups4 BOOTSTRAP share GROUP TOPIC [POLLS]   # KafkaShareConsumer (KIP-932)
 * java -cp CLASSPATH LabGroups4 BOOTSTRAP regex GROUP RE2J [POLLS]    # consumer protocol, broker-side regex
 * </pre>
 * Prints one line: {@code records=N} (records received), exit status 0; any exception: status 1.
 */
public final class LabGroups4 {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], op = args[1], group = args[2], what = args[3];
        int polls = args.length > 4 ? Integer.parseInt(args[4]) : 20;
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", "lab-groups4-" + op);
        int got;
        if ("share".equals(op)) {
            got = share(p, what, polls);
        } else if ("regex".equals(op)) {
            got = regex(p, what, polls);
        } else {
            throw new IllegalArgumentException("unknown op " + op);
        }
        System.out.println("records=" + got);
    }

    private static int share(Properties p, String topic, int polls) throws Exception {
        Class<?> cls = Class.forName("org.apache.kafka.clients.consumer.KafkaShareConsumer");
        Constructor<?> ctor = cls.getConstructor(Properties.class, Deserializer.class, Deserializer.class);
        Object c = ctor.newInstance(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        int got = 0;
        try {
            cls.getMethod("subscribe", Collection.class).invoke(c, List.of(topic));
            Method poll = cls.getMethod("poll", Duration.class);
            Method commit = cls.getMethod("commitSync");
            for (int i = 0; i < polls; i++) {
                Object recs = poll.invoke(c, Duration.ofMillis(500));
                got += (Integer) recs.getClass().getMethod("count").invoke(recs);
                commit.invoke(c);
            }
        } finally {
            cls.getMethod("close").invoke(c);
        }
        return got;
    }

    private static int regex(Properties p, String re2j, int polls) throws Exception {
        p.put("group.protocol", "consumer");
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        Class<?> pat = Class.forName("org.apache.kafka.clients.consumer.SubscriptionPattern");
        Object pattern = pat.getConstructor(String.class).newInstance(re2j);
        int got = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            KafkaConsumer.class.getMethod("subscribe", pat).invoke(c, pattern);
            for (int i = 0; i < polls; i++) {
                got += c.poll(Duration.ofMillis(500)).count();
                if (got > 0) c.commitSync();
            }
        }
        return got;
    }
}
