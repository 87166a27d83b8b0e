package io.membus.collections;

import io.membus.core.error.DsmException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A map's put and a lock's timed acquire are several verbs; under a partition from the
 * node that holds their words they must end by one deadline taken at their start (the
 * operation timeout, or the caller's timeout) plus a margin, not by the sum of their
 * verbs' timeouts, and a failure must say truly whether the change may have been made.
 */
class CollectionDeadlineTest {
    /** Generous on a loaded 2-core machine: a correctness bound, not a speed claim. */
    private static final long MARGIN_MS = 1000;
    private static final Duration TIMEOUT = Duration.ofMillis(1000);

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aMapPutUnderAPartitionEndsByItsDeadlineAndSaysWhetherItRan() {
        try (CollCluster c = new CollCluster("local", 2, TIMEOUT)) {
            DsmMap<String, Long> created = c.node(2).map("m", String.class, Long.class);
            DsmMap<String, Long> m = c.node(1).map("m", String.class, Long.class);
            for (int i = 0; i < 16; i++) {
                created.put("k" + i, 0L);
            }
            c.partition(1, 2);
            List<String> notRun = new ArrayList<>();
            int failed = 0;
            long worst = 0;
            for (int i = 0; i < 16; i++) {
                long start = System.nanoTime();
                try {
                    m.put("k" + i, 1L);
                } catch (DsmException e) {
                    failed++;
                    if (!e.mayHaveRun()) {
                        notRun.add("k" + i);
                    }
                }
                long took = (System.nanoTime() - start) / 1_000_000;
                worst = Math.max(worst, took);
                assertTrue(took <= TIMEOUT.toMillis() + MARGIN_MS, "put k" + i + " outlived its deadline: " + took
                        + " ms");
            }
            System.out.printf("MEASURE DsmMap.put under a partition: %d of 16 failed (%d not run), longest %d ms"
                    + " (deadline %d ms)%n", failed, notRun.size(), worst, TIMEOUT.toMillis());
            assertTrue(failed > 0, "the partition cut the puts off from node 2's words");
            c.heal(1, 2);
            for (String k : notRun) {
                assertEquals(0L, created.get(k), k + " failed as not run, but it ran");
            }
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aTimedTryLockUnderAPartitionEndsByItsTimeout() throws Exception {
        try (CollCluster c = new CollCluster("local", 2, Duration.ofSeconds(5))) {
            DsmLock held = c.node(2).lock("l"); // created by node 2: its word is on node 2
            DsmLock waiter = c.node(1).lock("l");
            held.lock();
            c.partition(1, 2);
            long start = System.nanoTime();
            boolean got;
            try {
                got = waiter.tryLock(300, TimeUnit.MILLISECONDS);
            } catch (DsmException e) {
                got = false;
                assertFalse(e.mayHaveRun(), "only reads were cut off: " + e);
            }
            long took = (System.nanoTime() - start) / 1_000_000;
            System.out.printf("MEASURE DsmLock.tryLock(300 ms) under a partition: %s after %d ms%n", got, took);
            assertFalse(got);
            assertTrue(took <= 300 + MARGIN_MS, "tryLock(300 ms) took " + took + " ms (operation timeout 5 s)");
            c.heal(1, 2);
            held.unlock();
            assertTrue(waiter.tryLock(5, TimeUnit.SECONDS));
            waiter.unlock();
        }
    }
}
