package io.membus.collections;

import io.membus.codec.Codecs;
import io.membus.coherence.CoherenceConfig;
import io.membus.coherence.CoherentHeap;
import io.membus.core.message.Messaging;
import io.membus.core.time.Clock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A map with leased reads: repeated gets are served from the node's cache, and a
 * change on another node is seen by the very next get (the change invalidated the
 * cache before it happened), for present and absent keys alike.
 */
class DsmMapLeasedReadsTest {
    private MapCluster cluster;
    private final List<CoherentHeap> heaps = new ArrayList<>();

    @AfterEach
    void close() {
        heaps.forEach(CoherentHeap::close);
        if (cluster != null) {
            cluster.close();
        }
    }

    private DsmMapOptions options(int node) {
        CoherentHeap heap = new CoherentHeap(cluster.node(node), new Messaging(cluster.node(node).memory()),
                Clock.system(), CoherenceConfig.defaults().withLeases(Duration.ofSeconds(1), Duration.ofSeconds(5))
                .withSkewCheck(false, Duration.ofSeconds(5)));
        heaps.add(heap);
        return DsmMapOptions.defaults().leasedReads(true).coherentHeap(heap);
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void cachedGetsAreServedLocallyAndNeverStale(String transport) {
        cluster = new MapCluster(transport, 3, 16 << 20, Duration.ofSeconds(5));
        DsmMap<String, Long> a = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.longs(), options(1));
        DsmMap<String, Long> reader = DsmMap.open(cluster.node(2), a.rootPtr(), Codecs.strings(), Codecs.longs(),
                options(2));
        DsmMap<String, Long> writer = DsmMap.open(cluster.node(3), a.rootPtr(), Codecs.strings(), Codecs.longs(),
                options(3));
        assertNull(reader.get("k"));
        for (long i = 0; i < 50; i++) {
            writer.put("k", i);
            assertEquals(i, reader.get("k"), "the get right after the put sees it");
            long before = reader.readCacheHits();
            for (int r = 0; r < 10; r++) {
                assertEquals(i, reader.get("k"));
            }
            assertTrue(reader.readCacheHits() >= before + 9, "repeated gets are served from the cache");
        }
        writer.remove("k");
        assertNull(reader.get("k"), "a removal is seen at once");
        assertNull(reader.get("k"));
        writer.putIfAbsent("k", 7L);
        assertEquals(7L, reader.get("k"), "an absent key cached as absent is seen once it is added");
        reader.put("k", 8L);
        assertEquals(8L, writer.get("k"));
        assertEquals(8L, reader.get("k"), "the writer's own cache forgets what it changed");
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void aSmallLeasedCacheEvictsButNeverServesAnotherKeysValueNorAStaleOne(String transport) {
        long seed = System.nanoTime();
        System.out.println("DsmMapLeasedReadsTest.aSmallLeasedCache... seed=" + seed);
        java.util.SplittableRandom rnd = new java.util.SplittableRandom(seed);
        cluster = new MapCluster(transport, 2, 16 << 20, Duration.ofSeconds(5));
        DsmMap<Long, Long> a = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(), options(1));
        // 16 keys kept at most, 200 in use: every get evicts, the table is rebuilt over and over
        DsmMap<Long, Long> reader = DsmMap.open(cluster.node(2), a.rootPtr(), Codecs.longs(), Codecs.longs(),
                options(2).readCacheEntries(16));
        long[] model = new long[200];
        for (int k = 0; k < model.length; k++) {
            model[k] = rnd.nextLong();
            a.put((long) k, model[k]);
        }
        for (int i = 0; i < 5_000; i++) {
            int k = rnd.nextInt(model.length);
            if (rnd.nextInt(20) == 0) {
                model[k] = rnd.nextLong();
                a.put((long) k, model[k]);
            }
            assertEquals(model[k], reader.get((long) k), "seed=" + seed + ": key " + k);
        }
        // a hot key is a hit every time, and counted exactly
        reader.get(3L);
        long before = reader.readCacheHits();
        for (int r = 0; r < 100; r++) {
            assertEquals(model[3], reader.get(3L));
        }
        assertEquals(before + 100, reader.readCacheHits(), "seed=" + seed + ": each repeated get is one hit");
        assertNull(reader.get(1_000L));
        assertNull(reader.get(1_000), "an Integer is not a Long key, cached or not");
    }

    @ParameterizedTest
    @ValueSource(strings = {"local"})
    void aHandleWithoutACoherentHeapIsRefusedNamingTheFix(String transport) {
        cluster = new MapCluster(transport, 2, 16 << 20, Duration.ofSeconds(5));
        DsmMap<String, Long> a = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.longs(), options(1));
        DsmMapException e = assertThrows(DsmMapException.class,
                () -> DsmMap.open(cluster.node(2), a.rootPtr(), Codecs.strings(), Codecs.longs()));
        assertTrue(e.getMessage().contains("DsmMapOptions.coherentHeap"), e.getMessage());
        assertThrows(io.membus.core.error.DsmConfigException.class, () -> DsmMap.create(cluster.node(1),
                Codecs.strings(), Codecs.longs(), DsmMapOptions.defaults().leasedReads(true)));
    }
}
