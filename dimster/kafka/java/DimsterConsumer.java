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
    public double waitedMs;  // fetched ahead (DimsterShareConsumer): how long it waited, acquired, for Python
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
        waitedMs = 0;
        return show(describe(fetch(Duration.ofMillis(timeoutMs))));
    }

    /** One poll's records as the public fields describe them, built on the thread that polled. */
    protected static final class Batch {
        final List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        int[] partitions, deliveryCounts;
        byte[] headers;
        long valueBytes;
        long[] offsets;
        boolean[] intact;
    }

    protected Batch describe(Iterable<ConsumerRecord<byte[], byte[]>> fetched) {
        Batch batch = new Batch();
        for (ConsumerRecord<byte[], byte[]> record : fetched) batch.records.add(record);
        int count = batch.records.size();
        int size = DimsterProducer.HEADER_SIZE;
        batch.partitions = new int[count];
        batch.deliveryCounts = new int[count];
        batch.offsets = new long[count];
        batch.intact = new boolean[verify ? count : 0];
        batch.headers = new byte[count * size];
        for (int i = 0; i < count; i++) {
            ConsumerRecord<byte[], byte[]> record = batch.records.get(i);
            batch.partitions[i] = record.partition();
            batch.deliveryCounts[i] = deliveryCount(record);
            batch.offsets[i] = record.offset();
            byte[] value = record.value();
            if (value != null) {
                batch.valueBytes += value.length;
                System.arraycopy(value, 0, batch.headers, i * size, Math.min(size, value.length));
                if (verify) batch.intact[i] = bodyIntact(value, size);
            }
        }
        return batch;
    }

    /** Hands a batch over to Python: the public fields and `polled` describe it from now on. */
    protected int show(Batch batch) {
        polled.clear();
        polled.addAll(batch.records);
        partitions = batch.partitions;
        deliveryCounts = batch.deliveryCounts;
        headers = batch.headers;
        valueBytes = batch.valueBytes;
        offsets = batch.offsets;
        intact = batch.intact;
        return batch.records.size();
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
