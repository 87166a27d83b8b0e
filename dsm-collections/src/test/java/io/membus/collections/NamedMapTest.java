package io.membus.collections;

import io.membus.codec.Codecs;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Maps reached by name through {@link DsmCollections}: one map cluster-wide, types checked. */
class NamedMapTest {
    private CollCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    void creatingOneNameConcurrentlyFromEveryNodeYieldsOneMap() throws Exception {
        cluster = new CollCluster("local", 3);
        ExecutorService exec = Executors.newFixedThreadPool(3);
        try {
            List<Future<DsmMap<String, Long>>> futures = new ArrayList<>();
            for (int node = 1; node <= 3; node++) {
                DsmCollections c = cluster.node(node);
                futures.add(exec.submit(() -> c.map("orders", String.class, Long.class)));
            }
            List<DsmMap<String, Long>> maps = new ArrayList<>();
            for (Future<DsmMap<String, Long>> f : futures) {
                maps.add(f.get(60, TimeUnit.SECONDS));
            }
            for (DsmMap<String, Long> m : maps) {
                assertEquals(maps.get(0).rootPtr(), m.rootPtr(), "every node has the same map");
            }
            for (int i = 0; i < 3; i++) {
                assertNull(maps.get(i).putIfAbsent("order-" + i, (long) i));
            }
            assertEquals(3, maps.get(2).size());
            assertEquals(1L, maps.get(0).get("order-1"));
            assertSame(maps.get(1), cluster.node(2).map("orders", String.class, Long.class));
        } finally {
            exec.shutdownNow();
            assertTrue(exec.awaitTermination(10, TimeUnit.SECONDS));
        }
    }

    @Test
    void anotherTypeUnderTheNameIsATypedErrorNamingBoth() {
        cluster = new CollCluster("local", 2);
        cluster.node(1).map("orders", String.class, Long.class).put("a", 1L);
        CollectionTypeMismatchException e = assertThrows(CollectionTypeMismatchException.class,
                () -> cluster.node(2).map("orders", String.class, String.class));
        assertTrue(e.getMessage().contains("value=long") && e.getMessage().contains("value=utf8"), e.getMessage());
        assertThrows(CollectionTypeMismatchException.class, () -> cluster.node(1).map("orders", Codecs.longs(),
                Codecs.longs()));
        cluster.node(1).atomicLong("hits");
        assertThrows(CollectionTypeMismatchException.class, () -> cluster.node(2).map("hits", String.class, Long.class));
        assertEquals(1L, cluster.node(2).map("orders", String.class, Long.class).get("a"));
    }
}
