package io.membus;

import com.typesafe.config.ConfigFactory;
import io.membus.coherence.RemoteRef;
import io.membus.collections.DsmMap;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.membus.MembusTest.config;
import static io.membus.MembusTest.freePort;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The facade's meters: the coherent heap's caching switch and reads, invalidations, a map's
 * and a named coherent object's cache hits.
 */
class FacadeMetersTest {

    private static double value(MeterRegistry r, String name, String... tags) {
        var s = r.find(name).tags(tags);
        if (s.gauge() != null) {
            return s.gauge().value();
        }
        if (s.functionCounter() != null) {
            return s.functionCounter().count();
        }
        throw new AssertionError("no meter " + name + " " + List.of(tags) + " in "
                + r.getMeters().stream().map(m -> m.getId().toString()).toList());
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void cachingReadsInvalidationsAndMapHitsAreMetered() {
        int seed = freePort();
        String fabric = "facade-meters-" + System.nanoTime();
        // node 1 reads under leases of half a second or more: its five reads fall under one fill even on a loaded machine
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed, fabric)
                + "membus.coherence { min-lease = 500ms, max-lease = 1s }\n"));
             Membus two = Membus.start(ConfigFactory.parseString(config(2, freePort(), seed, fabric)
                     + "membus.coherence.caching = false\n"))) {
            one.awaitMembers(2, Duration.ofSeconds(30));
            two.awaitMembers(2, Duration.ofSeconds(30));
            // a registry of our own, as an application adds one: it gets every meter, now and later
            SimpleMeterRegistry r1 = new SimpleMeterRegistry();
            one.node().meterRegistry().add(r1);
            SimpleMeterRegistry r2 = new SimpleMeterRegistry();
            two.node().meterRegistry().add(r2);

            RemoteRef<String> a = two.create(io.membus.codec.Codecs.strings(), "v1", io.membus.alloc.Placement.node(2));
            RemoteRef<String> b = one.heap().open(a.ptr(), a.generationHeader(), io.membus.codec.Codecs.strings());
            assertEquals(1, value(r1, "membus.coherence.caching"));
            assertEquals(0, value(r2, "membus.coherence.caching"), "membus.coherence.caching = false on node 2");
            for (int i = 0; i < 5; i++) {
                assertEquals("v1", b.get());
            }
            double misses = value(r1, "membus.coherence.reads", "result", "miss");
            double hits = value(r1, "membus.coherence.reads", "result", "hit");
            assertEquals(5, hits + misses, "each cached read is a hit or a miss");
            assertTrue(misses >= 1 && hits >= 1, "the first read fills, the next are served from the copy: hits "
                    + hits + ", misses " + misses);
            double sentBefore = value(r2, "membus.channel.messages", "channel", "coherence-invalidate",
                    "direction", "out");
            double receivedBefore = value(r1, "membus.channel.messages", "channel", "coherence-invalidate",
                    "direction", "in");
            a.set("v2"); // node 2 writes: node 1, a sharer, is sent an invalidation
            assertEquals("v2", b.get());
            assertEquals(sentBefore + 1, value(r2, "membus.channel.messages", "channel", "coherence-invalidate",
                    "direction", "out"));
            assertEquals(receivedBefore + 1, value(r1, "membus.channel.messages", "channel", "coherence-invalidate",
                    "direction", "in"));
            assertEquals(misses + 1, value(r1, "membus.coherence.reads", "result", "miss"),
                    "the read after it fills again");
            double validated = value(r2, "membus.coherence.reads", "result", "validated");
            assertEquals("v2", a.get());
            assertEquals(validated + 1, value(r2, "membus.coherence.reads", "result", "validated"),
                    "node 2 does not cache: every read is validated");

            // a named coherent object: its own hits (node 1 caches; node 2 does not)
            RemoteRef<String> named = one.ref("settings", String.class, () -> "s1");
            double nodeHits = value(r1, "membus.coherence.reads", "result", "hit");
            for (int i = 0; i < 5; i++) {
                assertEquals("s1", named.get());
            }
            double namedHits = value(r1, "membus.ref.cache.hits", "name", "settings");
            assertTrue(namedHits >= 1 && namedHits <= 5, "hits of 'settings' " + namedHits);
            assertEquals(nodeHits + namedHits, value(r1, "membus.coherence.reads", "result", "hit"),
                    "the node's hits since are this object's");
            assertEquals(5, value(r1, "membus.collection.operations", "kind", "ref", "name", "settings",
                    "operation", "get"), "its gets: the hit rate's denominator");
            assertEquals("s1", two.ref("settings", io.membus.codec.Codecs.strings()).get());
            assertEquals(0, value(r2, "membus.ref.cache.hits", "name", "settings"), "node 2 does not cache");

            DsmMap<String, Long> m = one.map("orders", String.class, Long.class);
            m.put("k", 1L);
            for (int i = 0; i < 20; i++) {
                assertEquals(1L, one.map("orders", String.class, Long.class).get("k"));
            }
            assertTrue(m.readCacheHits() > 0, "hits " + m.readCacheHits());
            assertEquals(m.readCacheHits(), value(r1, "membus.map.cache.hits", "map", "orders"),
                    "the map's hits, its one handle counted once");
        }
    }
}
