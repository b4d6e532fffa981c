// What dimster asks of Kafka's Java clients besides producing and consuming: chosen metric values,
// and a check of client properties before a run starts or changes. It compiles against kafka-clients
// 2.x too (clientVersion); DimsterShareConsumer checks share consumers' properties.
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class DimsterClientSupport {
    private DimsterClientSupport() {}

    /**
     * For each "group:name", the client-wide value of that metric: the one with the fewest tags
     * (client-id only), or the sum over topics where it exists per topic only. 0 when the client has
     * no such metric or its value is not a finite number.
     */
    public static double[] metricValues(Map<MetricName, ? extends Metric> metrics, String[] names) {
        Map<String, Integer> wanted = new HashMap<>();
        for (int i = 0; i < names.length; i++) wanted.put(names[i], i);
        double[] values = new double[names.length];
        int[] tags = new int[names.length];
        Arrays.fill(tags, Integer.MAX_VALUE);
        for (Map.Entry<MetricName, ? extends Metric> entry : metrics.entrySet()) {
            MetricName name = entry.getKey();
            Integer index = wanted.get(name.group() + ":" + name.name());
            if (index == null || !(entry.getValue().metricValue() instanceof Number number)) continue;
            int tagCount = name.tags().size();
            if (tagCount < tags[index]) {
                tags[index] = tagCount;
                values[index] = 0;
            }
            double value = number.doubleValue();
            if (tagCount == tags[index] && Double.isFinite(value)) values[index] += value;
        }
        return values;
    }

    /** The property names a role's client knows: producer, consumer or share_consumer. */
    public static Set<String> configNames(String role) {
        return role.equals("producer") ? ProducerConfig.configNames() : ConsumerConfig.configNames();
    }

    /** Builds the role's client (producer or consumer) from `config` and closes it: throws what Kafka throws for bad values. */
    public static void check(String role, Map<String, Object> config) {
        Duration now = Duration.ZERO;
        switch (role) {
            case "producer" -> new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer()).close(now);
            case "consumer" -> new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer()).close(now);
            default -> throw new IllegalArgumentException("unknown role " + role);
        }
    }
}
