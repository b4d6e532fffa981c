// A share consumer's polls made ahead of Python, on a thread of their own (see
// DimsterShareConsumer.fetchAhead): up to DEPTH batches wait for Python, each with the broker's answers
// the poll that brought it took in. Each poll accepts (implicit mode) the batch the poll before it
// brought, so with DEPTH 1 a batch is accepted only once Python has taken it (two drained no faster:
// docs/benchmarks.md), and the batch a stopped thread leaves is never accepted.
import java.util.ArrayDeque;

final class DimsterFetchAhead {
    static final int DEPTH = 1;  // batches fetched and not taken yet, at most

    /** One poll's batch (maybe empty) and the answers that came in during that poll. */
    static final class Fetched {
        final DimsterConsumer.Batch batch;
        final long[] answers;
        final long polledAt;  // System.nanoTime()
        final long poll;  // which poll of the thread brought it (1, 2, ...; 0: an earlier thread's)

        Fetched(DimsterConsumer.Batch batch, long[] answers, long polledAt, long poll) {
            this.batch = batch;
            this.answers = answers;
            this.polledAt = polledAt;
            this.poll = poll;
        }
    }

    /** One poll of the consumer, on the fetching thread: null when it brought neither records nor answers. */
    interface Poll {
        Fetched poll(long number);
    }

    private final Poll poll;
    private final Thread thread;
    private final ArrayDeque<Fetched> queue = new ArrayDeque<>();  // guarded by itself, as are the fields below
    private boolean stopping;
    private long pollsStarted;
    private RuntimeException failure;

    /** `before`: a stopped one whose batches Python has not all taken: they come first, as poll 0. */
    DimsterFetchAhead(Poll poll, DimsterFetchAhead before) {
        this.poll = poll;
        if (before != null) {
            for (Fetched f : before.queue) queue.addLast(new Fetched(f.batch, f.answers, f.polledAt, 0));
            failure = before.failure;
        }
        thread = new Thread(this::run, "dimster-fetch-ahead");
        thread.setDaemon(true);
    }

    /** Its thread, before it starts: whatever runs on it is the fetching's. */
    Thread thread() {
        return thread;
    }

    void start() {
        thread.start();
    }

    private void run() {
        try {
            while (true) {
                long number;
                synchronized (queue) {
                    while (queue.size() >= DEPTH && !stopping) queue.wait();
                    if (stopping) return;
                    number = ++pollsStarted;  // this poll accepts the batch of the poll before
                }
                Fetched fetched = poll.poll(number);
                if (fetched == null) continue;
                synchronized (queue) {
                    queue.addLast(fetched);
                    queue.notifyAll();
                }
            }
        } catch (Throwable e) {  // Python's next poll throws it
            if (e instanceof InterruptedException) Thread.currentThread().interrupt();
            synchronized (queue) {
                failure = e instanceof RuntimeException r ? r : new IllegalStateException("fetching ahead: " + e, e);
                queue.notifyAll();
            }
        }
    }

    /** Stops the thread once its poll under way has ended; what it fetched stays to be taken. */
    void stop() {
        synchronized (queue) {
            stopping = true;
            queue.notifyAll();
        }
        boolean interrupted = false;
        while (thread.isAlive()) {
            try {
                thread.join();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) Thread.currentThread().interrupt();
    }

    /** The oldest batch fetched, waiting up to `timeoutMs` for one while the thread runs; null if none
     *  came. Once none is left, throws what the thread's poll threw (the thread has ended then). */
    Fetched take(long timeoutMs) {
        synchronized (queue) {
            long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
            long left;
            while (queue.isEmpty() && failure == null && running() && (left = deadline - System.nanoTime()) > 0) {
                try {
                    queue.wait(Math.max(1, left / 1_000_000L));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            if (queue.isEmpty() && failure != null) {
                RuntimeException thrown = failure;
                failure = null;
                throw thrown;
            }
            Fetched taken = queue.pollFirst();
            if (taken != null) queue.notifyAll();
            return taken;
        }
    }

    /** Whether the thread polls, or will: not stopped, not ended by a failure. */
    boolean running() {
        synchronized (queue) {
            return !stopping && thread.isAlive() && failure == null;
        }
    }

    /** Batches fetched and not taken. */
    int waiting() {
        synchronized (queue) {
            return queue.size();
        }
    }

    /** Whether a poll started after poll `number` (0: before the thread's first), which accepted its batch. */
    boolean accepted(long number) {
        synchronized (queue) {
            return pollsStarted > number;
        }
    }
}
