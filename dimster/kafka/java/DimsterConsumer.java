// Kafka's Java consumers behind dimster's consumer client (clientLibrary: java): a share-group
// member (KafkaShareConsumer) or a consumer-group member (KafkaConsumer). Each poll is handed to
// Python as flat arrays (partitions, delivery counts, the first 23 bytes of every value), so Python
// crosses into Java once per poll rather than once per record.
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.zip.CRC32;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidRecordStateException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class DimsterConsumer {
    private static final AcknowledgeType[] OUTCOMES = {AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT};

    private final KafkaShareConsumer<byte[], byte[]> share;  // exactly one of these two is set
    private final KafkaConsumer<byte[], byte[]> classic;
    // The last poll's records still in flight; null where a renewal was refused (no longer ours to acknowledge).
    private final List<ConsumerRecord<byte[], byte[]>> polled = new ArrayList<>();
    // New records a renewal's poll returned besides the renewed ones: the next poll hands them over.
    private final List<ConsumerRecord<byte[], byte[]>> fetchedWhileRenewing = new ArrayList<>();
    // Acknowledgements the broker refused because the records were no longer acquired by this member
    // (their lock had timed out), as (partition, offset) pairs; and other refusals, counted.
    private final List<long[]> lockLapsed = new ArrayList<>();
    public int otherRefusals;
    public int renewalsRefused;
    public int refused;  // all refusals not taken yet: Python looks at this one field per poll
    private final java.util.Set<Long> renewing = new java.util.HashSet<>();  // keys of records being renewed

    // The last poll, for Python to read.
    public int[] partitions = new int[0];
    public int[] deliveryCounts = new int[0];  // 1 for consumer groups
    public byte[] headers = new byte[0];  // the first HEADER_SIZE bytes of each value, zero-filled when shorter
    public long valueBytes;
    public long[] offsets = new long[0];
    public boolean[] intact = new boolean[0];  // when verifying: the body's CRC-32 matches its first 4 bytes
    private final boolean verify;

    public DimsterConsumer(Map<String, Object> config, boolean shareGroup, boolean verify) {
        this.verify = verify;
        ByteArrayDeserializer keys = new ByteArrayDeserializer(), values = new ByteArrayDeserializer();
        share = shareGroup ? new KafkaShareConsumer<>(config, keys, values) : null;
        classic = shareGroup ? null : new KafkaConsumer<>(config, keys, values);
        if (share != null) share.setAcknowledgementCommitCallback(this::onAcknowledged);
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

    // Consumer groups: the rebalance callbacks since the last take, as (epoch ms, kind, partitions):
    // kind 0 assigned, 1 revoked, 2 lost. They run inside poll(), on the caller's thread.
    private final List<long[]> rebalances = new ArrayList<>();

    public void subscribe(String topic) {
        if (share != null) {
            share.subscribe(List.of(topic));
            return;
        }
        classic.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                rebalances.add(new long[] {System.currentTimeMillis(), 0, partitions.size()});
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                rebalances.add(new long[] {System.currentTimeMillis(), 1, partitions.size()});
            }

            @Override
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

    /** Consumer groups: the partitions assigned now. */
    public int[] assignedPartitions() {
        return classic.assignment().stream().mapToInt(TopicPartition::partition).toArray();
    }

    /** Consumer groups: pause these assigned partitions and resume every other one. */
    public void pauseOnly(int[] paused) {
        Set<Integer> chosen = new HashSet<>();
        for (int p : paused) chosen.add(p);
        List<TopicPartition> pause = new ArrayList<>();
        List<TopicPartition> resume = new ArrayList<>();
        for (TopicPartition tp : classic.assignment()) (chosen.contains(tp.partition()) ? pause : resume).add(tp);
        classic.pause(pause);
        classic.resume(resume);
    }

    /** Polls once; returns the number of records, described by the public fields. */
    public int poll(long timeoutMs) {
        Duration timeout = Duration.ofMillis(timeoutMs);
        Iterable<ConsumerRecord<byte[], byte[]>> records;
        int count;
        if (!fetchedWhileRenewing.isEmpty()) {
            records = new ArrayList<>(fetchedWhileRenewing);
            count = fetchedWhileRenewing.size();
            fetchedWhileRenewing.clear();
        } else {
            ConsumerRecords<byte[], byte[]> fetched = share != null ? share.poll(timeout) : classic.poll(timeout);
            records = fetched;
            count = fetched.count();
        }
        int size = DimsterProducer.HEADER_SIZE;
        polled.clear();
        partitions = new int[count];
        deliveryCounts = new int[count];
        offsets = new long[count];
        intact = new boolean[verify ? count : 0];
        headers = new byte[count * size];
        valueBytes = 0;
        int i = 0;
        for (ConsumerRecord<byte[], byte[]> record : records) {
            polled.add(record);
            partitions[i] = record.partition();
            deliveryCounts[i] = record.deliveryCount().map(Short::intValue).orElse(1);
            offsets[i] = record.offset();
            byte[] value = record.value();
            if (value != null) {
                valueBytes += value.length;
                System.arraycopy(value, 0, headers, i * size, Math.min(size, value.length));
                if (verify) intact[i] = bodyIntact(value, size);
            }
            i++;
        }
        return count;
    }

    /** A checksummed body (see payload.py): its first 4 bytes, big-endian, are the CRC-32 of the rest. */
    static boolean bodyIntact(byte[] value, int headerSize) {
        int body = headerSize + 4;
        if (value.length < body) return false;
        long expected = ((value[headerSize] & 0xFFL) << 24) | ((value[headerSize + 1] & 0xFFL) << 16)
            | ((value[headerSize + 2] & 0xFFL) << 8) | (value[headerSize + 3] & 0xFFL);
        CRC32 crc = new CRC32();
        crc.update(value, body, value.length - body);
        return crc.getValue() == expected;
    }

    /** Explicit acknowledgement of every record of the last poll still held: 0 accept, 1 release, 2 reject. */
    public void acknowledge(byte[] outcomes) {
        for (int i = 0; i < outcomes.length; i++) {
            if (polled.get(i) != null) share.acknowledge(polled.get(i), OUTCOMES[outcomes[i]]);
        }
    }

    /** Share groups: settles the last poll (implicit mode accepts it here) before leaving. */
    public void commitSync() {
        if (share != null) share.commitSync();
    }

    public void close(long timeoutMs) {
        if (share != null) share.close(Duration.ofMillis(timeoutMs));
        else classic.close(Duration.ofMillis(timeoutMs));
    }

    public double[] metrics(String[] names) {
        Map<MetricName, ? extends Metric> metrics = share != null ? share.metrics() : classic.metrics();
        return DimsterClientSupport.metricValues(metrics, names);
    }
}
