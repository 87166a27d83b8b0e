package io.membus.coherence;

import io.membus.alloc.Placement;
import io.membus.codec.Codecs;
import io.membus.core.error.DsmException;
import io.membus.core.fault.FaultInjector;
import io.membus.test.check.CheckResult;
import io.membus.test.check.LinearizabilityChecker;
import io.membus.test.check.Models;
import io.membus.test.check.Verdict;
import io.membus.test.history.History;
import io.membus.test.history.HistoryRecorder;
import io.membus.test.nemesis.ClockNemesis;
import io.membus.test.nemesis.NemesisSchedule;
import io.membus.test.nemesis.TransportNemesis;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Consistency stress of coherent registers: three nodes, two client threads each,
 * caching on, reads / writes / compare-and-sets on a few objects while the nemesis
 * skews clocks within the bound and delays traffic; every history must be linearizable.
 * Then the planted violation: one node's clock far beyond the bound with the skew check
 * off makes a cached read stale, and the checker must catch it (and with the check on,
 * it must not happen). Seeds printed; {@code -Dmembus.seed=N} replays the choices.
 */
@Tag("slow") // in-JVM but over 20 s: the slow tier (failsafe, mvn verify)
class CoherenceLinearizabilityTest {
    private CoherenceCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm", "tcp"})
    void registersStayLinearizableWithCachingUnderSkewWithinTheBoundAndDelays(String transport) throws Exception {
        long seed = Long.getLong("membus.seed", System.nanoTime());
        System.out.println("CoherenceLinearizabilityTest " + transport + " seed=" + seed
                + " (replay with -Dmembus.seed=" + seed + ")");
        CoherenceConfig config = CoherenceConfig.defaults().withClockBound(Duration.ofMillis(20))
                .withLeases(Duration.ofMillis(5), Duration.ofMillis(200)).withLockTimeout(Duration.ofSeconds(2))
                .withSkewCheck(false, Duration.ofSeconds(5));
        cluster = new CoherenceCluster(transport, 3, id -> config, true);
        int keys = 4;
        List<RemoteRef<Long>> objects = new ArrayList<>();
        for (int k = 0; k < keys; k++) {
            objects.add(cluster.heap(1).create(Codecs.longs(), 0L, Placement.node(1 + k % 3)));
        }
        Map<Integer, FaultInjector> injectors = new TreeMap<>();
        cluster.transports.forEach((id, t) -> injectors.put(id, t.faults()));
        HistoryRecorder rec = new HistoryRecorder();
        try (NemesisSchedule nemesis = NemesisSchedule.start(List.of(
                new ClockNemesis(cluster.clocks, Duration.ofMillis(8)),
                TransportNemesis.delay(injectors, Duration.ofMillis(3))), rec, seed, Duration.ofMillis(150),
                Duration.ofMillis(300))) {
            runClients(rec, objects, seed, Duration.ofSeconds(3));
        }
        History h = rec.history();
        CheckResult result = new LinearizabilityChecker().check(h, Models.register(0L));
        System.out.println(transport + " seed=" + seed + " operations=" + h.operations().size() + " faults="
                + h.faults().size() + " " + result.summary());
        assertEquals(Verdict.LINEARIZABLE, result.verdict(), "seed=" + seed + "\n" + result.summary());
    }

    /**
     * Counters: every client increments with {@code update} (an atomic read-modify-write)
     * and reads with caching on, while the nemesis partitions a node away and drops
     * traffic between pairs; increments that time out are indeterminate. Every history
     * must be linearizable against the counter model.
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm", "tcp"})
    void countersStayLinearizableUnderPartitionsAndDrops(String transport) throws Exception {
        long seed = Long.getLong("membus.seed", System.nanoTime());
        System.out.println("CoherenceLinearizabilityTest counters " + transport + " seed=" + seed);
        CoherenceConfig config = CoherenceConfig.defaults().withClockBound(Duration.ofMillis(20))
                .withLeases(Duration.ofMillis(5), Duration.ofMillis(100)).withLockTimeout(Duration.ofSeconds(1))
                .withTimeout(Duration.ofMillis(1500)).withSkewCheck(false, Duration.ofSeconds(5));
        cluster = new CoherenceCluster(transport, 3, id -> config, true);
        List<RemoteRef<Long>> counters = new ArrayList<>();
        for (int k = 0; k < 3; k++) {
            counters.add(cluster.heap(1).create(Codecs.longs(), 0L, Placement.node(1 + k % 3)));
        }
        Map<Integer, FaultInjector> injectors = new TreeMap<>();
        cluster.transports.forEach((id, t) -> injectors.put(id, t.faults()));
        HistoryRecorder rec = new HistoryRecorder();
        List<Thread> threads = new ArrayList<>();
        // every handle opened before the nemesis starts: an open is a verb a partition would fail
        List<List<RemoteRef<Long>>> handles = new ArrayList<>();
        for (int node = 1; node <= 3; node++) {
            for (int t = 0; t < 2; t++) {
                List<RemoteRef<Long>> mine = new ArrayList<>();
                for (RemoteRef<Long> c : counters) {
                    mine.add(cluster.heap(node).open(c.ptr(), c.generationHeader(), Codecs.longs()));
                }
                handles.add(mine);
            }
        }
        long end = System.nanoTime() + Duration.ofSeconds(3).toNanos();
        try (NemesisSchedule nemesis = NemesisSchedule.start(List.of(TransportNemesis.partition(injectors),
                TransportNemesis.drop(injectors)), rec, seed, Duration.ofMillis(200), Duration.ofMillis(400))) {
            for (int node = 1; node <= 3; node++) {
                for (int t = 0; t < 2; t++) {
                    int p = (node - 1) * 2 + t;
                    List<RemoteRef<Long>> mine = handles.get(p);
                    Random rnd = new Random(seed + p);
                    Thread th = new Thread(() -> {
                        while (System.nanoTime() < end) {
                            int k = rnd.nextInt(mine.size());
                            String key = "c" + k;
                            if (rnd.nextBoolean()) {
                                HistoryRecorder.Call c = rec.invoke(p, key, "incrementAndGet", 1L);
                                try {
                                    c.ok(mine.get(k).update(v -> v + 1));
                                } catch (DsmException e) {
                                    c.info(e);
                                }
                            } else {
                                HistoryRecorder.Call c = rec.invoke(p, key, "read", null);
                                try {
                                    c.ok(mine.get(k).get());
                                } catch (DsmException e) {
                                    c.fail(e);
                                }
                            }
                        }
                    }, "counter-client-" + p);
                    th.start();
                    threads.add(th);
                }
            }
            for (Thread th : threads) {
                th.join(TimeUnit.SECONDS.toMillis(60));
            }
        }
        History h = rec.history();
        CheckResult result = new LinearizabilityChecker().check(h, Models.counter(0));
        System.out.println("counters " + transport + " seed=" + seed + " operations=" + h.operations().size()
                + " indeterminate=" + h.count(io.membus.test.history.Outcome.INFO) + " faults=" + h.faults().size()
                + " " + result.summary());
        assertEquals(Verdict.LINEARIZABLE, result.verdict(), "seed=" + seed + "\n" + result.summary());
    }

    private void runClients(HistoryRecorder rec, List<RemoteRef<Long>> objects, long seed, Duration duration)
            throws InterruptedException {
        List<Thread> threads = new ArrayList<>();
        long end = System.nanoTime() + duration.toNanos();
        int process = 0;
        for (int node = 1; node <= 3; node++) {
            for (int t = 0; t < 2; t++) {
                int p = process++;
                CoherentHeap heap = cluster.heap(node);
                List<RemoteRef<Long>> mine = new ArrayList<>();
                for (RemoteRef<Long> o : objects) {
                    mine.add(heap.open(o.ptr(), o.generationHeader(), Codecs.longs()));
                }
                Random rnd = new Random(seed + p);
                Thread th = new Thread(() -> {
                    long next = p * 1_000_000L;
                    while (System.nanoTime() < end) {
                        int k = rnd.nextInt(mine.size());
                        RemoteRef<Long> ref = mine.get(k);
                        String key = "r" + k;
                        int choice = rnd.nextInt(10);
                        if (choice < 6) {
                            HistoryRecorder.Call c = rec.invoke(p, key, "read", null);
                            try {
                                c.ok(ref.get());
                            } catch (DsmException e) {
                                c.fail(e); // a read changes nothing
                            }
                        } else if (choice < 8) {
                            long v = ++next;
                            HistoryRecorder.Call c = rec.invoke(p, key, "write", v);
                            try {
                                ref.set(v);
                                c.ok(null);
                            } catch (DsmException e) {
                                c.info(e);
                            }
                        } else {
                            long expected = rnd.nextBoolean() ? next : 0L;
                            long v = ++next;
                            HistoryRecorder.Call c = rec.invoke(p, key, "cas", List.of(expected, v));
                            try {
                                c.ok(ref.compareAndSet(expected, v));
                            } catch (DsmException e) {
                                c.info(e);
                            }
                        }
                    }
                }, "client-" + p);
                th.start();
                threads.add(th);
            }
        }
        for (Thread th : threads) {
            th.join(TimeUnit.SECONDS.toMillis(60));
        }
    }

    /**
     * The planted violation. Node 1's clock runs 3 s ahead, far beyond the 5 ms bound:
     * when it writes, it believes node 2's lease (by node 2's clock, 2 s long) expired long
     * ago, invalidates nobody and does not wait, so node 2 keeps serving its cached copy.
     */
    private History skewedRun(boolean skewCheck) {
        CoherenceConfig config = CoherenceConfig.defaults().withClockBound(Duration.ofMillis(5))
                .withLeases(Duration.ofSeconds(2), Duration.ofSeconds(2))
                .withSkewCheck(skewCheck, Duration.ofMillis(50));
        cluster = new CoherenceCluster("local", 2, id -> config, true);
        cluster.clocks.get(1).skewMicros(3_000_000);
        if (skewCheck) {
            for (int check = 0; check < CoherentHeap.SKEW_PERSISTENCE; check++) { // a skew that persists
                cluster.heap(1).checkSkew();
                cluster.heap(2).checkSkew();
            }
        }
        RemoteRef<Long> writer = cluster.heap(1).create(Codecs.longs(), 0L, Placement.node(1));
        RemoteRef<Long> reader = cluster.heap(2).open(writer.ptr(), writer.generationHeader(), Codecs.longs());
        HistoryRecorder rec = new HistoryRecorder();
        for (long i = 1; i <= 5; i++) {
            HistoryRecorder.Call r = rec.invoke(2, "x", "read", null);
            r.ok(reader.get());
            HistoryRecorder.Call w = rec.invoke(1, "x", "write", i);
            writer.set(i);
            w.ok(null);
        }
        HistoryRecorder.Call r = rec.invoke(2, "x", "read", null);
        r.ok(reader.get());
        return rec.history();
    }

    @Test
    void skewBeyondTheBoundWithTheCheckOffMakesAStaleReadAndTheCheckerCatchesIt() {
        CheckResult result = new LinearizabilityChecker().check(skewedRun(false), Models.register(0L));
        System.out.println("planted violation: " + result.summary());
        assertEquals(Verdict.VIOLATION, result.verdict(), "the planted stale read must be caught");
    }

    @Test
    void withTheSkewCheckOnTheSameSkewStopsCachingAndEveryReadIsFresh() {
        CheckResult result = new LinearizabilityChecker().check(skewedRun(true), Models.register(0L));
        assertEquals(Verdict.LINEARIZABLE, result.verdict(), result.summary());
        assertEquals(true, cluster.heap(2).cachingProblem() != null, "node 2 says why it does not cache");
        System.out.println(cluster.heap(2).status());
    }
}
