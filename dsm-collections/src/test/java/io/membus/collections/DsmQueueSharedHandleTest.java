package io.membus.collections;

import io.membus.codec.Codecs;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
    /** The stress tests' seed (their failure messages print it too). */
    static final long SEED = DsmStressTest.SEED;

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
            DsmStressTest.runAll(tasks);
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
            DsmStressTest.assertQueueHistoryLinearizable(c, "hs", 6, t -> t < 5 ? 1 : 2, 16, 4, 60, SEED * 37);
        }
    }
}
