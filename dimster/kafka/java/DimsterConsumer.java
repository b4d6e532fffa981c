// Kafka's Java consumers behind dimster's consumer client (clientLibrary: java): a share-group
// member (KafkaShareConsumer) or a consumer-group member (KafkaConsumer). Each poll is handed to
// Python as flat arrays (partitions, delivery counts, the first 23 bytes of every value), so Python
// crosses into Java once per poll rather than once per record.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class DimsterConsumer {
    private static final AcknowledgeType[] OUTCOMES = {AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT};

    private final KafkaShareConsumer<byte[], byte[]> share;  // exactly one of these two is set
    private final KafkaConsumer<byte[], byte[]> classic;
    private final List<ConsumerRecord<byte[], byte[]>> polled = new ArrayList<>();

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
    }

    public void subscribe(String topic) {
        if (share != null) share.subscribe(List.of(topic));
        else classic.subscribe(List.of(topic));
    }

    /** Polls once; returns the number of records, described by the public fields. */
    public int poll(long timeoutMs) {
        Duration timeout = Duration.ofMillis(timeoutMs);
        ConsumerRecords<byte[], byte[]> records = share != null ? share.poll(timeout) : classic.poll(timeout);
        int count = records.count();
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

    /** Explicit acknowledgement of every record of the last poll: 0 accept, 1 release, 2 reject. */
    public void acknowledge(byte[] outcomes) {
        for (int i = 0; i < outcomes.length; i++) {
            share.acknowledge(polled.get(i), OUTCOMES[outcomes[i]]);
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
