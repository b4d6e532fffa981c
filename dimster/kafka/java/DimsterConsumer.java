// Kafka's Java consumers behind dimster's consumer client (clientLibrary: java): what a share-group
// member (DimsterShareConsumer) and a consumer-group member (DimsterGroupConsumer) share. Each poll is
// handed to Python as flat arrays (partitions, delivery counts, the first 23 bytes of every value),
// so Python crosses into Java once per poll rather than once per record. This class and the group
// consumer use only what kafka-clients 2.x already had, so older clients (clientVersion) compile them.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;

public abstract class DimsterConsumer {
    // The last poll's records still in flight; null where a renewal was refused (no longer ours to acknowledge).
    protected final List<ConsumerRecord<byte[], byte[]>> polled = new ArrayList<>();

    // The last poll, for Python to read.
    public int[] partitions = new int[0];
    public int[] deliveryCounts = new int[0];  // 1 for consumer groups
    public byte[] headers = new byte[0];  // the first HEADER_SIZE bytes of each value, zero-filled when shorter
    public long valueBytes;
    public long[] offsets = new long[0];
    public boolean[] intact = new boolean[0];  // when verifying: the body's CRC-32 matches its first 4 bytes
    private final boolean verify;

    protected DimsterConsumer(boolean verify) {
        this.verify = verify;
    }

    /** The records of one poll of the Kafka client. */
    protected abstract Iterable<ConsumerRecord<byte[], byte[]>> fetch(Duration timeout);

    protected int deliveryCount(ConsumerRecord<byte[], byte[]> record) {
        return 1;
    }

    protected abstract Map<MetricName, ? extends Metric> clientMetrics();

    public abstract void subscribe(String topic);

    /** Share groups: settles the last poll before leaving; nothing to settle for consumer groups. */
    public void commitSync() {}

    public abstract void close(long timeoutMs);

    /** Polls once; returns the number of records, described by the public fields. */
    public int poll(long timeoutMs) {
        polled.clear();
        for (ConsumerRecord<byte[], byte[]> record : fetch(Duration.ofMillis(timeoutMs))) polled.add(record);
        int count = polled.size();
        int size = DimsterProducer.HEADER_SIZE;
        partitions = new int[count];
        deliveryCounts = new int[count];
        offsets = new long[count];
        intact = new boolean[verify ? count : 0];
        headers = new byte[count * size];
        valueBytes = 0;
        for (int i = 0; i < count; i++) {
            ConsumerRecord<byte[], byte[]> record = polled.get(i);
            partitions[i] = record.partition();
            deliveryCounts[i] = deliveryCount(record);
            offsets[i] = record.offset();
            byte[] value = record.value();
            if (value != null) {
                valueBytes += value.length;
                System.arraycopy(value, 0, headers, i * size, Math.min(size, value.length));
                if (verify) intact[i] = bodyIntact(value, size);
            }
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

    public double[] metrics(String[] names) {
        return DimsterClientSupport.metricValues(clientMetrics(), names);
    }
}
