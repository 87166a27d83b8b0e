package io.membus.collections;

import io.membus.codec.Codecs;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Issue 27 (docs/replication.md 17.8): an offer whose claim ran on the queue's node and
 * whose publication and give-back then failed (the node unreachable: here a partition
 * injected with the {@link io.membus.core.fault.FaultInjector} right after the
 * claim) left its slot {@code WRITING(t, producer)}. The producer lives and has no
 * operation on the slot, so nobody recovered it: another node's {@code poll()} waited for
 * it without end, uninterruptibly. Now the producer gives the slot back by itself once the
 * node answers, and a waiting {@code poll()} ends by a bound or an interrupt.
 */
class DsmQueueStuckClaimTest {
    private static final Duration TIMEOUT = Duration.ofMillis(1000);

    /** Two nodes; every test starts from this fixture. */
    private CollCluster c;
    /** Node 2's handle on a queue of 4 slots whose root is on node 2. */
    private DsmQueue<String> q2;
    /** Node 1's handle on the same queue: the node that gets cut off. */
    private DsmQueue<String> q1;

    @BeforeEach
    void start() {
        c = new CollCluster("local", 2, TIMEOUT);
        String name = queueOnNode2(c);
        q2 = c.node(2).queue(name, Codecs.strings(), 4);
        q1 = c.node(1).queue(name, Codecs.strings(), 4);
    }

    @AfterEach
    void close() {
        c.close();
    }

    /** A queue whose root is on node 2 (the root is placed by the name's hash). */
    private static String queueOnNode2(CollCluster c) {
        for (int i = 0; i < 64; i++) {
            String name = "stuck-" + i;
            DsmQueue<String> q = c.node(2).queue(name, Codecs.strings(), 4);
            if (RemotePtr.nodeId(q.handle().root().bodyPtr()) == 2) {
                return name;
            }
        }
        throw new AssertionError("no name of 64 placed its root on node 2");
    }

    /** Node 1 offers into the queue on node 2 and is cut off from it right after its claim. */
    private void strandAClaim() {
        q1.afterClaim = () -> {
            q1.afterClaim = null;
            c.partition(1, 2);
        };
        // the publication fails (over local a dropped verb is reported not sent: nothing was enqueued), and so
        // does the give-back: the slot stays WRITING(t, 1) on node 2
        DsmException e = assertThrows(DsmException.class, () -> q1.offer("lost"));
        assertEquals(1, q1.givingBack().size(), "the claim whose give-back failed is retried: " + q1.givingBack()
                + " (offer failed with " + e + ")");
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aClaimWhosePublicationAndGiveBackFailedIsGivenBackOnceTheNodeAnswers() throws Exception {
        strandAClaim();
        c.heal(1, 2);
        assertTrue(q1.offer("after"));
        // before: node 1 lives and nothing of it was on ticket 0, so this waited 30 s and returned null
        assertEquals("after", q2.poll(30, TimeUnit.SECONDS));
        assertEquals(null, q2.poll());
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!q1.givingBack().isEmpty() && System.nanoTime() - until < 0) {
            Thread.sleep(10);
        }
        assertTrue(q1.givingBack().isEmpty(), "still giving back " + q1.givingBack());
        // the ring goes on past the recovered slot, a lap and more
        for (int i = 0; i < 10; i++) {
            assertTrue(q1.offer("x" + i));
            assertEquals("x" + i, q2.poll());
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aPollWaitingForASlotALiveNodeHoldsEndsByItsBoundOrAnInterrupt() throws Exception {
        strandAClaim();
        // node 1 stays cut off: its give-back cannot reach the slot; node 2 sees it live
        CompletableFuture<Object> bounded = new CompletableFuture<>();
        Thread poller = new Thread(() -> {
            try {
                bounded.complete(q2.poll());
            } catch (Throwable t) {
                bounded.complete(t);
            }
        }, "test-poller");
        poller.setDaemon(true); // before: it never ended, and no interrupt stopped it
        poller.start();
        Object r = bounded.get(60, TimeUnit.SECONDS);
        QueueSlotBusyException busy = assertInstanceOf(QueueSlotBusyException.class, r);
        assertEquals(1, busy.holder(), busy.getMessage());
        assertEquals(false, busy.interrupted());
        assertEquals(false, busy.mayHaveRun());
        assertTrue(busy.getMessage().contains("WRITING"), busy.getMessage());

        // an interrupt ends the wait at once, and its status is kept
        CountDownLatch started = new CountDownLatch(1);
        AtomicReference<Object> ended = new AtomicReference<>();
        AtomicReference<Boolean> status = new AtomicReference<>();
        Thread interrupted = new Thread(() -> {
            started.countDown();
            try {
                ended.set(q2.poll());
            } catch (Throwable t) {
                ended.set(t);
            }
            status.set(Thread.currentThread().isInterrupted());
        }, "test-interrupted-poller");
        interrupted.setDaemon(true);
        interrupted.start();
        started.await();
        interrupted.interrupt();
        interrupted.join(60_000);
        assertTrue(!interrupted.isAlive(), "the interrupted poll() is still waiting");
        QueueSlotBusyException byInterrupt = assertInstanceOf(QueueSlotBusyException.class, ended.get());
        assertTrue(byInterrupt.interrupted(), byInterrupt.getMessage());
        assertEquals(Boolean.TRUE, status.get(), "poll() must keep the interrupt status");

        // take() waits, interruptibly
        AtomicReference<Throwable> takeEnded = new AtomicReference<>();
        Thread taker = new Thread(() -> {
            try {
                takeEnded.set(new AssertionError("took " + q2.take()));
            } catch (Throwable t) {
                takeEnded.set(t);
            }
        }, "test-taker");
        taker.setDaemon(true);
        taker.start();
        Thread.sleep(100);
        taker.interrupt();
        taker.join(60_000);
        assertNotNull(takeEnded.get(), "take() is still waiting");
        assertInstanceOf(InterruptedException.class, takeEnded.get());

        // once node 1 reaches its queue again, the slot is given back and the ring goes on
        c.heal(1, 2);
        assertTrue(q1.offer("after"));
        assertEquals("after", q2.poll(30, TimeUnit.SECONDS));
    }

    /**
     * The consumer's side: a poll whose claim ran and whose emptying and give-back failed
     * left {@code READING(t, consumer)}; a producer a lap later waited for it without end.
     * Once the consumer reaches the queue again it gives the element back
     * ({@code FULL(t + capacity)}): delivered again, once, after the elements offered since.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aConsumersStrandedClaimIsGivenBackAndItsElementDeliveredAgain() throws Exception {
        assertTrue(q2.offer("a"));
        q1.afterClaim = () -> {
            q1.afterClaim = null;
            c.partition(1, 2);
        };
        DsmException e = assertThrows(DsmException.class, q1::poll);
        assertTrue(e.mayHaveRun(), "the claim ran: " + e);
        assertEquals(1, q1.givingBack().size(), "the claim whose give-back failed is retried: "
                + q1.givingBack());
        c.heal(1, 2);
        assertTrue(q2.offer("b"));
        assertTrue(q2.offer("c"));
        assertTrue(q2.offer("d"));
        // ticket 4 is slot 0, held READING by node 1: before, this offer waited for it without end
        CompletableFuture<Object> fifth = new CompletableFuture<>();
        Thread producer = new Thread(() -> {
            try {
                fifth.complete(q2.offer("e"));
            } catch (Throwable t) {
                fifth.complete(t);
            }
        }, "test-producer");
        producer.setDaemon(true);
        producer.start();
        assertEquals(Boolean.FALSE, fifth.get(60, TimeUnit.SECONDS), "the ring is full once 'a' is back");
        java.util.List<String> drained = new java.util.ArrayList<>();
        q2.drainTo(drained);
        assertEquals(java.util.List.of("b", "c", "d", "a"), drained);
        // the give-back's CAS has landed ('a' is back); its task forgets the claim once the CAS answered
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!q1.givingBack().isEmpty() && System.nanoTime() - until < 0) {
            Thread.sleep(10);
        }
        assertTrue(q1.givingBack().isEmpty(), "still giving back " + q1.givingBack());
    }
}
