package io.membus.collections;

import io.membus.codec.Codecs;
import io.membus.coherence.CoherenceConfig;
import io.membus.coherence.CoherentHeap;
import io.membus.core.error.DsmException;
import io.membus.core.message.Messaging;
import io.membus.core.time.Clock;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.test.Seeds;
import io.membus.core.fault.FaultInjector;
import io.membus.test.check.CheckResult;
import io.membus.test.check.LinearizabilityChecker;
import io.membus.test.check.Models;
import io.membus.test.history.HistoryRecorder;
import io.membus.test.nemesis.NemesisSchedule;
import io.membus.test.nemesis.TransportNemesis;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Per-key histories of get, containsKey, put, putIfAbsent, replace (both forms) and
 * remove (both forms), from threads on three nodes while the table grows and the
 * dsm-testkit nemesis delays, drops and partitions traffic between the nodes, checked
 * with dsm-testkit's linearizability checker against {@code Models.mapKey()}. An
 * operation that timed out or met an unavailable node is recorded as maybe-applied
 * ({@code info}). Seed: -Dmembus.map.seed=...
 */
@Tag("slow") // in-JVM but over 20 s: the slow tier (failsafe, mvn verify)
class DsmMapLinearizabilityTest {
    private MapCluster cluster;
    private ExecutorService exec;
    private final List<CoherentHeap> heaps = new ArrayList<>();

    @AfterEach
    void close() throws InterruptedException {
        try {
            if (exec != null) {
                exec.shutdownNow();
                assertTrue(exec.awaitTermination(30, TimeUnit.SECONDS), "client threads did not stop");
            }
        } finally {
            heaps.forEach(CoherentHeap::close);
            if (cluster != null) {
                cluster.close();
            }
        }
    }

    @Test
    void historiesAreLinearizableUnderTheNemesisOverLocal(TestInfo info) throws Exception {
        run("local", info);
    }

    @Test
    void historiesAreLinearizableUnderTheNemesisOverShm(TestInfo info) throws Exception {
        run("shm", info);
    }

    /**
     * Node 3 a client (no heap): its plain puts write their entry on the table's node in the
     * round trip that reads the window (issue 28), under the same faults.
     */
    @Test
    void historiesWithAClientAreLinearizableUnderTheNemesisOverLocal(TestInfo info) throws Exception {
        run("local", info, false, true);
    }

    /**
     * The same with leased reads: gets are served from each node's cache under the
     * coherence layer's leases on the key stripes, changes lock their stripe (invalidating
     * the caching nodes, or waiting out their leases when a partition cuts the messages).
     */
    @Test
    void historiesWithLeasedReadsAreLinearizableUnderTheNemesisOverShm(TestInfo info) throws Exception {
        run("shm", info, true);
    }

    @Test
    void historiesWithLeasedReadsAreLinearizableUnderTheNemesisOverLocal(TestInfo info) throws Exception {
        run("local", info, true);
    }

    private void run(String transport, TestInfo info) throws Exception {
        run(transport, info, false);
    }

    private void run(String transport, TestInfo info, boolean leased) throws Exception {
        run(transport, info, leased, false);
    }

    /** {@code client}: node 3 exports no heap. */
    private void run(String transport, TestInfo info, boolean leased, boolean client) throws Exception {
        long seed = Seeds.seed("membus.map.seed", info.getDisplayName());
        cluster = new MapCluster(transport, 3, 32 << 20, Duration.ofMillis(500), (id, t) -> t,
                id -> client && id == 3);
        List<DsmMapOptions> options = new ArrayList<>();
        for (int node = 1; node <= 3; node++) {
            DsmMapOptions o = DsmMapOptions.defaults().initialSlots(16);
            if (leased) {
                CoherentHeap heap = new CoherentHeap(cluster.node(node), new Messaging(cluster.node(node).memory()),
                        Clock.system(), CoherenceConfig.defaults().withLeases(Duration.ofMillis(5),
                                Duration.ofMillis(200)).withSkewCheck(false, Duration.ofSeconds(5)));
                heaps.add(heap);
                o = o.leasedReads(true).coherentHeap(heap);
            }
            options.add(o);
        }
        DsmMap<String, Long> created = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.longs(),
                options.get(0));
        List<DsmMap<String, Long>> maps = new ArrayList<>();
        Map<Integer, FaultInjector> injectors = new TreeMap<>();
        for (int node = 1; node <= 3; node++) {
            maps.add(DsmMap.open(cluster.node(node), created.rootPtr(), Codecs.strings(), Codecs.longs(),
                    options.get(node - 1)));
            injectors.put(node, cluster.transports.get(node).faults());
        }
        HistoryRecorder rec = new HistoryRecorder();
        int threads = 6;
        // ten keys: a full run on an idle machine (seed 4606061889959856010, shm, leased) gave one of six keys 313
        // operations under the nemesis and the checker's search ran out of budget (UNKNOWN, not a violation); with
        // client puts in two round trips the same 3 s make longer histories per key
        int keys = 10;
        long runFor = Duration.ofSeconds(3).toNanos();
        exec = Executors.newFixedThreadPool(threads + 1);
        List<Future<?>> futures = new ArrayList<>();
        try (NemesisSchedule nemesis = NemesisSchedule.start(List.of(TransportNemesis.partition(injectors),
                        TransportNemesis.drop(injectors), TransportNemesis.delay(injectors, Duration.ofMillis(20))),
                rec, seed, Duration.ofMillis(300), Duration.ofMillis(400))) {
            long end = System.nanoTime() + runFor;
            for (int t = 0; t < threads; t++) {
                int process = t;
                DsmMap<String, Long> m = maps.get(t % 3);
                SplittableRandom rnd = new SplittableRandom(seed + t);
                futures.add(exec.submit(() -> {
                    long n = 0;
                    while (System.nanoTime() < end) {
                        String key = "k" + rnd.nextInt(keys);
                        long v = process * 1_000_000L + n++;
                        Long seen = (long) (rnd.nextInt(4) + process * 1_000_000L + Math.max(0, n - 4));
                        switch (rnd.nextInt(leased ? 14 : 8)) { // leased: more gets, to meet the caches
                            case 0 -> call(rec, process, key, "get", null, () -> m.get(key));
                            case 1 -> call(rec, process, key, "containsKey", null, () -> m.containsKey(key));
                            case 2 -> call(rec, process, key, "put", v, () -> m.put(key, v));
                            case 3 -> call(rec, process, key, "putIfAbsent", v, () -> m.putIfAbsent(key, v));
                            case 4 -> call(rec, process, key, "replace", v, () -> m.replace(key, v));
                            case 5 -> call(rec, process, key, "replaceIf", List.of(seen, v), () -> m.replace(key, seen, v));
                            case 6 -> call(rec, process, key, "remove", null, () -> m.remove(key));
                            case 7 -> call(rec, process, key, "removeIf", seen, () -> m.remove(key, seen));
                            default -> call(rec, process, key, "get", null, () -> m.get(key));
                        }
                    }
                    return null;
                }));
            }
            // growth racing the histories (its keys are not checked)
            futures.add(exec.submit(() -> {
                DsmMap<String, Long> m = maps.get(2);
                for (long i = 0; i < 800 && System.nanoTime() < end; i++) {
                    try {
                        m.put("grow-" + i, i);
                    } catch (DsmException e) {
                        // a fault: the history keys are what is checked
                    }
                }
                return null;
            }));
            for (Future<?> f : futures) {
                f.get(120, TimeUnit.SECONDS);
            }
            if (nemesis.failure() != null) {
                throw nemesis.failure();
            }
            assertTrue(nemesis.faultsStarted() > 0, "the nemesis injected no fault");
        }
        CheckResult result = new LinearizabilityChecker().check(rec.history(), Models.mapKey());
        if (leased) {
            long hits = maps.stream().mapToLong(DsmMap::readCacheHits).sum();
            System.out.println("leased gets served from the caches: " + hits);
            assertTrue(hits > 0, "no get was served under a lease");
        } else {
            // the checker covered changes made on a slot word of the read cache (no lookup) too
            long speculated = maps.stream().mapToLong(m -> m.store().speculated()).sum();
            System.out.println("changes on a cached slot word: " + speculated);
            assertTrue(speculated > 0, "no change was made on a cached slot word");
        }
        if (client) {
            long carried = maps.get(2).store().carried();
            System.out.println("client puts whose entry rode with the window's read: " + carried);
            assertTrue(carried > 0, "no client put wrote its entry with the window's read");
        }
        System.out.println("seed=" + seed + " transport=" + transport + " leased=" + leased + " operations=" + rec.history().operations().size()
                + " maybeApplied=" + rec.history().count(io.membus.test.history.Outcome.INFO) + " " + result.summary());
        assertTrue(result.linearizable(), "seed=" + seed + ", transport=" + transport + ": " + result.summary());
    }

    private interface Op {
        Object run();
    }

    private static void call(HistoryRecorder rec, int process, String key, String f, Object input, Op op) {
        HistoryRecorder.Call c = rec.invoke(process, key, f, input);
        try {
            c.ok(op.run());
        } catch (DsmTimeoutException | NodeUnavailableException e) {
            c.info(e);
        } catch (DsmMapException e) {
            c.info(e); // kept restarting: it may have taken effect
        } catch (DsmException e) {
            c.info(e); // a stripe lock that timed out or was broken (leased reads)
        }
    }
}
