package io.membus.core.transport;

import io.membus.core.RemoteMemory;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.OutOfBoundsException;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The direct connections (local here; shm shares the class) report every verb's outcome to the
 * transport's observer, on the caller-thread path and on the pipeline path a fault rule takes,
 * and complete atomics with a primitive through {@link LongCompletion}.
 */
class VerbObserverTest {
    private static final Duration WAIT = Duration.ofSeconds(10);

    @Test
    void everyOutcomeIsReportedOnTheDirectAndTheHeldPath() throws Exception {
        String fabric = "observer-test-" + System.nanoTime();
        TransportConfig c1 = TransportConfig.builder(1).property("local.fabric", fabric)
                .operationTimeout(Duration.ofMillis(300)).build();
        try (Transport one = Transports.create("local", c1);
             Transport two = Transports.create("local", TransportConfig.builder(2).property("local.fabric", fabric)
                     .build())) {
            CountingObserver counting = new CountingObserver(2);
            ((AbstractTransport) one).observe(counting);
            two.export(SegmentSpec.of(0, 4096));
            long key = two.table().get(0).remoteKey();
            long ptr = two.table().get(0).pointer(0);
            Connection c = RemoteMemory.await(one.connect(two.self()), WAIT);

            // the caller-thread path
            RemoteMemory.await(c.write(ptr, key, new byte[16]), WAIT);
            assertEquals(16, RemoteMemory.await(c.read(ptr, key, 16), WAIT).length);
            assertEquals(0L, RemoteMemory.await(c.fetchAndAdd(ptr, key, 5), WAIT));
            assertEquals(5L, RemoteMemory.await(c.compareAndSwap(ptr, key, 5, 7), WAIT));
            assertInstanceOf(OutOfBoundsException.class, failure(c.read(ptr + 4090, key, 16)));
            assertEquals(4, counting.completed.get());
            assertEquals(1, counting.failed.get());
            assertEquals(16 + 16 + 8 + 8, counting.bytes.get());

            // the pipeline path: a delay holds the verb, a drop lets its deadline fire
            one.faults().delay(2, Duration.ofMillis(20));
            assertEquals(7L, RemoteMemory.await(c.fetchAndAdd(ptr, key, 1), WAIT));
            one.faults().drop(2);
            assertInstanceOf(DsmTimeoutException.class, failure(c.fetchAndAdd(ptr, key, 1)));
            one.faults().clear();
            assertEquals(5, counting.completed.get());
            assertEquals(1, counting.timedOut.get());
            assertEquals(3, counting.byKind[VerbObserver.FAA] + counting.byKind[VerbObserver.CAS]);

            // primitive completions, on both paths
            AtomicLong got = new AtomicLong();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(2);
            LongCompletion sink = (value, e) -> {
                got.set(value);
                failure.set(e);
                done.countDown();
            };
            // direct once the dropped verb's outcome is delivered (until then it queues behind it, in order)
            c.fetchAndAdd(ptr, key, 1, sink);
            long start = System.nanoTime();
            while (done.getCount() == 2 && System.nanoTime() - start < WAIT.toNanos()) {
                Thread.sleep(1);
            }
            assertEquals(8L, got.get());
            one.faults().delay(2, Duration.ofMillis(20));
            c.compareAndSwap(ptr, key, 9, 100, sink); // held, then run by the wheel thread
            assertTrue(done.await(WAIT.toMillis(), TimeUnit.MILLISECONDS));
            assertEquals(9L, got.get());
            assertNull(failure.get());
            one.faults().clear();
            assertEquals(100L, RemoteMemory.await(c.fetchAndAdd(ptr, key, 0), WAIT));
        }
    }

    private static Throwable failure(CompletableFuture<?> f) throws InterruptedException {
        try {
            f.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (java.util.concurrent.TimeoutException e) {
            throw new AssertionError("no outcome within " + WAIT);
        }
        throw new AssertionError("the verb succeeded");
    }
}
