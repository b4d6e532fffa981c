// A share consumer's polls made ahead of Python, on a thread of their own (see
// DimsterShareConsumer.fetchAhead): one batch at most waits for Python, with the broker's answers the
// poll that brought it took in, and the thread polls again once Python has taken it. Each poll accepts
// (implicit mode) the batch the poll before it brought, so a batch is accepted only once Python has it,
// and the batch a stopped thread leaves is not accepted. (Two batches ahead drained no faster:
// docs/benchmarks.md.)
final class DimsterFetchAhead {
    /** One poll's batch (maybe empty) and the answers that came in during that poll. */
    static final class Fetched {
        final DimsterConsumer.Batch batch;
        final long[] answers;
        final long polledAt = System.nanoTime();
        final long poll;  // which poll of the thread brought it (1, 2, ...)

        Fetched(DimsterConsumer.Batch batch, long[] answers, long poll) {
            this.batch = batch;
            this.answers = answers;
            this.poll = poll;
        }
    }

    /** One poll of the consumer, on the fetching thread: null when it brought neither records nor answers. */
    interface Poll {
        Fetched poll(long number);
    }

    private final Poll poll;
    private final Thread thread;
    private final Object lock = new Object();  // guards the fields below
    private Fetched ready;  // fetched, not taken yet
    private boolean stopping;
    private long pollsStarted;
    private RuntimeException failure;

    DimsterFetchAhead(Poll poll) {
        this.poll = poll;
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
                synchronized (lock) {
                    while (ready != null && !stopping) lock.wait();
                    if (stopping) return;
                    number = ++pollsStarted;  // this poll accepts the batch Python took last
                }
                Fetched fetched = poll.poll(number);
                if (fetched == null) continue;
                synchronized (lock) {
                    ready = fetched;
                    lock.notifyAll();
                }
            }
        } catch (Throwable e) {  // Python's next poll throws it
            if (e instanceof InterruptedException) Thread.currentThread().interrupt();
            synchronized (lock) {
                failure = e instanceof RuntimeException r ? r : new IllegalStateException("fetching ahead: " + e, e);
                lock.notifyAll();
            }
        }
    }

    /** Stops the thread once its poll under way has ended; what it fetched stays to be taken. */
    void stop() {
        synchronized (lock) {
            stopping = true;
            lock.notifyAll();
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

    /** The batch fetched, waiting up to `timeoutMs` for one while the thread runs; null if none came.
     *  With none, throws what the thread's poll threw (the thread has ended then), once. */
    Fetched take(long timeoutMs) {
        synchronized (lock) {
            long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
            long left;
            while (ready == null && running() && (left = deadline - System.nanoTime()) > 0) {
                try {
                    lock.wait(Math.max(1, left / 1_000_000L));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            Fetched taken = ready;
            if (taken == null && failure != null) {
                RuntimeException thrown = failure;
                failure = null;
                throw thrown;
            }
            ready = null;
            lock.notifyAll();
            return taken;
        }
    }

    /** Whether the thread polls, or will: not stopped, not ended by a failure. */
    boolean running() {
        synchronized (lock) {
            return !stopping && thread.isAlive() && failure == null;
        }
    }

    /** Whether a batch waits to be taken. */
    boolean holds() {
        synchronized (lock) {
            return ready != null;
        }
    }

    /** Whether a poll started after poll `number` (0: before the thread's first), which accepted its batch. */
    boolean accepted(long number) {
        synchronized (lock) {
            return pollsStarted > number;
        }
    }
}
