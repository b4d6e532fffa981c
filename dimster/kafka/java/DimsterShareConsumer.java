// A share-group member (KafkaShareConsumer) behind dimster's consumer client; see DimsterConsumer.
// It needs the share consumer API of kafka-clients 4.3 (AcknowledgeType.RENEW, KIP-1222).
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.InvalidRecordStateException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class DimsterShareConsumer extends DimsterConsumer {
    private static final AcknowledgeType[] OUTCOMES = {AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT};

    private static final int KEY_PARTITION_SHIFT = 40;  // a record's key: partition << 40 | offset, as in Python
    private static final int STATUS_SHIFT = 60;  // an answer: its key | its status << 60 (see answer())
    private static final byte RENEWED = 1, RENEWAL_REFUSED = 2;  // renew()'s answer per record; 0: neither

    private final KafkaShareConsumer<byte[], byte[]> share;
    // New records a renewal's poll returned besides the renewed ones: the next poll hands them over.
    private final List<ConsumerRecord<byte[], byte[]>> fetchedWhileRenewing = new ArrayList<>();
    // The broker's answers to acknowledgements not taken yet, one long each (see answer()).
    private long[] answers = new long[64];
    public int answered;  // how many: Python looks at this one field per poll
    // Keys of records with renewals not answered yet, and how many: those answers are renew()'s (from
    // commitSync), not answers to acknowledgements. (An answer may come after the next renewal began.)
    private final Map<Long, Integer> renewing = new HashMap<>();
    // Records of the last poll whose renewal the broker granted but that no poll has returned since:
    // key -> their slot in `polled`. Not in flight, so not acknowledgeable until a poll returns them.
    private final Map<Long, Integer> awaited = new HashMap<>();
    // Outcomes chosen for records still awaited when the last poll was acknowledged: key -> outcome,
    // applied when a poll returns them.
    private final Map<Long, Byte> owed = new HashMap<>();
    private volatile int lockTimeoutMs = -1;  // as the last poll heard it (see acquisitionLockTimeoutMs)

    // Fetching ahead (fetchAhead): a thread of its own polls while Python accounts for the last poll.
    private static final long AHEAD_POLL_MS = 100;  // that thread's poll: how long a stop may wait for it
    private final Batch nothing = describe(List.of());
    private DimsterFetchAhead ahead;  // null unless fetching ahead, or stopped with a batch not taken yet
    private volatile Thread aheadThread;  // its thread while it runs
    private long[] aheadAnswers = new long[64];  // the broker's answers its poll under way took in
    private int aheadAnswered;
    private long shownPoll;  // which of its polls brought the batch handed over last (0: one before it)

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
        awaited.clear();  // those of the previous poll are owed by now
        if (!fetchedWhileRenewing.isEmpty()) {
            List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>(fetchedWhileRenewing);
            fetchedWhileRenewing.clear();
            return records;
        }
        ConsumerRecords<byte[], byte[]> records = share.poll(timeout);
        if (owed.isEmpty()) return records;
        List<ConsumerRecord<byte[], byte[]>> fresh = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> record : records) {  // renewed records back in flight at last
            Byte outcome = owed.remove(key(record));
            if (outcome == null) fresh.add(record);
            else share.acknowledge(record, OUTCOMES[outcome]);
        }
        return fresh;
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

    /** The broker's answer to acknowledgements (accepted, released, rejected, in either mode; renewals
     *  are renew()'s). Runs on the application thread, inside poll, commitSync or close. */
    private void onAcknowledged(Map<TopicIdPartition, Set<Long>> offsets, Exception exception) {
        long status = exception == null ? 0 : exception instanceof InvalidRecordStateException ? 1 : 2;
        for (Map.Entry<TopicIdPartition, Set<Long>> entry : offsets.entrySet()) {
            for (long offset : entry.getValue()) {
                long key = key(entry.getKey().partition(), offset);
                Integer renewals = renewing.remove(key);
                if (renewals == null) answer(key | status << STATUS_SHIFT);
                else if (renewals > 1) renewing.put(key, renewals - 1);
            }
        }
    }

    private void answer(long answer) {
        if (Thread.currentThread() == aheadThread) {  // handed over with its poll's batch (fetchAheadOnce)
            if (aheadAnswered == aheadAnswers.length) aheadAnswers = Arrays.copyOf(aheadAnswers, 2 * aheadAnswered);
            aheadAnswers[aheadAnswered++] = answer;
            return;
        }
        if (answered == answers.length) answers = Arrays.copyOf(answers, 2 * answered);
        answers[answered++] = answer;
    }

    /** The answers since the last call: key | status << 60, status 0 settled, 1 lock lapsed, 2 refused. */
    public long[] takeAnswers() {
        long[] taken = Arrays.copyOf(answers, answered);
        answered = 0;
        return taken;
    }

    /** The acquisition lock time-out the broker last reported, or -1 before it has. */
    public int acquisitionLockTimeoutMs() {
        if (aheadThread == null) lockTimeoutMs = share.acquisitionLockTimeoutMs().orElse(-1);
        return lockTimeoutMs;  // while fetching ahead, the consumer is the fetching thread's alone
    }

    /** KIP-1222: renews the acquisition locks of the last poll's records in flight, and decides from the
     *  broker's answer per partition which are renewed. A renewed record leaves the flight until a poll
     *  returns it: the poll after the renewal returns the renewed records and nothing new, though not
     *  always all of them (their renewal may not have been taken in yet); those stay in their slots,
     *  awaited, and are acknowledged when a poll returns them (see fetch). (A poll with records in flight
     *  unacknowledged is refused in explicit mode, so it is polled for again only while none came back.)
     *  Returns per record of the last poll RENEWED, RENEWAL_REFUSED (a refusal, or a renewal that
     *  failed, such as with a broker restarting: the record times out and comes back) or 0. */
    public byte[] renew(long timeoutMs) {
        byte[] answer = new byte[polled.size()];
        Map<Long, Integer> index = new HashMap<>();
        for (int i = 0; i < polled.size(); i++) {
            ConsumerRecord<byte[], byte[]> record = polled.get(i);
            if (record == null || awaited.containsKey(key(record))) continue;
            share.acknowledge(record, AcknowledgeType.RENEW);
            index.put(key(record), i);
        }
        for (long key : index.keySet()) renewing.merge(key, 1, Integer::sum);
        Map<TopicIdPartition, Optional<KafkaException>> results = Map.of();
        long deadline = System.currentTimeMillis() + timeoutMs;
        try {
            results = share.commitSync(Duration.ofMillis(timeoutMs));
        } catch (KafkaException e) {  // not renewed: the records time out and come back
        }
        Set<Integer> granted = new HashSet<>();
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> entry : results.entrySet()) {
            if (entry.getValue().isEmpty()) granted.add(entry.getKey().partition());
        }
        for (Map.Entry<Long, Integer> entry : index.entrySet()) {
            int i = entry.getValue();
            if (granted.contains(polled.get(i).partition())) {
                answer[i] = RENEWED;
                awaited.put(entry.getKey(), i);
            } else {
                answer[i] = RENEWAL_REFUSED;
                polled.set(i, null);
            }
        }
        boolean returned = false;
        while (!awaited.isEmpty() && !returned && System.currentTimeMillis() < deadline) {
            long left = Math.max(0, deadline - System.currentTimeMillis());
            for (ConsumerRecord<byte[], byte[]> record : share.poll(Duration.ofMillis(left))) {
                returned = true;
                Integer i = awaited.remove(key(record));
                if (i == null) fetchedWhileRenewing.add(record);
                else polled.set(i, record);
            }
        }
        return answer;
    }

    /** Whether a thread of its own polls while Python handles the last poll, as librdkafka's threads
     *  fetch: in implicit mode with no processing only, for each of its polls accepts the batch Python
     *  took last (DimsterFetchAhead). Turning it off waits for the poll under way; the batch it fetched is
     *  the next poll's, which must come before it is turned on again. Every call on the consumer but
     *  metrics() goes through the fetching thread meanwhile. */
    public void fetchAhead(boolean on) {
        if (!on) {
            stopFetchingAhead();
        } else if (aheadThread == null) {
            if (ahead != null) throw new IllegalStateException("fetching ahead again before a poll took its batch");
            ahead = new DimsterFetchAhead(this::fetchAheadOnce);
            shownPoll = 0;  // the batch Python holds goes with the thread's first poll
            aheadThread = ahead.thread();
            ahead.start();
        }
    }

    private DimsterFetchAhead.Fetched fetchAheadOnce(long number) {
        Batch batch = describe(fetch(Duration.ofMillis(AHEAD_POLL_MS)));
        lockTimeoutMs = share.acquisitionLockTimeoutMs().orElse(-1);  // Python's thread may not ask
        if (batch.records.isEmpty() && aheadAnswered == 0) return null;
        long[] answers = Arrays.copyOf(aheadAnswers, aheadAnswered);
        aheadAnswered = 0;
        return new DimsterFetchAhead.Fetched(batch, answers, number);
    }

    /** Stops the fetching thread (after its poll under way); returns whether a poll of it accepted the
     *  last batch handed over. The batch it fetched is takeFetched's, or the next poll's. */
    public boolean stopFetchingAhead() {
        if (aheadThread == null) return false;
        ahead.stop();
        aheadThread = null;
        for (int i = 0; i < aheadAnswered; i++) answer(aheadAnswers[i]);  // of a poll that threw after them
        aheadAnswered = 0;
        return ahead.accepted(shownPoll);
    }

    /** Batches the fetching thread fetched that Python has not taken (0 or 1). */
    public int fetchedAhead() {
        return ahead != null && ahead.holds() ? 1 : 0;
    }

    @Override
    public int poll(long timeoutMs) {
        if (ahead != null) {
            if (aheadThread != null && ahead.running()) {
                DimsterFetchAhead.Fetched fetched = ahead.take(timeoutMs);
                return fetched != null ? hand(fetched) : show(nothing);
            }
            stopFetchingAhead();  // stopped, or ended by a failure
            DimsterFetchAhead.Fetched left = takeLeft();  // throws that failure when nothing is left
            if (left != null) return hand(left);
        }
        return super.poll(timeoutMs);
    }

    /** After a stop: hands over the batch the thread fetched and Python has not taken (not accepted),
     *  with the broker's answers that came in its poll; its count of records, or -1 when there is none
     *  (a failure of its last poll is the next poll's to throw, not this one's). */
    public int takeFetched() {
        if (ahead == null || aheadThread != null) return -1;
        try {
            DimsterFetchAhead.Fetched left = takeLeft();
            return left != null ? hand(left) : -1;
        } catch (RuntimeException e) {
            return -1;
        }
    }

    /** The stopped thread's batch, if any; fetching ahead is over once it is taken. */
    private DimsterFetchAhead.Fetched takeLeft() {
        DimsterFetchAhead stopped = ahead;
        ahead = null;
        return stopped.take(0);
    }

    private int hand(DimsterFetchAhead.Fetched fetched) {
        waitedMs = (System.nanoTime() - fetched.polledAt) / 1e6;
        shownPoll = fetched.poll;
        for (long answer : fetched.answers) answer(answer);
        return show(fetched.batch);
    }

    private static long key(ConsumerRecord<byte[], byte[]> record) {
        return key(record.partition(), record.offset());
    }

    private static long key(int partition, long offset) {
        return ((long) partition << KEY_PARTITION_SHIFT) | offset;
    }

    /** Explicit acknowledgement of every record of the last poll still held: 0 accept, 1 release, 2
     *  reject; a renewed record no poll has returned yet is acknowledged when one does. */
    public void acknowledge(byte[] outcomes) {
        for (int i = 0; i < outcomes.length; i++) {
            ConsumerRecord<byte[], byte[]> record = polled.get(i);
            if (record == null) continue;
            if (awaited.containsKey(key(record))) owed.put(key(record), outcomes[i]);
            else share.acknowledge(record, OUTCOMES[outcomes[i]]);
        }
    }

    /** Settles the last poll (implicit mode accepts it here) before leaving: renewed records no poll
     *  has returned yet are polled for (for up to 5 s) and acknowledged with their outcome; records a
     *  renewal's poll fetched besides them, never handed over, are released. */
    @Override
    public void commitSync() {
        stopFetchingAhead();
        if (fetchedAhead() > 0) return;  // never taken by Python: the close releases it (its poll accepted the rest)
        for (ConsumerRecord<byte[], byte[]> record : fetchedWhileRenewing) share.acknowledge(record, AcknowledgeType.RELEASE);
        fetchedWhileRenewing.clear();  // never handed over: back to the group
        long deadline = System.currentTimeMillis() + 5_000;
        while (!owed.isEmpty() && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> record : share.poll(Duration.ofMillis(100))) {
                Byte outcome = owed.remove(key(record));  // nothing else comes with them; if it did: released
                share.acknowledge(record, outcome == null ? AcknowledgeType.RELEASE : OUTCOMES[outcome]);
            }
        }
        share.commitSync();
    }

    @Override
    public void close(long timeoutMs) {
        stopFetchingAhead();
        share.close(Duration.ofMillis(timeoutMs));
    }
}
