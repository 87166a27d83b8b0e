package io.membus.core.transport;

import io.membus.core.error.DsmTimeoutException;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * One daemon timer thread ("membus-timer") shared by the transports of a JVM, for
 * message deadlines, connect deadlines and housekeeping. Verbs do not use it: their
 * deadlines and injected delays are on the pipelines' {@link
 * io.membus.core.transport.pipeline.TimerWheel} (one entry per connection, none per
 * verb). Tasks run on that thread and must not block.
 * Tasks scheduled for the same instant run in the order they were scheduled.
 *
 * <p><b>Note:</b> thread-safe.
 */
public final class Deadlines {
    private static final ScheduledThreadPoolExecutor TIMER = new ScheduledThreadPoolExecutor(1,
            TransportThreads.marking(r -> {
                Thread t = new Thread(r, "membus-timer");
                t.setDaemon(true);
                return t;
            }));

    static {
        TIMER.setRemoveOnCancelPolicy(true);
    }

    private Deadlines() {
    }

    /**
     * Fails {@code future} with a {@link DsmTimeoutException} if it has not completed
     * within {@code timeout}; the timer is cancelled when it completes first.
     *
     * @return {@code future}
     */
    public static <T> CompletableFuture<T> within(CompletableFuture<T> future, Duration timeout, String operation,
                                                  int nodeId) {
        if (future.isDone()) {
            return future;
        }
        ScheduledFuture<?> timer = TIMER.schedule(
                () -> future.completeExceptionally(new DsmTimeoutException(operation, nodeId, timeout)),
                timeout.toNanos(), TimeUnit.NANOSECONDS);
        future.whenComplete((v, e) -> timer.cancel(false));
        return future;
    }

    /** Runs {@code task} on the timer thread every {@code periodNanos}, until the returned future is cancelled. */
    public static ScheduledFuture<?> every(Runnable task, long periodNanos) {
        return TIMER.scheduleAtFixedRate(task, periodNanos, periodNanos, TimeUnit.NANOSECONDS);
    }

    /** Runs {@code task} on the timer thread after {@code delayNanos}. */
    public static ScheduledFuture<?> schedule(Runnable task, long delayNanos) {
        return TIMER.schedule(task, Math.max(0, delayNanos), TimeUnit.NANOSECONDS);
    }
}
