// Kafka's Java producer behind dimster's producer client (clientLibrary: java). Python paces and
// hands over a batch of due records per call; this class builds each value (dimster's 23-byte
// header, then a body), sends it, and collects acknowledgement latencies and failures, so Python
// crosses into Java once per batch rather than once per record.
import java.nio.ByteBuffer;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.Map;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class DimsterProducer {
    /** The header of dimster/workload/payload.py: magic "DM", version 1, producer id, sequence, intended ns. */
    public static final int HEADER_SIZE = 23;

    private final KafkaProducer<byte[], byte[]> producer;
    private final String topic;
    private final int producerId;
    private final byte[][] bodies;
    private final long epochMinusNanoTime = epochNanos() - System.nanoTime();
    private long[] latencies = new long[1024];  // microseconds from send() to acknowledgement
    private int latencyCount;
    private long[] failed = new long[16];  // sequences the producer could not deliver
    private int failedCount;
    private volatile boolean closing;
    private long abortedByClose;  // failed once close() began: what the close timeout cut off

    public DimsterProducer(Map<String, Object> config, String topic, int producerId, byte[][] bodies) {
        this.producer = new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
        this.topic = topic;
        this.producerId = producerId;
        this.bodies = bodies;
        try {
            producer.partitionsFor(topic);  // the topic's leaders now, not with the first record
        } catch (KafkaException e) {
            // no answer within max.block.ms: each send fails the same way and is counted as failed
        }
    }

    private static long epochNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    /**
     * Sends sequences first .. first + n - 1 with their intended send times (epoch ns), to the given
     * partitions (-1: the partitioner chooses) with the given keys (null: none). Returns when each
     * was handed to the producer (epoch ns); blocks while the producer's buffer is full.
     */
    public long[] send(long firstSequence, long[] intendedNanos, int[] partitions, byte[][] keys) {
        int count = intendedNanos.length;
        long[] handedOver = new long[count];
        for (int i = 0; i < count; i++) {
            long sequence = firstSequence + i;
            byte[] body = bodies[(int) (sequence % bodies.length)];
            byte[] value = new byte[HEADER_SIZE + body.length];
            ByteBuffer.wrap(value)
                .put((byte) 'D').put((byte) 'M').put((byte) 1)
                .putInt(producerId).putLong(sequence).putLong(intendedNanos[i])
                .put(body);
            Integer partition = partitions[i] >= 0 ? partitions[i] : null;
            byte[] key = keys == null ? null : keys[i];
            Acknowledgement acknowledgement = new Acknowledgement(sequence);
            producer.send(new ProducerRecord<>(topic, partition, key, value), acknowledgement);
            long now = System.nanoTime();  // latency counts from here, as librdkafka's from produce()
            acknowledgement.handedOverNanos = now;  // time blocked in send() shows as publish delay
            handedOver[i] = now + epochMinusNanoTime;
        }
        return handedOver;
    }

    private final class Acknowledgement implements Callback {
        private final long sequence;
        volatile long handedOverNanos;  // 0 until send() returned (a completion can come first)

        Acknowledgement(long sequence) {
            this.sequence = sequence;
        }

        @Override
        public void onCompletion(RecordMetadata metadata, Exception exception) {
            long now = System.nanoTime();
            long start = handedOverNanos;
            long micros = start == 0 ? 0 : (now - start) / 1000;
            synchronized (DimsterProducer.this) {
                if (exception != null) {
                    if (closing) abortedByClose++;
                    if (failedCount == failed.length) failed = Arrays.copyOf(failed, failedCount * 2);
                    failed[failedCount++] = sequence;
                } else {
                    if (latencyCount == latencies.length) latencies = Arrays.copyOf(latencies, latencyCount * 2);
                    latencies[latencyCount++] = micros;
                }
            }
        }
    }

    /** Latencies (microseconds) of the acknowledgements since the last call. */
    public synchronized long[] takeLatenciesMicros() {
        long[] taken = Arrays.copyOf(latencies, latencyCount);
        latencyCount = 0;
        return taken;
    }

    /** Sequences that failed since the last call. */
    public synchronized long[] takeFailedSequences() {
        long[] taken = Arrays.copyOf(failed, failedCount);
        failedCount = 0;
        return taken;
    }

    /**
     * Sends what is buffered, waits up to timeoutMs for it, closes; returns how many records failed
     * meanwhile (those the timeout cut off; they are also among the failed sequences).
     */
    public long close(long timeoutMs) {
        closing = true;
        producer.close(Duration.ofMillis(timeoutMs));
        synchronized (this) {
            return abortedByClose;
        }
    }

    public double[] metrics(String[] names) {
        return DimsterClientSupport.metricValues(producer.metrics(), names);
    }
}
