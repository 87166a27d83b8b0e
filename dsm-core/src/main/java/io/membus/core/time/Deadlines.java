package io.membus.core.time;

import io.membus.core.error.DsmTimeoutException;
import io.membus.core.time.TimerWheel;
import io.membus.core.transport.TransportThreads;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Delayed;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * Deadlines and delayed or periodic tasks of the transports and the collections (message deadlines, connect
 * deadlines, housekeeping such as shm's registry refresh and the outbox's retry), timed by
 * the JVM's one timer, the shared {@link TimerWheel} (1 ms ticks: a deadline fires at the
 * first tick at or after it). Verbs do not use this class: their deadlines and injected
 * delays are the pipelines' own wheel entries (one per connection, none per verb).
 *
 * <p>The wheel's thread only times: what is due is handed to one worker thread
 * ("membus-timer", started on first use), which runs it. So a task may take a moment (a
 * file read, a queue pair's teardown, a future's callbacks) without delaying any verb's
 * deadline; it still must not wait for long, since the tasks of the JVM run one at a time,
 * in the order the wheel hands them on.
 *
 * <p><b>Note:</b> thread-safe: any thread may schedule or cancel. A task's effects before
 * it was scheduled happen-before it runs (the wheel's lock, then the worker's queue).
 */
public final class Deadlines {
    private static final ThreadPoolExecutor TASKS = new ThreadPoolExecutor(1, 1, 0, TimeUnit.NANOSECONDS,
            new LinkedBlockingQueue<>(), TransportThreads.marking(r -> {
                Thread t = new Thread(r, "membus-timer");
                t.setDaemon(true);
                return t;
            }));

    /** Delays beyond 100 years are taken as 100 years (so the arithmetic on the instant never wraps). */
    private static final long MAX_DELAY_NANOS = 100L * 365 * 24 * 3600 * 1_000_000_000L;

    private Deadlines() {
    }

    /**
     * Fails {@code future} with a {@link DsmTimeoutException} if it has not completed
     * within {@code timeout}; the wheel entry is cancelled when it completes first.
     *
     * @return {@code future}
     */
    public static <T> CompletableFuture<T> within(CompletableFuture<T> future, Duration timeout, String operation,
                                                  int nodeId) {
        if (future.isDone()) {
            return future;
        }
        WheelTask timer = new WheelTask(
                () -> future.completeExceptionally(new DsmTimeoutException(operation, nodeId, timeout)),
                timeout.toNanos(), 0);
        future.whenComplete((v, e) -> timer.cancel(false));
        return future;
    }

    /** Runs {@code task} on the timer's worker every {@code periodNanos}, until the returned future is cancelled. */
    public static ScheduledFuture<?> every(Runnable task, long periodNanos) {
        if (periodNanos <= 0) { // a configured interval (shm's refresh-interval) of 0 or less
            throw new io.membus.core.error.DsmConfigException("period of a periodic task", periodNanos + " ns",
                    "a duration above 0 (check the interval setting that configured it)");
        }
        return new WheelTask(task, periodNanos, periodNanos);
    }

    /** Runs {@code task} on the timer's worker after {@code delayNanos}. */
    public static ScheduledFuture<?> schedule(Runnable task, long delayNanos) {
        return new WheelTask(task, Math.max(0, delayNanos), 0);
    }

    /**
     * One scheduled task: a {@link TimerWheel} entry whose expiry hands the task to the
     * worker; a periodic one is armed again at fixed rate after each run. Cancelling
     * completes the future (as {@link CompletableFuture#cancel} does) and disarms the entry;
     * a task that throws completes it exceptionally and is not run again.
     *
     * <p><b>Note:</b> thread-safe: {@code at} is written by the arming thread before the
     * entry is armed and read after the wheel's lock; the run checks the future is not done.
     */
    private static final class WheelTask extends CompletableFuture<Void> implements ScheduledFuture<Void> {
        private final Runnable task;
        private final long periodNanos;
        private final Entry entry = new Entry();
        private volatile long at;

        WheelTask(Runnable task, long delayNanos, long periodNanos) {
            this.task = task;
            this.periodNanos = periodNanos;
            this.at = System.nanoTime() + Math.min(delayNanos, MAX_DELAY_NANOS); // a longer one never fires
            TimerWheel.SHARED.arm(entry, at);
        }

        private void run() {
            if (isDone()) {
                return;
            }
            try {
                task.run();
            } catch (Throwable e) {
                completeExceptionally(e);
                return;
            }
            if (periodNanos == 0) {
                complete(null);
                return;
            }
            at += periodNanos;
            if (!isDone()) {
                TimerWheel.SHARED.arm(entry, at); // fixed rate; a late run is followed at once by the next
            }
        }

        @Override
        public boolean cancel(boolean mayInterruptIfRunning) {
            // Future's contract, not CompletableFuture's: false when it had completed or was cancelled already
            boolean cancelled = !isDone() && super.cancel(mayInterruptIfRunning);
            TimerWheel.SHARED.cancel(entry);
            return cancelled;
        }

        @Override
        public long getDelay(TimeUnit unit) {
            return unit.convert(at - System.nanoTime(), TimeUnit.NANOSECONDS);
        }

        @Override
        public int compareTo(Delayed o) {
            return Long.compare(getDelay(TimeUnit.NANOSECONDS), o.getDelay(TimeUnit.NANOSECONDS));
        }

        /** The wheel's side: due now, hand the task to the worker (the wheel thread never runs it). */
        private final class Entry extends TimerWheel.Timeout {
            @Override
            protected void expired() {
                if (!isDone()) {
                    TASKS.execute(WheelTask.this::run);
                }
            }
        }
    }
}
