package io.membus.collections;

import io.membus.codec.Codecs;
import io.membus.test.check.CheckResult;
import io.membus.test.check.LinearizabilityChecker;
import io.membus.test.check.Models;
import io.membus.test.history.HistoryRecorder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntUnaryOperator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Stress over three nodes: queue deliveries exactly once and FIFO per producer,
 * and histories of the counter, the queue and the lock checked linearizable by
 * the dsm-testkit checker. Seeds print and replay with {@code -Dmembus.seed=}.
 */
class DsmStressTest {
    static final long SEED = Long.getLong("membus.seed", System.nanoTime());

    static void runAll(List<Callable<Void>> tasks) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(tasks.size());
        try {
            for (Future<Void> f : pool.invokeAll(tasks, 60, TimeUnit.SECONDS)) {
                assertFalse(f.isCancelled(), "a task did not finish in time");
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * Three producers (one per node) put, three consumers take through a small ring
     * (so both sides block and the ring wraps hundreds of times): every element taken
     * exactly once, each producer's elements in order at every consumer.
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void everyElementTakenOnceInProducerOrder(String transport) throws Exception {
        try (CollCluster c = new CollCluster(transport, 3)) {
            int producers = 3;
            int per = 1500;
            int[] offered = new int[producers];
            List<List<Long>> received = new ArrayList<>();
            AtomicInteger remaining = new AtomicInteger(producers * per);
            List<Callable<Void>> tasks = new ArrayList<>();
            for (int p = 0; p < producers; p++) {
                int id = p;
                offered[p] = per;
                DsmQueue<Long> q = c.node(1 + p).queue("stress", Codecs.longs(), 8);
                tasks.add(() -> {
                    for (int s = 0; s < per; s++) {
                        long e = id * DeliveryCheck.STRIDE + s;
                        if (s % 3 == 0) {
                            q.put(e);
                        } else {
                            while (!q.offer(e, 10, TimeUnit.MILLISECONDS)) {
                                Thread.onSpinWait();
                            }
                        }
                    }
                    return null;
                });
            }
            for (int k = 0; k < 3; k++) {
                List<Long> mine = new ArrayList<>();
                received.add(mine);
                DsmQueue<Long> q = c.node(1 + k).queue("stress", Codecs.longs(), 8);
                tasks.add(() -> {
                    while (remaining.get() > 0) {
                        Long e = q.poll(5, TimeUnit.MILLISECONDS);
                        if (e != null) {
                            mine.add(e);
                            remaining.decrementAndGet();
                        }
                    }
                    return null;
                });
            }
            runAll(tasks);
            assertEquals(List.of(), DeliveryCheck.problems(offered, received));
            assertEquals(0, c.node(2).queue("stress", Codecs.longs(), 8).size());
        }
    }

    /** The same with elements too large for their slots (allocator blocks, freed by the consumers). */
    @Test
    void largeElementsAreTakenOnceAndTheirBlocksFreed() throws Exception {
        try (CollCluster c = new CollCluster("local", 3)) {
            int per = 300;
            String pad = "p".repeat(300);
            List<List<Long>> received = new ArrayList<>();
            AtomicInteger remaining = new AtomicInteger(3 * per);
            List<Callable<Void>> tasks = new ArrayList<>();
            for (int p = 0; p < 3; p++) {
                int id = p;
                DsmQueue<String> q = c.node(1 + p).queue("large", String.class, 4);
                tasks.add(() -> {
                    for (int s = 0; s < per; s++) {
                        q.put((id * DeliveryCheck.STRIDE + s) + ":" + pad);
                    }
                    return null;
                });
                List<Long> mine = new ArrayList<>();
                received.add(mine);
                tasks.add(() -> {
                    while (remaining.get() > 0) {
                        String e = q.poll(5, TimeUnit.MILLISECONDS);
                        if (e != null) {
                            assertTrue(e.endsWith(pad));
                            mine.add(Long.parseLong(e.substring(0, e.indexOf(':'))));
                            remaining.decrementAndGet();
                        }
                    }
                    return null;
                });
            }
            runAll(tasks);
            assertEquals(List.of(), DeliveryCheck.problems(new int[] {per, per, per}, received));
        }
    }

    @Test
    void theDeliveryCheckCatchesPlantedBugs() {
        int[] offered = {2, 2};
        assertEquals(List.of(), DeliveryCheck.problems(offered, List.of(List.of(0L, 1_000_000L), List.of(1L, 1_000_001L))));
        assertFalse(DeliveryCheck.problems(offered, List.of(List.of(0L, 1L, 1_000_000L))).isEmpty(), "loss");
        assertFalse(DeliveryCheck.problems(offered, List.of(List.of(0L, 1L, 1_000_000L, 1_000_001L),
                List.of(1L))).isEmpty(), "duplicate");
        assertFalse(DeliveryCheck.problems(offered, List.of(List.of(1L, 0L, 1_000_000L, 1_000_001L))).isEmpty(),
                "reorder");
        assertFalse(DeliveryCheck.problems(offered, List.of(List.of(0L, 1L, 1_000_000L, 1_000_001L, 5L))).isEmpty(),
                "invented");
    }

    private static void assertLinearizable(CheckResult r) {
        assertTrue(r.linearizable(), "seed=" + SEED + ": " + r.summary());
    }

    /** Random counter operations from six threads on three nodes: the history is linearizable. */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void counterHistoryIsLinearizable(String transport) throws Exception {
        System.out.println("DsmStressTest seed=" + SEED + " (replay with -Dmembus.seed=" + SEED + ")");
        try (CollCluster c = new CollCluster(transport, 3)) {
            HistoryRecorder rec = new HistoryRecorder();
            List<Callable<Void>> tasks = new ArrayList<>();
            for (int t = 0; t < 6; t++) {
                int process = t;
                DsmAtomicLong a = c.node(1 + t % 3).atomicLong("hist");
                Random rnd = new Random(SEED + t);
                tasks.add(() -> {
                    for (int k = 0; k < 60; k++) {
                        long d = rnd.nextInt(5) + 1;
                        switch (rnd.nextInt(4)) {
                            case 0 -> {
                                HistoryRecorder.Call call = rec.invoke(process, "hist", "get", null);
                                call.ok(a.get());
                            }
                            case 1 -> {
                                HistoryRecorder.Call call = rec.invoke(process, "hist", "addAndGet", d);
                                call.ok(a.addAndGet(d));
                            }
                            case 2 -> {
                                HistoryRecorder.Call call = rec.invoke(process, "hist", "getAndAdd", d);
                                call.ok(a.getAndAdd(d));
                            }
                            default -> {
                                long expected = a.get();
                                HistoryRecorder.Call call = rec.invoke(process, "hist", "cas",
                                        List.of(expected, expected + d));
                                call.ok(a.compareAndSet(expected, expected + d));
                            }
                        }
                    }
                    return null;
                });
            }
            runAll(tasks);
            assertLinearizable(new LinearizabilityChecker().check(rec.history(), Models.counter(0)));
        }
    }

    /** offer/poll from four threads on three nodes through a ring of three: linearizable as a FIFO queue. */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void queueHistoryIsLinearizable(String transport) throws Exception {
        try (CollCluster c = new CollCluster(transport, 3)) {
            assertQueueHistoryLinearizable(c, "hq", 4, t -> 1 + t % 3, 25, 3, 50, SEED * 31);
        }
    }

    /**
     * Random offers ({@code offerPercent} of the operations) and polls, {@code ops} from each
     * of {@code threads} threads (thread {@code t} on node {@code nodeOf(t)}, seeded by
     * {@code seed + t}), through queue {@code name}, a ring of {@code capacity}: the history
     * is linearizable as a FIFO queue.
     */
    static void assertQueueHistoryLinearizable(CollCluster c, String name, int threads, IntUnaryOperator nodeOf,
                                               int ops, int capacity, int offerPercent, long seed) throws Exception {
        HistoryRecorder rec = new HistoryRecorder();
        List<Callable<Void>> tasks = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int process = t;
            DsmQueue<Long> q = c.node(nodeOf.applyAsInt(t)).queue(name, Codecs.longs(), capacity);
            Random rnd = new Random(seed + t);
            tasks.add(() -> {
                for (int k = 0; k < ops; k++) {
                    if (rnd.nextInt(100) < offerPercent) {
                        long e = process * 1000L + k;
                        HistoryRecorder.Call call = rec.invoke(process, name, "offer", e);
                        call.ok(q.offer(e));
                    } else {
                        HistoryRecorder.Call call = rec.invoke(process, name, "poll", null);
                        call.ok(q.poll());
                    }
                }
                return null;
            });
        }
        runAll(tasks);
        assertLinearizable(new LinearizabilityChecker(5_000_000L, Duration.ofSeconds(60))
                .check(rec.history(), Models.fifoQueue(capacity)));
    }

    /** lock/unlock with tokens from six threads on three nodes: holders never overlap and tokens grow. */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void lockHistoryIsLinearizable(String transport) throws Exception {
        try (CollCluster c = new CollCluster(transport, 3)) {
            HistoryRecorder rec = new HistoryRecorder();
            List<Callable<Void>> tasks = new ArrayList<>();
            for (int t = 0; t < 6; t++) {
                int process = t;
                DsmLock lock = c.node(1 + t % 3).lock("hl");
                Random rnd = new Random(SEED * 17 + t);
                tasks.add(() -> {
                    for (int k = 0; k < 25; k++) {
                        long token;
                        if (rnd.nextBoolean()) {
                            HistoryRecorder.Call call = rec.invoke(process, "hl", "acquire", null);
                            token = lock.lockWithToken();
                            call.ok(token);
                        } else {
                            HistoryRecorder.Call call = rec.invoke(process, "hl", "tryAcquire", null);
                            boolean got = lock.tryLock(1, TimeUnit.MILLISECONDS);
                            call.ok(got ? lock.token() : null);
                            if (!got) {
                                continue;
                            }
                            token = lock.token();
                        }
                        HistoryRecorder.Call release = rec.invoke(process, "hl", "release", token);
                        lock.unlock();
                        release.ok(null);
                    }
                    return null;
                });
            }
            runAll(tasks);
            assertLinearizable(new LinearizabilityChecker().check(rec.history(), Models.lock()));
        }
    }
}
