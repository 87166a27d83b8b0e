package io.membus.collections;

import io.membus.codec.Codecs;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Entries beside their slots: an uncached get of a small entry is one round trip (two
 * reads issued together), counted through {@link RoundTripTransport}; a larger entry, or a
 * map without inline areas, takes two; small-entry gets racing puts, removes and resizes
 * never return a torn, foreign or stale value.
 */
class DsmMapInlineTest {
    private MapCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    /** Three nodes; node 2's verbs are counted. A long grace: no root re-read in the middle of a count. */
    private void countingCluster(String transport) {
        cluster = new MapCluster(transport, 3, 16 << 20, Duration.ofSeconds(10),
                (id, t) -> id == 2 ? new RoundTripTransport(t) : t);
    }

    private static DsmMapOptions counted(int inline) {
        return DsmMapOptions.defaults().initialSlots(1024).grace(Duration.ofSeconds(60)).readCacheEntries(0)
                .inlineEntryBytes(inline);
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "tcp"})
    void aSmallEntryIsReadInOneRoundTrip(String transport) {
        countingCluster(transport);
        DsmMap<Long, Long> one = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(), counted(48));
        DsmMap<Long, Long> two = DsmMap.open(cluster.node(2), one.rootPtr(), Codecs.longs(), Codecs.longs(), counted(48));
        for (long k = 0; k < 200; k++) {
            one.put(k, k * 7);
        }
        assertEquals(0L, two.get(0L)); // the root's table pointer is read once per half grace: not counted below
        RoundTripTransport.Counts c = RoundTripTransport.counts();
        for (long k = 0; k < 200; k++) {
            c.reset();
            assertEquals(k * 7, two.get(k));
            assertEquals(1, c.roundTrips, "key " + k + ": " + c);
            assertEquals(2, c.reads, "key " + k + ": " + c); // the window's slot words, then its inline areas
            assertEquals(2, c.verbs, "key " + k + ": " + c);
        }
        for (long k = 1000; k < 1050; k++) {
            c.reset();
            assertNull(two.get(k));
            assertEquals(1, c.roundTrips, "absent key " + k + ": " + c);
        }
        // a removed key: the tombstone's inline copy still names it
        one.remove(5L);
        c.reset();
        assertNull(two.get(5L));
        assertEquals(1, c.roundTrips, "removed key: " + c);
        assertTrue(two.store().inlineHits() >= 200, "inline hits " + two.store().inlineHits());
    }

    @Test
    void largeEntriesAndMapsWithoutInlineAreasTakeTwoRoundTrips() {
        countingCluster("local");
        DsmMap<Long, String> big = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.strings(), counted(48));
        DsmMap<Long, String> bigTwo = DsmMap.open(cluster.node(2), big.rootPtr(), Codecs.longs(), Codecs.strings(),
                counted(48));
        DsmMap<Long, Long> plain = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(), counted(0));
        DsmMap<Long, Long> plainTwo = DsmMap.open(cluster.node(2), plain.rootPtr(), Codecs.longs(), Codecs.longs(),
                counted(0));
        String large = "x".repeat(31); // 8 + 31 > 38 bytes: no inline copy
        String small = "x".repeat(30); // 8 + 30 = 38: fits
        for (long k = 0; k < 50; k++) {
            big.put(k, k % 2 == 0 ? large + k % 10 : small.substring(1) + k % 10);
            plain.put(k, k);
        }
        assertEquals(0L, plainTwo.get(0L));
        assertEquals(large + 0, bigTwo.get(0L));
        RoundTripTransport.Counts c = RoundTripTransport.counts();
        // a fingerprint twin of a key (8 bits of its hash) with no inline copy, before it in its window, costs the
        // lookup one more round trip (its entry is read to compare the key); where keys land depends on the table's
        // random seed, so such twins are counted, not ruled out
        MapStore plainStore = plainTwo.store();
        MapStore bigStore = bigTwo.store();
        for (long k = 0; k < 50; k++) {
            c.reset();
            long twins = plainStore.twinReads();
            assertEquals(k, plainTwo.get(k));
            assertEquals(2 + plainStore.twinReads() - twins, c.roundTrips, "plain map, key " + k + ": " + c);
            c.reset();
            twins = bigStore.twinReads();
            String v = bigTwo.get(k);
            assertEquals(k % 2 == 0 ? large + k % 10 : small.substring(1) + k % 10, v);
            assertEquals((k % 2 == 0 ? 2 : 1) + bigStore.twinReads() - twins, c.roundTrips,
                    "key " + k + " of " + v.length() + " value bytes: " + c);
        }
        // a small value replaced by a large one: the old inline copy is overwritten before the CAS
        big.put(1L, large + "!");
        c.reset();
        long twins = bigStore.twinReads();
        assertEquals(large + "!", bigTwo.get(1L));
        assertEquals(2 + bigStore.twinReads() - twins, c.roundTrips, c.toString());
        big.put(1L, "small again");
        c.reset();
        twins = bigStore.twinReads();
        assertEquals("small again", bigTwo.get(1L));
        assertEquals(1 + bigStore.twinReads() - twins, c.roundTrips, c.toString());
    }

    /**
     * A lookup over a connection reads the first {@value SlotScan#FIRST_READ_SLOTS} slots of
     * its window, and the rest only when neither the key nor an empty slot was among them.
     * Sixteen home slots and 31 keys (the table does not grow: every window of 32 keeps an
     * empty slot) pile keys far past their home: those take a second round trip,
     * the others one, and every get, put and remove finds its key wherever it sits.
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "tcp"})
    // a lookup that misses keys it should find inserts them again and grows the table without end: fail, not hang
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void keysPastTheFirstPartOfTheirWindowAreFoundWithASecondRead(String transport) {
        countingCluster(transport);
        DsmMapOptions options = DsmMapOptions.defaults().initialSlots(16).grace(Duration.ofSeconds(60))
                .readCacheEntries(0);
        DsmMap<Long, Long> one = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(), options);
        DsmMap<Long, Long> two = DsmMap.open(cluster.node(2), one.rootPtr(), Codecs.longs(), Codecs.longs(), options);
        int keys = 31; // fewer than a window: every window keeps an empty slot, so the table never grows
        for (long k = 0; k < keys; k++) {
            one.put(k, k * 3);
        }
        assertEquals(3L, two.get(1L)); // the root's table pointer is read once per half grace: not counted below
        RoundTripTransport.Counts c = RoundTripTransport.counts();
        int twoRoundTrips = 0;
        for (long k = 0; k < keys; k++) {
            c.reset();
            assertEquals(k * 3, two.get(k), "key " + k);
            assertTrue(c.roundTrips == 1 || c.roundTrips == 2, "key " + k + ": " + c);
            twoRoundTrips += c.roundTrips == 2 ? 1 : 0;
        }
        assertTrue(twoRoundTrips > 0, "some key sat past the first part of its window");
        assertTrue(twoRoundTrips < keys, "most keys sat in the first part: " + twoRoundTrips + " of " + keys);
        for (long k = 0; k < keys; k++) { // changes find the key's own slot too (no second copy of a key)
            assertEquals(k * 3, two.put(k, -k));
        }
        for (long k = 0; k < keys; k += 2) {
            assertEquals(-k, two.remove(k));
        }
        for (long k = 0; k < keys; k++) {
            assertEquals(k % 2 == 0 ? null : (Long) (-k), one.get(k), "key " + k);
        }
        assertEquals(keys / 2, two.size());
        assertEquals(16, 1 << one.store().rootTable().log2, "the table did not grow");
    }

    @Test
    void onAMemoryPathAGetReadsTheCandidatesOwnInlineArea() {
        cluster = new MapCluster("local", 2, 8 << 20);
        DsmMap<Long, Long> one = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(), counted(48));
        DsmMap<Long, Long> two = DsmMap.open(cluster.node(2), one.rootPtr(), Codecs.longs(), Codecs.longs(), counted(48));
        for (long k = 0; k < 100; k++) {
            one.put(k, k);
        }
        for (long k = 0; k < 100; k++) {
            assertEquals(k, two.get(k));
        }
        assertTrue(two.store().inlineHits() >= 100, "inline hits " + two.store().inlineHits());
        one.put(7L, 70L);
        assertEquals(70L, two.get(7L));
        one.remove(7L);
        assertNull(two.get(7L));
    }

    @Test
    void inlineAreaSizeIsCheckedAndKeptInTheRoot() {
        assertThrows(io.membus.core.error.DsmConfigException.class, () -> DsmMapOptions.defaults().inlineEntryBytes(12));
        assertThrows(io.membus.core.error.DsmConfigException.class, () -> DsmMapOptions.defaults().inlineEntryBytes(50));
        assertThrows(io.membus.core.error.DsmConfigException.class, () -> DsmMapOptions.defaults().inlineEntryBytes(256 + 2));
        assertThrows(io.membus.core.error.DsmConfigException.class,
                () -> DsmMapOptions.defaults().inlineEntryBytes(MapLayout.MAX_INLINE + 8));
        assertEquals(MapLayout.MAX_INLINE, DsmMapOptions.defaults().inlineEntryBytes(MapLayout.MAX_INLINE).inlineEntryBytes());
        cluster = new MapCluster("local", 2, 8 << 20);
        DsmMap<Long, Long> one = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().inlineEntryBytes(64));
        // the opener's own option does not matter: the root's size is used
        DsmMap<Long, Long> two = DsmMap.open(cluster.node(2), one.rootPtr(), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().inlineEntryBytes(0));
        assertEquals(64, two.store().inline);
        one.put(1L, 2L);
        assertEquals(2L, two.get(1L));
    }

    /**
     * Gets of small entries race puts (small and large values), removes and growth of the
     * table (a third writer inserts fresh keys into a table that starts at 16 slots). Each
     * watched key has one writer that writes increasing sequence numbers, each value says
     * its key and sequence number and carries a check of both; a reader must see only
     * well-formed values of the key it asked for, and never a sequence number lower than
     * one it saw before (a get is linearizable, so one thread's reads of one key never go
     * back in time).
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void getsRacingPutsRemovesAndResizesNeverSeeATornValue(String transport) throws Exception {
        long seed = System.nanoTime();
        System.out.println("DsmMapInlineTest race seed=" + seed + " transport=" + transport);
        // node 2 posts every verb through a connection (two reads: the window's words, then all its inline
        // areas), node 3 runs them on a memory path (the words, then a candidate's own area): readers on both
        cluster = new MapCluster(transport, 3, 32 << 20, Duration.ofSeconds(10),
                (id, t) -> id == 2 ? new RoundTripTransport(t) : t);
        DsmMapOptions options = DsmMapOptions.defaults().initialSlots(16).grace(Duration.ofMillis(200))
                .readCacheEntries(0);
        DsmMap<Long, String> one = DsmMap.create(cluster.node(1), Codecs.longs(), Codecs.strings(), options);
        List<DsmMap<Long, String>> handles = new ArrayList<>();
        handles.add(one);
        for (int n = 2; n <= 3; n++) {
            handles.add(DsmMap.open(cluster.node(n), one.rootPtr(), Codecs.longs(), Codecs.strings(), options));
        }
        int watched = 8;
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
        AtomicLong reads = new AtomicLong();
        AtomicLong presentReads = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        // one writer per watched key (keys 0..7), on nodes 1 and 2
        for (int w = 0; w < watched; w++) {
            long key = w;
            DsmMap<Long, String> m = handles.get(w % 2);
            SplittableRandom rnd = new SplittableRandom(seed + w);
            threads.add(new Thread(() -> {
                long seq = 0;
                while (!stop.get()) {
                    seq++;
                    int op = rnd.nextInt(10);
                    if (op == 0) {
                        m.remove(key);
                    } else {
                        m.put(key, value(key, seq, op == 1));
                    }
                }
            }, "writer-" + w));
        }
        // growth: fresh keys, so the table is migrated again and again under the readers
        threads.add(new Thread(() -> {
            long k = 1_000;
            while (!stop.get() && k < 1_000 + 20_000) {
                handles.get(2).put(k, value(k, 1, false));
                k++;
            }
        }, "grower"));
        // readers on nodes 2 and 3
        for (int r = 0; r < 4; r++) {
            DsmMap<Long, String> m = handles.get(1 + r % 2);
            SplittableRandom rnd = new SplittableRandom(seed + 100 + r);
            threads.add(new Thread(() -> {
                long[] last = new long[watched];
                while (!stop.get()) {
                    int key = rnd.nextInt(watched);
                    String v = m.get((long) key);
                    reads.incrementAndGet();
                    if (v == null) {
                        continue;
                    }
                    presentReads.incrementAndGet();
                    long seq = parse(key, v);
                    if (seq < 0) {
                        problems.add("key " + key + ": malformed or foreign value '" + v + "'");
                    } else if (seq < last[key]) {
                        problems.add("key " + key + ": sequence went back from " + last[key] + " to " + seq);
                    } else {
                        last[key] = seq;
                    }
                }
            }, "reader-" + r));
        }
        threads.forEach(Thread::start);
        Thread.sleep(3_000);
        stop.set(true);
        for (Thread t : threads) {
            t.join(60_000);
            assertTrue(!t.isAlive(), t.getName() + " did not stop");
        }
        assertTrue(problems.isEmpty(), "seed " + seed + ": " + problems.size() + " bad reads, first: "
                + problems.stream().limit(5).toList());
        long hits = handles.get(1).store().inlineHits() + handles.get(2).store().inlineHits();
        assertTrue(handles.get(1).store().inlineHits() > 100 && handles.get(2).store().inlineHits() > 100,
                "both read paths took inline copies: posted " + handles.get(1).store().inlineHits() + ", memory "
                        + handles.get(2).store().inlineHits());
        long tables = one.store().allTables().size();
        System.out.println("DsmMapInlineTest race: reads=" + reads + ", present=" + presentReads + ", inlineHits="
                + hits + ", tables=" + tables + ", restarts=" + (handles.get(1).store().restarts()
                + handles.get(2).store().restarts()));
        assertTrue(presentReads.get() > 100, "too few present reads to mean anything: " + presentReads);
        assertTrue(hits > 100, "the inline path was hardly taken: " + hits);
        assertTrue(tables > 3, "the table did not grow under the readers: " + tables);
        // every watched key ends as its last write left it, on every node
        Map<Long, String> fromOne = new HashMap<>();
        for (long k = 0; k < watched; k++) {
            fromOne.put(k, one.get(k));
            assertEquals(fromOne.get(k), handles.get(2).get(k));
        }
    }

    /** A value of {@code key}: small (fits inline with its 8-byte key) or large (does not). */
    static String value(long key, long seq, boolean large) {
        String body = key + ":" + seq + ":" + Long.toHexString(MapLayout.mix(key * 31 + seq) & 0xffffffL);
        return large ? body + ":" + "L".repeat(300) : body; // 300: past the default 272-byte inline area
    }

    /** The sequence number of a well-formed value of {@code key}, else -1. */
    static long parse(long key, String v) {
        String[] p = v.split(":");
        if (p.length < 3 || p.length > 4 || !p[0].equals(Long.toString(key))) {
            return -1;
        }
        long seq;
        try {
            seq = Long.parseLong(p[1]);
        } catch (NumberFormatException e) {
            return -1;
        }
        if (!p[2].equals(Long.toHexString(MapLayout.mix(key * 31 + seq) & 0xffffffL))) {
            return -1;
        }
        if (p.length == 4 && !p[3].equals("L".repeat(300))) {
            return -1;
        }
        return seq;
    }
}
