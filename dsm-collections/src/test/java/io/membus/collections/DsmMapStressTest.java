package io.membus.collections;

import io.membus.codec.Codecs;
import io.membus.core.test.Seeds;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import io.membus.collections.ChainChecker.Event;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Threads on three nodes race get, put, putIfAbsent, replace (both forms) and remove
 * (both forms) on a few keys while another thread grows the table, then every key's
 * history is checked exactly: each value comes from one successful write; every
 * change reports the value it replaced, so each written value is replaced or removed
 * at most once and, unless it is the key's final value, exactly once; every value a
 * get returned was written for that key. A lost update, a double removal, a torn or
 * phantom read, or a size that drifts fails it. (An exact check of the per-key chains;
 * the dsm-testkit linearizability checker is not on main yet.)
 * Seed: -Dmembus.map.seed=...
 */
class DsmMapStressTest {
    private MapCluster cluster;
    private ExecutorService exec;

    @AfterEach
    void close() throws InterruptedException {
        try {
            if (exec != null) {
                exec.shutdownNow();
                assertTrue(exec.awaitTermination(30, TimeUnit.SECONDS), "client threads did not stop");
            }
        } finally {
            if (cluster != null) {
                cluster.close();
            }
        }
    }

    @Test
    void perKeyChainsAreExactOverLocal(TestInfo info) throws Exception {
        run("local", info);
    }

    @Test
    void perKeyChainsAreExactOverShm(TestInfo info) throws Exception {
        run("shm", info);
    }

    @Test
    void perKeyChainsAreExactOverTcp(TestInfo info) throws Exception {
        run("tcp", info);
    }

    /**
     * Node 3 a client (no heap): its puts write their entries on the table's node with the
     * window's read (issue 28), over tcp's lanes (the write and the two reads in one lane
     * call) while the table grows and the other nodes change the same keys.
     */
    @Test
    void perKeyChainsAreExactWithAClientOverTcp(TestInfo info) throws Exception {
        run("tcp", info, Duration.ofMillis(100), true);
    }

    /** {@link #perKeyChainsAreExactWithAClientOverTcp} over {@code local}, with a 10 ms grace (reads race frees). */
    @Test
    void perKeyChainsAreExactWithAClientWhenReadersRaceFrees(TestInfo info) throws Exception {
        run("local", info, Duration.ofMillis(10), true);
    }

    /**
     * A grace of 10 ms: replaced entries are freed and their blocks reused while slow
     * readers may still hold their slot words, so reads race frees (and restart).
     */
    @Test
    void perKeyChainsAreExactWhenReadersRaceFrees(TestInfo info) throws Exception {
        run("local", info, Duration.ofMillis(10));
    }

    private void run(String transport, TestInfo info) throws Exception {
        run(transport, info, Duration.ofMillis(100));
    }

    private void run(String transport, TestInfo info, Duration grace) throws Exception {
        run(transport, info, grace, false);
    }

    /** {@code client}: node 3 exports no heap. */
    private void run(String transport, TestInfo info, Duration grace, boolean client) throws Exception {
        long seed = Seeds.seed("membus.map.seed", info.getDisplayName());
        cluster = new MapCluster(transport, 3, 32 << 20, Duration.ofSeconds(10), (id, t) -> t,
                id -> client && id == 3);
        DsmMap<Integer, String> created = DsmMap.create(cluster.node(1), Codecs.ints(), Codecs.strings(),
                DsmMapOptions.defaults().initialSlots(16).grace(grace));
        List<DsmMap<Integer, String>> maps = new ArrayList<>();
        for (int node = 1; node <= 3; node++) {
            maps.add(DsmMap.open(cluster.node(node), created.rootPtr(), Codecs.ints(), Codecs.strings()));
        }
        int keys = 6;
        int threads = 6;
        int ops = 600;
        ConcurrentLinkedQueue<Event> events = new ConcurrentLinkedQueue<>();
        exec = Executors.newFixedThreadPool(threads + 1);
        List<Future<?>> futures = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int thread = t;
            DsmMap<Integer, String> m = maps.get(t % 3);
            SplittableRandom rnd = new SplittableRandom(seed + t);
            futures.add(exec.submit(() -> {
                Map<Integer, String> lastSeen = new HashMap<>();
                for (int i = 0; i < ops; i++) {
                    int k = rnd.nextInt(keys);
                    String u = thread + ":" + i;
                    switch (rnd.nextInt(8)) {
                        case 0, 1 -> {
                            String v = m.get(k);
                            if (v != null) {
                                events.add(new Event(k, 'r', v));
                                lastSeen.put(k, v);
                            }
                        }
                        case 2 -> {
                            events.add(new Event(k, 'p', u));
                            consumed(events, k, m.put(k, u));
                        }
                        case 3 -> {
                            if (m.putIfAbsent(k, u) == null) {
                                events.add(new Event(k, 'p', u));
                            }
                        }
                        case 4 -> {
                            String prev = m.replace(k, u);
                            if (prev != null) {
                                events.add(new Event(k, 'p', u));
                                consumed(events, k, prev);
                            }
                        }
                        case 5 -> {
                            String old = lastSeen.get(k);
                            if (old != null && m.replace(k, old, u)) {
                                events.add(new Event(k, 'p', u));
                                consumed(events, k, old);
                            }
                        }
                        case 6 -> consumed(events, k, m.remove(k));
                        default -> {
                            String old = lastSeen.get(k);
                            if (old != null && m.remove(k, old)) {
                                consumed(events, k, old);
                            }
                        }
                    }
                }
                return null;
            }));
        }
        // growth racing the histories: distinct keys inserted from node 3
        futures.add(exec.submit(() -> {
            DsmMap<Integer, String> m = maps.get(2);
            for (int i = 0; i < 1500; i++) {
                m.put(1000 + i, "g" + i);
            }
            return null;
        }));
        for (Future<?> f : futures) {
            f.get(180, TimeUnit.SECONDS);
        }
        String where = "seed=" + seed + ", transport=" + transport;
        Map<Integer, String> finals = new HashMap<>();
        Set<Integer> keySet = new HashSet<>();
        for (int k = 0; k < keys; k++) {
            keySet.add(k);
            String fin = maps.get(k % 3).get(k);
            if (fin != null) {
                finals.put(k, fin);
            }
        }
        List<String> bad = ChainChecker.check(events, finals, keySet);
        assertEquals(List.of(), bad, where);
        for (int i = 0; i < 1500; i++) {
            assertEquals("g" + i, maps.get(i % 3).get(1000 + i), "grown key " + (1000 + i) + " (" + where + ")");
        }
        int live = 0;
        for (int k = 0; k < keys; k++) {
            live += maps.get(0).containsKey(k) ? 1 : 0;
        }
        assertEquals(1500 + live, maps.get(1).size(), "size when quiescent (" + where + ")");
        assertEquals(1500 + live, maps.get(2).entrySet().size());
        int iterated = 0;
        for (Map.Entry<Integer, String> e : maps.get(0).entrySet()) {
            iterated++;
        }
        assertEquals(1500 + live, iterated, "iteration when quiescent (" + where + ")");
        long restarts = 0;
        long freed = 0;
        for (DsmMap<Integer, String> m : maps) {
            restarts += m.store().restarts();
            m.close();
            freed += m.store().reclaimer.freed();
        }
        System.out.println(where + ": restarts=" + restarts + ", entriesFreed=" + freed + ", grace=" + grace);
    }

    private static void consumed(ConcurrentLinkedQueue<Event> events, int k, String prev) {
        if (prev != null) {
            events.add(new Event(k, 'c', prev));
        }
    }
}
