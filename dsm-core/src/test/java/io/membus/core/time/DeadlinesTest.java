package io.membus.core.time;

import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmTimeoutException;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link Deadlines} timed by the shared wheel: a deadline fails a future that did not
 * complete and leaves one that did; delayed and periodic tasks run on the worker thread
 * (never on the wheel's), a cancelled one never again. Waits are bounded (20 s) and nothing
 * asserts how long anything took.
 */
class DeadlinesTest {
    private static final long WAIT_SECONDS = 20;

    @Test
    void aDeadlineFailsAFutureThatDidNotCompleteAndSparesOneThatDid() throws Exception {
        CompletableFuture<String> late = Deadlines.within(new CompletableFuture<>(), Duration.ofMillis(5), "probe", 7);
        ExecutionException e = assertThrows(ExecutionException.class, () -> late.get(WAIT_SECONDS, TimeUnit.SECONDS));
        DsmTimeoutException t = assertInstanceOf(DsmTimeoutException.class, e.getCause());
        assertTrue(t.getMessage().contains("probe"), t.getMessage());

        CompletableFuture<String> onTime = Deadlines.within(new CompletableFuture<>(), Duration.ofMillis(5), "probe", 7);
        onTime.complete("done");
        CountDownLatch after = new CountDownLatch(1);
        Deadlines.schedule(after::countDown, TimeUnit.MILLISECONDS.toNanos(20)); // due after the deadline was
        assertTrue(after.await(WAIT_SECONDS, TimeUnit.SECONDS));
        assertEquals("done", onTime.join(), "a completed future is left as it is");
    }

    @Test
    void tasksRunOnTheWorkerAndACancelledPeriodicTaskStops() throws Exception {
        AtomicReference<String> ranOn = new AtomicReference<>();
        ScheduledFuture<?> once = Deadlines.schedule(() -> ranOn.set(Thread.currentThread().getName()), 0);
        once.get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertEquals("membus-timer", ranOn.get(), "the wheel hands the task on; it never runs it itself");
        assertTrue(once.isDone());

        AtomicInteger runs = new AtomicInteger();
        CountDownLatch three = new CountDownLatch(3);
        ScheduledFuture<?> every = Deadlines.every(() -> {
            runs.incrementAndGet();
            three.countDown();
        }, TimeUnit.MILLISECONDS.toNanos(2));
        assertTrue(three.await(WAIT_SECONDS, TimeUnit.SECONDS), "a periodic task runs again and again");
        assertTrue(every.cancel(false));
        assertTrue(every.isCancelled());
        // a run handed to the worker before the cancel may still finish: wait for the worker to pass it
        Deadlines.schedule(() -> { }, 0).get(WAIT_SECONDS, TimeUnit.SECONDS);
        int atCancel = runs.get();
        Deadlines.schedule(() -> { }, TimeUnit.MILLISECONDS.toNanos(30)).get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertEquals(atCancel, runs.get(), "cancelled: never run again");

        ScheduledFuture<?> never = Deadlines.schedule(runs::incrementAndGet, TimeUnit.SECONDS.toNanos(3600));
        assertTrue(never.getDelay(TimeUnit.SECONDS) > 0);
        assertTrue(never.cancel(false));
        assertFalse(never.cancel(false), "cancelled once");
    }

    @Test
    void aPeriodOfZeroIsRefusedWithItsTypedError() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> Deadlines.every(() -> { }, 0));
        assertTrue(e.getMessage().contains("period"), e.getMessage());
    }
}
