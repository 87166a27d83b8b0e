package io.membus.test.history;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Records a concurrent history as clients run: {@link #invoke} before an operation
 * starts, then exactly one of {@link Call#ok}, {@link Call#fail} or {@link Call#info}
 * when it ends. Times are {@link System#nanoTime()} since the recorder was made, so
 * the real-time order the checker relies on is the order the calls were made in.
 *
 * <pre>{@code
 * HistoryRecorder rec = new HistoryRecorder();
 * Call c = rec.invoke(clientId, "counter-1", "incrementAndGet", 1L);
 * try {
 *     c.ok(counter.incrementAndGet());
 * } catch (DsmTimeoutException e) {
 *     c.info(e);                 // may have taken effect
 * } catch (NodeUnavailableException e) {
 *     c.info(e);                 // or c.fail(e) when the operation surely did not run
 * }
 * History h = rec.history();
 * }</pre>
 *
 * <p><b>Note:</b> thread-safe and cheap (one queue insertion per completed call); a
 * {@link Call} belongs to the thread that invoked it. Calls still open when
 * {@link #history()} is taken are recorded as {@link Outcome#INFO}.
 */
public final class HistoryRecorder {
    private final long origin = System.nanoTime();
    private final AtomicInteger ids = new AtomicInteger();
    private final ConcurrentLinkedQueue<Operation> done = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<Call> open = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<FaultWindow> faults = new ConcurrentLinkedQueue<>();

    /** Nanoseconds since this recorder was made. */
    public long now() {
        return System.nanoTime() - origin;
    }

    /** Starts recording an operation; complete it with one of the {@link Call} methods. */
    public Call invoke(int process, String key, String f, Object input) {
        Call c = new Call(ids.getAndIncrement(), process, key, f, input, now());
        open.add(c);
        return c;
    }

    /** Records a fault window (the nemesis calls this). */
    public void fault(FaultWindow window) {
        faults.add(window);
    }

    /** The history so far; operations still open count as indeterminate. */
    public History history() {
        List<Operation> ops = new ArrayList<>(done);
        long end = now();
        for (Call c : open) {
            if (!c.completed) {
                ops.add(new Operation(c.id, c.process, c.key, c.f, c.input, null, Outcome.INFO, c.invoked,
                        Math.max(end, c.invoked)));
            }
        }
        return new History(ops, new ArrayList<>(faults));
    }

    /**
     * One invoked operation.
     *
     * <p><b>Note:</b> completed once, by the invoking thread; a second completion is
     * refused with {@link IllegalStateException}.
     */
    public final class Call {
        private final int id;
        private final int process;
        private final String key;
        private final String f;
        private final Object input;
        private final long invoked;
        private volatile boolean completed;

        private Call(int id, int process, String key, String f, Object input, long invoked) {
            this.id = id;
            this.process = process;
            this.key = key;
            this.f = f;
            this.input = input;
            this.invoked = invoked;
        }

        /** It took effect and returned {@code output}. */
        public void ok(Object output) {
            complete(Outcome.OK, output);
        }

        /** It certainly did not take effect. */
        public void fail(Throwable why) {
            complete(Outcome.FAIL, String.valueOf(why));
        }

        /** It may or may not have taken effect. */
        public void info(Throwable why) {
            complete(Outcome.INFO, String.valueOf(why));
        }

        private void complete(Outcome outcome, Object output) {
            if (completed) {
                throw new IllegalStateException("operation " + id + " (" + f + " on " + key + ") completed twice");
            }
            completed = true;
            done.add(new Operation(id, process, key, f, input, outcome == Outcome.OK ? output : null, outcome, invoked,
                    now()));
            open.remove(this);
        }
    }
}
