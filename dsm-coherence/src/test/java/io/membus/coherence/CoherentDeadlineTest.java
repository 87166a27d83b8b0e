package io.membus.coherence;

import io.membus.alloc.Placement;
import io.membus.codec.Codecs;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A coherent object's compare-and-set is several verbs; under a partition from the
 * object's node it must still end by the heap's one operation deadline (plus a margin),
 * not by the sum of its verbs' timeouts (15.1 s for a 5 s timeout in the field), and
 * its failure must say truly that nothing ran.
 */
class CoherentDeadlineTest {
    /** Generous on a loaded 2-core machine: a correctness bound, not a speed claim. */
    private static final long MARGIN_MS = 1000;
    private CoherenceCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    void aCompareAndSetUnderAPartitionEndsByItsDeadlineAndDidNotRun() {
        // the verbs' own timeout (the transport's operation timeout) is 5 s; the heap's deadline 2 s
        cluster = new CoherenceCluster("local", 2, id -> CoherenceConfig.defaults().withTimeout(Duration.ofSeconds(2))
                .withLockTimeout(Duration.ofMillis(300)).withSkewCheck(false, Duration.ofSeconds(5)), true);
        RemoteRef<Long> ref = cluster.heap(1).create(Codecs.longs(), 7L, Placement.node(2));
        ref = ref.cached(false);
        assertEquals(7L, ref.get());
        cluster.transports.get(1).faults().drop(2);
        cluster.transports.get(2).faults().drop(1);
        RemoteRef<Long> r = ref;
        long start = System.nanoTime();
        DsmException e = assertThrows(DsmException.class, () -> r.compareAndSet(7L, 8L));
        long tookMs = (System.nanoTime() - start) / 1_000_000;
        System.out.printf("MEASURE RemoteRef.compareAndSet under a partition: %s after %d ms (deadline 2000 ms)%n",
                e.getClass().getSimpleName(), tookMs);
        assertTrue(e instanceof DsmTimeoutException, "" + e);
        assertTrue(tookMs <= 2000 + MARGIN_MS, "compareAndSet outlived its deadline: " + tookMs + " ms: " + e);
        assertFalse(e.mayHaveRun(), "every verb was dropped before it ran: " + e);
        cluster.transports.get(1).faults().heal(2);
        cluster.transports.get(2).faults().heal(1);
        assertEquals(7L, r.get(), "it did not run");
        assertTrue(r.compareAndSet(7L, 8L));
    }
}
