// A consumer-group member (KafkaConsumer) behind dimster's consumer client; see DimsterConsumer.
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class DimsterGroupConsumer extends DimsterConsumer {
    private final KafkaConsumer<byte[], byte[]> consumer;
    // The rebalance callbacks since the last take, as (epoch ms, kind, partitions): kind 0 assigned,
    // 1 revoked, 2 lost. They run inside poll(), on the caller's thread.
    private final List<long[]> rebalances = new ArrayList<>();

    public DimsterGroupConsumer(Map<String, Object> config, boolean verify) {
        super(verify);
        consumer = new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Override
    protected Iterable<ConsumerRecord<byte[], byte[]>> fetch(Duration timeout) {
        return consumer.poll(timeout);
    }

    @Override
    protected Map<MetricName, ? extends Metric> clientMetrics() {
        return consumer.metrics();
    }

    @Override
    public void subscribe(String topic) {
        consumer.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                rebalances.add(new long[] {System.currentTimeMillis(), 0, partitions.size()});
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                rebalances.add(new long[] {System.currentTimeMillis(), 1, partitions.size()});
            }

            // No @Override: kafka-clients before 2.4 have no onPartitionsLost (KIP-429); they revoke instead.
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                rebalances.add(new long[] {System.currentTimeMillis(), 2, partitions.size()});
            }
        });
    }

    /** The rebalance callbacks since the last call, flat: epoch ms, kind, partitions; then forgotten. */
    public long[] takeRebalances() {
        long[] flat = new long[rebalances.size() * 3];
        for (int i = 0; i < rebalances.size(); i++) System.arraycopy(rebalances.get(i), 0, flat, 3 * i, 3);
        rebalances.clear();
        return flat;
    }

    /** The partitions assigned now. */
    public int[] assignedPartitions() {
        return consumer.assignment().stream().mapToInt(TopicPartition::partition).toArray();
    }

    /** Pause these assigned partitions and resume every other one. */
    public void pauseOnly(int[] paused) {
        Set<Integer> chosen = new HashSet<>();
        for (int p : paused) chosen.add(p);
        List<TopicPartition> pause = new ArrayList<>();
        List<TopicPartition> resume = new ArrayList<>();
        for (TopicPartition tp : consumer.assignment()) (chosen.contains(tp.partition()) ? pause : resume).add(tp);
        consumer.pause(pause);
        consumer.resume(resume);
    }

    @Override
    public void close(long timeoutMs) {
        consumer.close(Duration.ofMillis(timeoutMs));
    }
}
