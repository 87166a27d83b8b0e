package io.membus.collections;

import io.membus.codec.Codecs;
import io.membus.test.check.CheckResult;
import io.membus.test.check.LinearizabilityChecker;
import io.membus.test.check.Models;
import io.membus.test.history.HistoryRecorder;
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

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Many threads on one node's queue handle (a {@link DsmCollections} hands every thread the
 * same handle), as the 8-thread benchmark runs them: the threads of a handle share a claim
 * CAS in flight instead of racing it ({@code QueueClaims.share}), which must keep every
 * contract — every element taken exactly once, each producer's order at every consumer, a
 * poll right after the thread's own offer never empty, histories linearizable. Another
 * node's handle takes part, so claims are also lost to a thread the sharing does not know.
 * Seeds print and replay with {@code -Dmembus.seed=}.
 */
class DsmQueueSharedHandleTest {
    static final long SEED = Long.getLong("membus.seed", System.nanoTime());

    private static void runAll(List<Callable<Void>> tasks) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(tasks.size());
        try {
            for (Future<Void> f : pool.invokeAll(tasks, 120, TimeUnit.SECONDS)) {
                assertFalse(f.isCancelled(), "a task did not finish in time (seed=" + SEED + ")");
                f.get();
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS), "the test's threads did not end");
        }
    }

    /**
     * Eight threads on node 1's handle and two on node 2's, each offering then polling
     * through a ring of 16 (it wraps hundreds of times): every element taken once, in each
     * producer's order at every consumer, and no poll finds the queue empty right after its
     * own thread's offer (every thread offers before it polls, so a linearizable queue holds
     * at least that element then).
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "tcp"})
    void offerThenPollFromTenThreadsOnTwoHandles(String transport) throws Exception {
        System.out.println("DsmQueueSharedHandleTest seed=" + SEED + " (replay with -Dmembus.seed=" + SEED + ")");
        try (CollCluster c = new CollCluster(transport, 2)) {
            int threads = 10;
            int per = transport.equals("tcp") ? 150 : 400;
            int[] offered = new int[threads];
            List<List<Long>> received = new ArrayList<>();
            AtomicInteger emptyPolls = new AtomicInteger();
            List<Callable<Void>> tasks = new ArrayList<>();
            for (int p = 0; p < threads; p++) {
                int id = p;
                offered[p] = per;
                List<Long> mine = new ArrayList<>();
                received.add(mine);
                DsmQueue<Long> q = c.node(p < 8 ? 1 : 2).queue("shared", Codecs.longs(), 16);
                Random rnd = new Random(SEED * 31 + p);
                tasks.add(() -> {
                    for (int s = 0; s < per; s++) {
                        long e = id * DeliveryCheck.STRIDE + s;
                        if (rnd.nextInt(4) == 0) {
                            q.put(e);
                        } else {
                            assertTrue(q.offer(e), "seed=" + SEED + ": offer refused with at most 10 elements in a"
                                    + " ring of 16");
                        }
                        Long got = rnd.nextInt(4) == 0 ? q.poll(10, TimeUnit.SECONDS) : q.poll();
                        if (got == null) {
                            emptyPolls.incrementAndGet();
                        } else {
                            mine.add(got);
                        }
                    }
                    return null;
                });
            }
            runAll(tasks);
            DsmQueue<Long> q = c.node(2).queue("shared", Codecs.longs(), 16);
            List<Long> left = new ArrayList<>();
            for (Long e = q.poll(); e != null; e = q.poll()) {
                left.add(e);
            }
            received.add(left);
            assertEquals(0, emptyPolls.get(), "seed=" + SEED + ": polls found the queue empty right after their"
                    + " own offer");
            assertEquals(List.of(), DeliveryCheck.problems(offered, received), "seed=" + SEED);
            assertEquals(0, q.size());
        }
    }

    /** Random offers and polls from five threads on one handle and one on another, through a ring of four: linearizable as a FIFO queue. */
    @ParameterizedTest
    @ValueSource(strings = {"local", "tcp"})
    void historyOfThreadsSharingAHandleIsLinearizable(String transport) throws Exception {
        System.out.println("DsmQueueSharedHandleTest seed=" + SEED + " (replay with -Dmembus.seed=" + SEED + ")");
        try (CollCluster c = new CollCluster(transport, 2)) {
            HistoryRecorder rec = new HistoryRecorder();
            List<Callable<Void>> tasks = new ArrayList<>();
            for (int t = 0; t < 6; t++) {
                int process = t;
                DsmQueue<Long> q = c.node(t < 5 ? 1 : 2).queue("hs", Codecs.longs(), 4);
                Random rnd = new Random(SEED * 37 + t);
                tasks.add(() -> {
                    for (int k = 0; k < 16; k++) {
                        if (rnd.nextInt(5) < 3) {
                            long e = process * 1000L + k;
                            HistoryRecorder.Call call = rec.invoke(process, "hs", "offer", e);
                            call.ok(q.offer(e));
                        } else {
                            HistoryRecorder.Call call = rec.invoke(process, "hs", "poll", null);
                            call.ok(q.poll());
                        }
                    }
                    return null;
                });
            }
            runAll(tasks);
            CheckResult r = new LinearizabilityChecker(5_000_000L, Duration.ofSeconds(60))
                    .check(rec.history(), Models.fifoQueue(4));
            assertTrue(r.linearizable(), "seed=" + SEED + ": " + r.summary());
        }
    }
}
