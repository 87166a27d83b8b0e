package io.membus.collections;

import io.membus.codec.Codecs;
import io.membus.core.OperationDeadline;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DsmMapTest {
    private MapCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    void everyNodeSeesTheSameMap() {
        cluster = new MapCluster("local", 3, 8 << 20);
        DsmMap<String, String> one = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.strings());
        DsmMap<String, String> two = DsmMap.open(cluster.node(2), one.rootPtr(), Codecs.strings(), Codecs.strings());
        DsmMap<String, String> three = DsmMap.open(cluster.node(3), one.rootPtr(), Codecs.strings(), Codecs.strings());
        assertNull(one.put("a", "1"));
        assertEquals("1", two.get("a"));
        assertEquals("1", three.put("a", "2"));
        assertEquals("2", one.get("a"));
        assertEquals("2", two.putIfAbsent("a", "3"));
        assertNull(two.putIfAbsent("b", "3"));
        assertEquals(2, three.size());
        assertTrue(one.remove("a", "2"));
        assertFalse(one.remove("a", "2"));
        assertNull(three.get("a"));
        assertEquals(1, two.size());
        assertNull(one.put("a", "again"));
        assertEquals("again", three.get("a"));
        assertEquals(Map.of("a", "again", "b", "3"), new HashMap<>(two));
    }

    @Test
    void entriesGoToTheWritersNodeByDefaultAndToTheKeysNodeWhenAsked() {
        cluster = new MapCluster("local", 3, 8 << 20);
        DsmMap<Long, String> one = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.strings(),
                DsmMapOptions.defaults().initialSlots(1024));
        DsmMap<Long, String> two = DsmMap.open(cluster.node(2), one.rootPtr(), Codecs.longs(), Codecs.strings());
        DsmMap<Long, String> byKey = DsmMap.open(cluster.node(3), one.rootPtr(), Codecs.longs(), Codecs.strings(),
                DsmMapOptions.defaults().entryPlacement(DsmMapOptions.EntryPlacement.KEY));
        assertEquals(DsmMapOptions.EntryPlacement.WRITER, DsmMapOptions.defaults().entryPlacement());
        java.util.Set<Integer> keyNodes = new java.util.TreeSet<>();
        for (long k = 0; k < 60; k++) {
            assertNull(two.put(k, "v" + k));
            assertEquals(2, one.entryNode(k), "key " + k + " written by node 2 lives on node 2");
            assertEquals("v" + k, byKey.put(k, "w" + k));
            keyNodes.add(one.entryNode(k));
            assertEquals("w" + k, one.get(k));
        }
        assertEquals(java.util.Set.of(1, 2, 3), keyNodes, "by key, node 3's entries spread over the members");
        assertThrows(io.membus.core.error.DsmConfigException.class, () -> DsmMapOptions.defaults().entryPlacement(null));
    }

    @Test
    void aChangeOfAKeyInTheReadCacheSkipsTheLookupAndNeverActsOnAStaleValue() throws InterruptedException {
        cluster = new MapCluster("local", 2, 8 << 20);
        DsmMap<String, String> one = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.strings(),
                DsmMapOptions.defaults().grace(Duration.ofSeconds(60)));
        DsmMap<String, String> two = DsmMap.open(cluster.node(2), one.rootPtr(), Codecs.strings(), Codecs.strings());
        one.put("k", "a");
        assertEquals("a", two.get("k")); // node 2's read cache now holds k's slot word
        long before = two.store().speculated();
        assertEquals("a", two.put("k", "b"));
        assertEquals(before + 1, two.store().speculated(), "changed on the cached word, no lookup");
        assertEquals("b", one.get("k"));
        assertEquals("b", two.put("k", "b2"), "again on the word its own change cached");
        assertEquals(before + 2, two.store().speculated());
        // node 1 changes the key: node 2's cached word is stale, its CAS fails and it looks the key up
        assertEquals("b2", one.put("k", "c"));
        assertEquals("c", two.put("k", "d"), "the value replaced is the current one, not the cached one");
        assertEquals(before + 2, two.store().speculated());
        one.put("k", "e");
        assertFalse(two.replace("k", "d", "f"), "the cached d is stale: k holds e");
        assertEquals("e", one.get("k"));
        assertTrue(two.replace("k", "e", "f"));
        one.remove("k");
        assertNull(two.put("k", "g"), "removed by node 1: nothing replaced");
        assertEquals(1, one.size(), "the size counted the removal and the new key");
        assertEquals("g", one.get("k"));
        long beforeRemove = two.store().speculated();
        assertEquals("g", two.remove("k"), "a removal on the word cached by node 2's own put");
        assertEquals(beforeRemove + 1, two.store().speculated());
        assertNull(one.get("k"));
        assertEquals(0, one.size());

        // a cached word older than half the grace is not changed blindly (its block may have been reused)
        DsmMap<String, String> quick = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.strings(),
                DsmMapOptions.defaults().grace(Duration.ofMillis(20)));
        DsmMap<String, String> quickTwo = DsmMap.open(cluster.node(2), quick.rootPtr(), Codecs.strings(),
                Codecs.strings());
        quick.put("x", "1");
        assertEquals("1", quickTwo.get("x"));
        Thread.sleep(15);
        long q = quickTwo.store().speculated();
        assertEquals("1", quickTwo.put("x", "2"));
        assertEquals(q, quickTwo.store().speculated(), "older than half the grace: looked up");
    }

    @Test
    void growsOnlineAndKeepsEveryKey() {
        cluster = new MapCluster("local", 3, 32 << 20);
        DsmMap<Long, Long> one = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().initialSlots(16).grace(Duration.ofMillis(200)));
        DsmMap<Long, Long> two = DsmMap.open(cluster.node(2), one.rootPtr(), Codecs.longs(), Codecs.longs());
        int n = 3000;
        java.util.Set<Integer> tableNodes = new java.util.TreeSet<>();
        for (long i = 0; i < n; i++) {
            (i % 2 == 0 ? one : two).put(i, i * 10);
            tableNodes.add(one.tableNode());
        }
        assertTrue(java.util.Set.of(1, 2, 3).containsAll(tableNodes), "tables are on the cluster's nodes: "
                + tableNodes);
        assertEquals(n, one.size());
        for (long i = 0; i < n; i++) {
            assertEquals(i * 10, two.get(i), "key " + i);
        }
        for (long i = 0; i < n; i += 3) {
            assertEquals(i * 10, one.remove(i));
        }
        Map<Long, Long> seen = new HashMap<>();
        for (Map.Entry<Long, Long> e : two.entrySet()) {
            assertNull(seen.put(e.getKey(), e.getValue()), "key returned twice: " + e.getKey());
        }
        assertEquals(n - (n + 2) / 3, seen.size());
        assertEquals(seen.size(), two.size());
    }

    @Test
    void openingWithOtherCodecsOrANonMapIsATypedError() {
        cluster = new MapCluster("local", 2, 4 << 20);
        DsmMap<String, String> m = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.strings());
        DsmMapException e = assertThrows(DsmMapException.class,
                () -> DsmMap.open(cluster.node(2), m.rootPtr(), Codecs.strings(), Codecs.longs()));
        assertEquals("codec-mismatch", e.reason());
        assertTrue(e.getMessage().contains("codec=value"), e.getMessage());
        io.membus.alloc.BlockRef other = cluster.node(1).allocate(600);
        cluster.node(1).write(other, 0, new byte[600]);
        DsmMapException notMap = assertThrows(DsmMapException.class,
                () -> DsmMap.open(cluster.node(2), other.ptr(), Codecs.strings(), Codecs.strings()));
        assertEquals("not-a-map", notMap.reason());
    }

    @Test
    void destroyFreesEveryBlock() {
        cluster = new MapCluster("local", 2, 8 << 20);
        long before = liveBlocks();
        DsmMap<Long, Long> m = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().initialSlots(16).grace(Duration.ofMillis(20)));
        for (long i = 0; i < 500; i++) {
            m.put(i, i);
        }
        for (long i = 0; i < 500; i += 2) {
            m.put(i, -i);
            m.remove(i + 1);
        }
        m.close();
        m.destroy();
        assertEquals(before, liveBlocks(), "blocks left allocated after destroy");
    }

    @Test
    void replacedAndRemovedEntriesAreFreedAfterTheGrace() {
        cluster = new MapCluster("local", 2, 8 << 20);
        long before = liveBlocks();
        DsmMap<Long, Long> m = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().initialSlots(64).grace(Duration.ofMillis(20)));
        DsmMap<Long, Long> other = DsmMap.open(cluster.node(2), m.rootPtr(), Codecs.longs(), Codecs.longs());
        for (int round = 0; round < 200; round++) {
            for (long k = 0; k < 10; k++) {
                (round % 2 == 0 ? m : other).put(k, round * 100 + k);
            }
        }
        other.remove(3L);
        m.put(3L, -3L); // replaces the tombstone's entry
        m.close();
        other.close();
        assertEquals(0, m.pendingReclamation() + other.pendingReclamation());
        // the root, one table and the ten live entries: every replaced entry went back to the heap
        assertEquals(before + 12, liveBlocks(), "blocks allocated after 2000 overwrites");
    }

    @Test
    void aMigrationWhoseClaimerDiedIsRepairedAndTheRootMovesOn() throws Exception {
        cluster = new MapCluster("local", 2, 16 << 20);
        DsmMap<Long, Long> m = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().initialSlots(16).grace(Duration.ofMillis(20)).readCacheEntries(0));
        for (long k = 0; k < 10; k++) {
            m.put(k, k);
        }
        // a node starts a resize, claims the first range and dies before migrating it
        MapStore store = storeOf(m);
        MapTable first = store.rootTable();
        store.startResize(first);
        store.mem.fetchAndAdd(first.ptr + MapLayout.TABLE_CURSOR, MapMigration.MIGRATE_RANGE);
        // the survivors keep working: every other range gets migrated, the claimed one stays as it was
        DsmMap<Long, Long> other = DsmMap.open(cluster.node(2), m.rootPtr(), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().readCacheEntries(0));
        MapStore otherStore = storeOf(other);
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
        long k = 100;
        while (otherStore.repairs() == 0) {
            assertTrue(System.nanoTime() < deadline, "no repair within 30 s");
            other.put(k, k);           // new keys meet frozen slots and help (and, when stalled, repair)
            assertEquals(5L, other.get(5L));
            k++;
        }
        for (long i = 0; i < 10; i++) {
            assertEquals(i, other.get(i), "key " + i + " after the repair");
        }
        for (long i = 100; i < k; i++) {
            assertEquals(i, m.get(i), "key " + i + " after the repair");
        }
        assertTrue(otherStore.rootTable().seq > first.seq || storeOf(m).advanceRootAndGet().seq > first.seq,
                "the root moved past the repaired table");
        assertEquals(10 + (k - 100), m.size());
    }

    /**
     * Helping a growth costs an operation one range at most, and none when less than half of
     * its deadline is left; the starter of a growth already that late migrates none either (it
     * used to migrate one range before it looked at its deadline, and helpers took one whatever
     * the time left: a put that helped on a loaded machine outlived its deadline). Deadlines here
     * are scopes set by the test, not times measured.
     */
    @Test
    void anOperationHelpsAGrowthWithOneRangeAndOnlyWhileHalfItsDeadlineIsLeft() {
        cluster = new MapCluster("local", 1, 8 << 20);
        DsmMap<Long, Long> m = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().initialSlots(256).readCacheEntries(0));
        for (long k = 0; k < 100; k++) {
            m.put(k, k);
        }
        MapStore store = storeOf(m);
        MapTable t = store.rootTable();
        store.startResize(t);
        long timeout = store.mem.operationTimeout().toNanos();
        long scope = OperationDeadline.enterNanos(timeout / 4); // an operation with a quarter of its deadline left
        try {
            assertFalse(store.migration.helpIfTimeLeft(t), "a late operation helps with no range");
            assertEquals(0, store.migration.migrateWhileTimeLeft(t), "a late starter migrates no range");
        } finally {
            OperationDeadline.exit(scope);
        }
        assertEquals(0, store.mem.readLong(t.ptr + MapLayout.TABLE_CURSOR), "ranges claimed");
        assertTrue(store.migration.helpIfTimeLeft(t), "no deadline: helps"); // no scope: all the time there is
        assertEquals(MapMigration.MIGRATE_RANGE, store.mem.readLong(t.ptr + MapLayout.TABLE_CURSOR), "slots claimed");
        assertEquals(MapMigration.MIGRATE_RANGE, store.mem.readLong(t.ptr + MapLayout.TABLE_DONE), "slots migrated");
        for (long k = 0; k < 100; k++) {
            assertEquals(k, m.get(k), "key " + k + " during the growth");
        }
        for (long k = 100; k < 200; k++) {
            m.put(k, k); // every operation from here helps: the growth finishes
        }
        for (long k = 0; k < 200; k++) {
            assertEquals(k, m.get(k), "key " + k);
        }
        assertEquals(200, m.size());
    }

    private static MapStore storeOf(DsmMap<?, ?> map) {
        return map.store();
    }

    private long liveBlocks() {
        for (io.membus.alloc.GlobalAllocator a : cluster.allocators.values()) {
            a.trim();
        }
        return cluster.node(1).usage().segments().stream().mapToLong(s -> s.blocksInUse() + s.largeObjects()).sum();
    }

    @Test
    void theReadCacheServesRepeatedGetsAndNeverAStaleValue() {
        cluster = new MapCluster("local", 3, 8 << 20);
        DsmMap<String, String> one = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.strings());
        DsmMap<String, String> two = DsmMap.open(cluster.node(2), one.rootPtr(), Codecs.strings(), Codecs.strings());
        DsmMap<String, String> uncached = DsmMap.open(cluster.node(3), one.rootPtr(), Codecs.strings(),
                Codecs.strings(), DsmMapOptions.defaults().readCacheEntries(0));
        one.put("k", "v1");
        assertEquals("v1", two.get("k"));
        long hits = two.readCacheHits();
        assertEquals("v1", two.get("k"));
        assertEquals(hits + 1, two.readCacheHits(), "the second get is a cache hit");
        uncached.put("k", "v2");                 // another node changes the key
        assertEquals("v2", two.get("k"), "a cached value is never returned once its slot word changed");
        uncached.remove("k");
        assertNull(two.get("k"));
        uncached.put("k", "v3");
        assertEquals("v3", two.get("k"));
        assertEquals("v3", uncached.get("k"));
        assertEquals(0, uncached.readCacheHits());
    }

    @Test
    void nullsAreRefusedAsConcurrentHashMapDoes() {
        cluster = new MapCluster("local", 1, 4 << 20);
        DsmMap<String, String> m = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.strings());
        assertThrows(NullPointerException.class, () -> m.put(null, "x"));
        assertThrows(NullPointerException.class, () -> m.put("x", null));
        assertThrows(NullPointerException.class, () -> m.get(null));
        assertThrows(NullPointerException.class, () -> m.putIfAbsent("x", null));
        assertThrows(NullPointerException.class, () -> m.containsValue(null));
        assertFalse(m.remove("x", null));
    }

    @Test
    void iteratorRemoveAndSetValueWriteThrough() {
        cluster = new MapCluster("local", 2, 4 << 20);
        DsmMap<String, Integer> m = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.ints());
        for (int i = 0; i < 20; i++) {
            m.put("k" + i, i);
        }
        Iterator<Map.Entry<String, Integer>> it = m.entrySet().iterator();
        while (it.hasNext()) {
            Map.Entry<String, Integer> e = it.next();
            if (e.getValue() % 2 == 0) {
                it.remove();
            } else {
                e.setValue(e.getValue() * 100);
            }
        }
        assertEquals(10, m.size());
        assertEquals(300, m.get("k3"));
        assertNull(m.get("k4"));
    }
}
