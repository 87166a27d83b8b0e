package io.membus.core.metrics;

import io.membus.core.transport.VerbObserver;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What the observer is told is what the snapshot, the status facts and the Micrometer meters say. */
class VerbMetricsTest {

    @Test
    void countsPerPeerAndKindWithLatencyPercentilesInSnapshotsFactsAndMeters() throws Exception {
        VerbMetrics m = new VerbMetrics("tcp");
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        m.bindTo(registry); // before any peer: peers seen later register then
        m.inFlight(peer -> peer == 2 ? 3 : 0);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            Future<?>[] done = new Future<?>[4];
            for (int t = 0; t < 4; t++) {
                done[t] = pool.submit(() -> {
                    for (int i = 1; i <= 1000; i++) {
                        m.completed(2, VerbObserver.READ, 64, i * 1_000L); // 1..1000 µs
                        m.completed(2, VerbObserver.FAA, 8, 5_000L);
                    }
                });
            }
            for (Future<?> f : done) {
                f.get(30, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        m.timedOut(2, VerbObserver.CAS);
        m.failed(2, VerbObserver.WRITE);
        m.reconnected(2);
        m.completed(70_000, VerbObserver.WRITE, 100, 1_000L); // a node id beyond the direct table

        VerbMetrics.Snapshot two = m.snapshot(2);
        assertEquals(4000, two.verbs()[VerbObserver.READ]);
        assertEquals(4000, two.verbs()[VerbObserver.FAA]);
        assertEquals(8000, two.totalVerbs());
        assertEquals(4000 * 64, two.bytes()[VerbObserver.READ]);
        assertEquals(1, two.timeouts());
        assertEquals(1, two.errors());
        assertEquals(1, two.reconnects());
        assertEquals(3, two.inFlight());
        // half the verbs took 5 µs, the other half 1..1000 µs: the median is 5 µs, the 99th about 980 µs
        assertTrue(Math.abs(two.p50Nanos() - 5_000) <= 10, "p50=" + two.p50Nanos());
        assertTrue(Math.abs(two.p99Nanos() - 980_000) <= 2_000, "p99=" + two.p99Nanos());
        assertTrue(Math.abs(two.maxNanos() - 1_000_000) <= 1_000, "max=" + two.maxNanos());
        assertNull(m.snapshot(3), "a peer never seen has no row");
        assertEquals(1, m.snapshot(70_000).verbs()[VerbObserver.WRITE]);

        Map<String, String> facts = m.facts();
        assertEquals("tcp", facts.get("transport"));
        assertTrue(facts.get("node-2").startsWith("verbs=8000 (read 4000 write 0 cas 0 faa 4000) bytes=288000"
                + " timeouts=1 errors=1 reconnects=1 in-flight=3 latency p50=5.0us p99=9"), facts.toString());
        assertTrue(facts.containsKey("node-70000"), facts.toString());

        assertEquals(4000, registry.get("membus.verbs").tags("peer", "2", "kind", "read", "transport", "tcp")
                .functionCounter().count());
        assertEquals(1, registry.get("membus.verb.timeouts").tags("peer", "2").functionCounter().count());
        assertEquals(3, registry.get("membus.verbs.in.flight").tags("peer", "2").gauge().value());
        assertEquals(5e-6, registry.get("membus.verb.latency").tags("peer", "2", "quantile", "0.5").gauge().value(),
                1e-8);
        assertEquals(1, registry.get("membus.verbs").tags("peer", "70000", "kind", "write").functionCounter().count());
    }
}
