// A share-group member (KafkaShareConsumer) behind dimster's consumer client; see DimsterConsumer.
// It needs the share consumer API of kafka-clients 4.3 (AcknowledgeType.RENEW, KIP-1222).
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.InvalidRecordStateException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class DimsterShareConsumer extends DimsterConsumer {
    private static final AcknowledgeType[] OUTCOMES = {AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT};

    private final KafkaShareConsumer<byte[], byte[]> share;
    // New records a renewal's poll returned besides the renewed ones: the next poll hands them over.
    private final List<ConsumerRecord<byte[], byte[]>> fetchedWhileRenewing = new ArrayList<>();
    // Acknowledgements the broker refused because the records were no longer acquired by this member
    // (their lock had timed out), as (partition, offset) pairs; and other refusals, counted.
    private final List<long[]> lockLapsed = new ArrayList<>();
    public int otherRefusals;
    public int renewalsRefused;
    public int refused;  // all refusals not taken yet: Python looks at this one field per poll
    private final Set<Long> renewing = new HashSet<>();  // keys of records being renewed

    public DimsterShareConsumer(Map<String, Object> config, boolean verify) {
        super(verify);
        share = create(config);
        share.setAcknowledgementCommitCallback(this::onAcknowledged);
    }

    private static KafkaShareConsumer<byte[], byte[]> create(Map<String, Object> config) {
        return new KafkaShareConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** Builds a share consumer from `config` and closes it: throws what Kafka throws for bad values. */
    public static void check(Map<String, Object> config) {
        create(config).close(Duration.ZERO);
    }

    @Override
    protected Iterable<ConsumerRecord<byte[], byte[]>> fetch(Duration timeout) {
        if (fetchedWhileRenewing.isEmpty()) return share.poll(timeout);
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>(fetchedWhileRenewing);
        fetchedWhileRenewing.clear();
        return records;
    }

    @Override
    protected int deliveryCount(ConsumerRecord<byte[], byte[]> record) {
        return record.deliveryCount().map(Short::intValue).orElse(1);
    }

    @Override
    protected Map<MetricName, ? extends Metric> clientMetrics() {
        return share.metrics();
    }

    @Override
    public void subscribe(String topic) {
        share.subscribe(List.of(topic));
    }

    /** Runs on the application thread, inside poll, commitSync or close. */
    private void onAcknowledged(Map<TopicIdPartition, Set<Long>> offsets, Exception exception) {
        if (exception == null) return;
        for (Map.Entry<TopicIdPartition, Set<Long>> entry : offsets.entrySet()) {
            for (long offset : entry.getValue()) {
                if (renewing.contains(key(entry.getKey().partition(), offset))) continue;  // renew() counts those
                refused++;
                if (exception instanceof InvalidRecordStateException) lockLapsed.add(new long[] {entry.getKey().partition(), offset});
                else otherRefusals++;
            }
        }
    }

    /** The (partition, offset) pairs refused since the last call, flattened. */
    public long[] takeLockLapsed() {
        long[] pairs = new long[lockLapsed.size() * 2];
        for (int i = 0; i < lockLapsed.size(); i++) {
            pairs[2 * i] = lockLapsed.get(i)[0];
            pairs[2 * i + 1] = lockLapsed.get(i)[1];
        }
        lockLapsed.clear();
        refused = 0;
        return pairs;
    }

    /** The acquisition lock time-out the broker last reported, or -1 before it has. */
    public int acquisitionLockTimeoutMs() {
        return share.acquisitionLockTimeoutMs().orElse(-1);
    }

    /** KIP-1222: renews the acquisition lock of the last poll's records still held and takes them back
     *  in flight (the poll after a renewal returns the renewed records and nothing new). Returns per
     *  record of the last poll whether it is still held. A renewal the broker refuses, or that fails
     *  (a broker restarting), counts in renewalsRefused and leaves its record to time out. */
    public boolean[] renew(long timeoutMs) {
        boolean[] held = new boolean[polled.size()];
        Map<Long, Integer> index = new HashMap<>();
        for (int i = 0; i < polled.size(); i++) {
            ConsumerRecord<byte[], byte[]> record = polled.get(i);
            if (record == null) continue;
            share.acknowledge(record, AcknowledgeType.RENEW);
            index.put(key(record), i);
        }
        renewing.addAll(index.keySet());
        try {
            Map<TopicIdPartition, Optional<KafkaException>> answers = share.commitSync(Duration.ofMillis(timeoutMs));
            if (answers.values().stream().anyMatch(Optional::isEmpty)) {
                for (ConsumerRecord<byte[], byte[]> record : share.poll(Duration.ofMillis(timeoutMs))) {
                    Integer i = index.get(key(record));
                    if (i == null) fetchedWhileRenewing.add(record);
                    else {
                        polled.set(i, record);
                        held[i] = true;
                    }
                }
            }
        } catch (KafkaException e) {  // not renewed: the records time out and come back
        } finally {
            renewing.clear();
        }
        for (int i = 0; i < held.length; i++) {
            if (!held[i] && polled.get(i) != null) {
                polled.set(i, null);
                renewalsRefused++;
                refused++;
            }
        }
        return held;
    }

    private static long key(ConsumerRecord<byte[], byte[]> record) {
        return key(record.partition(), record.offset());
    }

    private static long key(int partition, long offset) {
        return ((long) partition << 40) ^ offset;
    }

    /** Explicit acknowledgement of every record of the last poll still held: 0 accept, 1 release, 2 reject. */
    public void acknowledge(byte[] outcomes) {
        for (int i = 0; i < outcomes.length; i++) {
            if (polled.get(i) != null) share.acknowledge(polled.get(i), OUTCOMES[outcomes[i]]);
        }
    }

    /** Settles the last poll (implicit mode accepts it here) before leaving. */
    @Override
    public void commitSync() {
        share.commitSync();
    }

    @Override
    public void close(long timeoutMs) {
        share.close(Duration.ofMillis(timeoutMs));
    }
}
