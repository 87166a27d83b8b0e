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
