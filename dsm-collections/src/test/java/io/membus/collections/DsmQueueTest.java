package io.membus.collections;

import io.membus.core.error.DsmException;
import io.membus.codec.Codecs;
import io.membus.core.RemoteMemory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DsmQueueTest {

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void fifoAcrossNodesWithInlineAndLargeElements(String transport) {
        try (CollCluster c = new CollCluster(transport, 3)) {
            DsmQueue<String> q1 = c.node(1).queue("jobs", String.class, 4);
            DsmQueue<String> q2 = c.node(2).queue("jobs", String.class, 4);
            DsmQueue<String> q3 = c.node(3).queue("jobs", String.class, 4);
            String large = "x".repeat(500);
            assertTrue(q1.isEmpty());
            assertTrue(q1.offer("a"));
            assertTrue(q2.offer(large));
            assertTrue(q3.offer("c"));
            assertTrue(q1.offer("d"));
            assertFalse(q2.offer("e"), "full");
            assertThrows(IllegalStateException.class, () -> q3.add("e"));
            assertEquals(4, q3.size());
            assertEquals(0, q1.remainingCapacity());
            assertEquals("a", q3.peek());
            assertEquals(List.of("a", large, "c", "d"), new ArrayList<>(q2));
            assertEquals("a", q2.poll());
            assertEquals(large, q3.poll());
            assertTrue(q1.offer("e"));
            assertTrue(q2.offer("f"));
            assertEquals("c", q1.remove());
            assertEquals("d", q1.element());
            List<String> drained = new ArrayList<>();
            assertEquals(2, q3.drainTo(drained, 2));
            assertEquals(List.of("d", "e"), drained);
            assertEquals(1, q1.drainTo(drained));
            assertEquals(List.of("d", "e", "f"), drained);
            assertNull(q2.poll());
            assertNull(q2.peek());
            assertThrows(NoSuchElementException.class, q2::remove);
            assertThrows(NullPointerException.class, () -> q1.offer(null));
            assertThrows(IllegalArgumentException.class, () -> q1.drainTo(q1));
            // every large element's block was freed: many laps of large elements fit a small heap
            for (int i = 0; i < 200; i++) {
                assertTrue(q1.offer(large + i));
                assertEquals(large + i, q2.poll());
            }
        }
    }

    @Test
    void timedOfferAndPollTimeOutAndBlockedCallsWakeUp() throws Exception {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmQueue<Long> a = c.node(1).queue("q", Long.class, 2);
            DsmQueue<Long> b = c.node(2).queue("q", Long.class, 2);
            assertNull(a.poll(30, TimeUnit.MILLISECONDS));
            a.put(1L);
            a.put(2L);
            assertFalse(b.offer(3L, 30, TimeUnit.MILLISECONDS));
            CompletableFuture<Void> putter = CompletableFuture.runAsync(() -> {
                try {
                    b.put(3L);
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            });
            assertEquals(1L, a.take());
            putter.get(60, TimeUnit.SECONDS);
            assertEquals(2L, b.take());
            assertEquals(3L, a.take());
            CompletableFuture<Long> taker = CompletableFuture.supplyAsync(() -> {
                try {
                    return b.take();
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            });
            a.put(4L);
            assertEquals(4L, taker.get(60, TimeUnit.SECONDS));
        }
    }

    @Test
    void blockedTakeAndPutAreInterruptible() throws Exception {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmQueue<String> q = c.node(1).queue("q", String.class, 1);
            AtomicReference<Throwable> seen = new AtomicReference<>();
            CountDownLatch started = new CountDownLatch(1);
            Thread taker = new Thread(() -> {
                started.countDown();
                try {
                    q.take();
                } catch (Throwable t) {
                    seen.set(t);
                }
            });
            taker.start();
            started.await();
            await().atMost(Duration.ofSeconds(30)).until(() -> taker.getState() == Thread.State.TIMED_WAITING);
            taker.interrupt();
            taker.join(30_000);
            assertInstanceOf(InterruptedException.class, seen.get());
            q.put("x");
            Thread.currentThread().interrupt();
            assertThrows(InterruptedException.class, () -> q.put("y"));
            Thread.currentThread().interrupt();
            assertThrows(InterruptedException.class, () -> q.poll(1, TimeUnit.SECONDS));
            assertFalse(Thread.interrupted());
            assertEquals("x", q.poll());
        }
    }

    /** A put blocked on a full ring (asleep, waiting for a wake-up) ends with InterruptedException and enqueues nothing. */
    @Test
    void aPutAsleepOnAFullRingIsInterruptedAndFreesItsLargeElement() throws Exception {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmQueue<String> q = c.node(1).queue("q", String.class, 1);
            q.put("only");
            String large = "L".repeat(400);
            AtomicReference<Throwable> seen = new AtomicReference<>();
            Thread putter = new Thread(() -> {
                try {
                    c.node(2).queue("q", String.class, 1).put(large);
                } catch (Throwable t) {
                    seen.set(t);
                }
            });
            putter.start();
            long waiters = q.root().bodyPtr() + QueueDescriptor.PUT_WAITERS_OFFSET;
            await().atMost(Duration.ofSeconds(30)).until(() -> (c.node(1).memory().readLong(waiters) & 4L) != 0
                    && putter.getState() == Thread.State.TIMED_WAITING);
            putter.interrupt();
            putter.join(30_000);
            assertInstanceOf(InterruptedException.class, seen.get());
            assertEquals(1, q.size());
            assertEquals("only", q.poll());
            assertNull(q.poll(), "the interrupted put enqueued nothing");
            for (int i = 0; i < 300; i++) {
                q.put(large + i);
                assertEquals(large + i, q.take());
            }
        }
    }

    @Test
    void iteratorIsWeaklyConsistentAndRemoves() {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmQueue<String> q = c.node(1).queue("q", String.class, 8);
            DsmQueue<String> other = c.node(2).queue("q", String.class, 8);
            for (String s : List.of("a", "b", "c", "d")) {
                q.add(s);
            }
            Iterator<String> it = q.iterator();
            assertThrows(IllegalStateException.class, it::remove);
            assertEquals("a", it.next());
            assertEquals("b", it.next());
            it.remove();
            assertThrows(IllegalStateException.class, it::remove);
            assertEquals("a", other.poll(), "taken behind the iterator's back");
            assertEquals("c", it.next());
            assertEquals("d", it.next());
            assertFalse(it.hasNext());
            assertEquals(List.of("c", "d"), new ArrayList<>(other));
            assertTrue(other.remove("d"));
            assertFalse(other.remove("zz"));
            assertEquals(1, q.size());
            assertEquals("c", q.poll());
            assertNull(q.poll(), "the removed tickets are skipped");
            q.add("e");
            assertEquals("e", other.poll());
        }
    }

    @Test
    void typeChecksNameBothTypes() {
        try (CollCluster c = new CollCluster("local", 2)) {
            c.node(1).queue("q", String.class, 8);
            CollectionTypeMismatchException e = assertThrows(CollectionTypeMismatchException.class,
                    () -> c.node(2).queue("q", Long.class, 8));
            assertEquals("QUEUE queue(capacity=8,codec=" + Codecs.strings().id() + ")", e.existing());
            assertEquals("QUEUE queue(capacity=8,codec=" + Codecs.longs().id() + ")", e.requested());
            assertThrows(CollectionTypeMismatchException.class, () -> c.node(2).queue("q", String.class, 9));
            assertThrows(CollectionArgumentException.class, () -> c.node(2).queue("z", String.class, 0));
            assertThrows(CollectionArgumentException.class,
                    () -> c.node(2).queue("z", Codecs.strings(), 4, 12));
        }
    }

    /**
     * A producer node claims a slot and dies before publishing: the slot carries no
     * element; consumers go past it and producers reuse it a lap later.
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void aDeadProducersClaimedSlotIsSkipped(String transport) {
        try (CollCluster c = new CollCluster(transport, 3)) {
            int root = c.node(1).queue("q", Long.class, 4).root().block().nodeId();
            int dead = root == 3 ? 2 : 3;
            int live = 6 - root - dead;
            DsmQueue<Long> q = c.node(live).queue("q", Long.class, 4);
            q.add(1L);
            // the dead node claimed ticket 1 (the CAS a producer makes) and then died
            claim(c.node(dead).memory(), q, 1, SlotState.WRITING, dead, SlotState.EMPTY);
            c.forget(dead);
            assertEquals(1L, q.poll());
            q.add(2L);
            assertEquals(2L, q.poll(), "ticket 1 skipped: recovered by the consumer waiting for it");
            for (long i = 3; i < 20; i++) {
                q.add(i);
                assertEquals(i, c.node(root).queue("q", Long.class, 4).poll());
            }
        }
    }

    /**
     * A consumer node claims a slot and dies before emptying it: its element is
     * delivered again (a lap later), once.
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void aDeadConsumersElementIsDeliveredAgainOnce(String transport) {
        try (CollCluster c = new CollCluster(transport, 3)) {
            int root = c.node(1).queue("q", String.class, 4).root().block().nodeId();
            int dead = root == 3 ? 2 : 3;
            int live = 6 - root - dead;
            DsmQueue<String> q = c.node(live).queue("q", String.class, 4);
            q.add("lost-by-dead-consumer");
            claim(c.node(dead).memory(), q, 0, SlotState.READING, dead, SlotState.FULL);
            c.forget(dead);
            List<String> taken = new ArrayList<>();
            for (int i = 1; i <= 6; i++) {
                q.add("e" + i);
                taken.add(q.poll());
            }
            String e;
            while ((e = q.poll()) != null) {
                taken.add(e);
            }
            assertEquals(List.of("e1", "e2", "e3", "lost-by-dead-consumer", "e4", "e5", "e6"), taken);
        }
    }

    /**
     * A consumer node claims the only element and dies, and nothing else is offered:
     * the next poll that finds the queue empty takes the stranded element, once.
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void anElementStrandedByADeadConsumerIsTakenByTheNextPollThatFindsTheQueueEmpty(String transport) {
        try (CollCluster c = new CollCluster(transport, 3)) {
            int root = c.node(1).queue("q", String.class, 4).root().block().nodeId();
            int dead = root == 3 ? 2 : 3;
            int live = 6 - root - dead;
            DsmQueue<String> q = c.node(live).queue("q", String.class, 4);
            q.add("job");
            claim(c.node(dead).memory(), q, 0, SlotState.READING, dead, SlotState.FULL);
            assertNull(c.node(root).queue("q", String.class, 4).poll(), "the holder is alive: nothing to take");
            c.forget(dead);
            assertEquals("job", q.poll());
            assertNull(q.poll());
            assertNull(c.node(root).queue("q", String.class, 4).poll());
            for (int i = 0; i < 10; i++) {
                q.add("after-" + i);
                assertEquals("after-" + i, c.node(root).queue("q", String.class, 4).poll());
            }
        }
    }

    /**
     * A node removing an element from the middle dies in the middle of closing the gap:
     * (a) holding the element ahead (not yet moved) and the gap; (b) holding only the
     * gap. The element ahead stays, the gap is emptied, nothing else changes, and the
     * ring has all its room again.
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void aDeadRemoversSlotsAreRecovered(String transport) {
        try (CollCluster c = new CollCluster(transport, 3)) {
            int root = c.node(1).queue("q", String.class, 4).root().block().nodeId();
            int dead = root == 3 ? 2 : 3;
            int live = 6 - root - dead;
            DsmQueue<String> q = c.node(live).queue("q", String.class, 4);
            q.add("a");
            q.add("b");
            q.add("c");
            // (a) the remover took "c" out (ticket 2) and claimed "b" (ticket 1) to move it up
            claim(c.node(dead).memory(), q, 2, SlotState.MOVING, dead, SlotState.FULL);
            claim(c.node(dead).memory(), q, 1, SlotState.MOVING, dead, SlotState.FULL);
            assertEquals("a", q.poll());
            c.forget(dead);
            assertEquals("b", q.poll(), "the element being moved stays where it was");
            assertNull(q.poll(), "the gap is emptied");
            assertEquals(4, q.remainingCapacity());
            // (b) tickets 3, 4, 5: the remover took "e" (ticket 4) out and died holding only the gap
            q.add("d");
            q.add("e");
            q.add("f");
            claim(c.node(dead).memory(), q, 4, SlotState.MOVING, dead, SlotState.FULL);
            assertEquals(List.of("d", "f"), new ArrayList<>(q));
            assertEquals("d", q.poll());
            assertEquals("f", q.poll());
            assertNull(q.poll());
            for (int i = 0; i < 4; i++) {
                q.add("g" + i);
            }
            assertEquals(0, q.remainingCapacity());
        }
    }

    /**
     * The root's node is down: every offer and poll fails before its claim, and says so
     * (mayHaveRun false: nothing happened, safe to retry), which is what lets a
     * history count it as a failure rather than an operation of unknown outcome.
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void operationsOnAQueueWhoseRootIsDownFailAsNotRun(String transport) {
        try (CollCluster c = new CollCluster(transport, 3)) {
            int root = c.node(1).queue("q", Long.class, 4).root().block().nodeId();
            int live = root == 1 ? 2 : 1;
            DsmQueue<Long> q = c.node(live).queue("q", Long.class, 4);
            q.add(7L);
            c.down(root);
            DsmException offer = assertThrows(DsmException.class, () -> q.offer(8L));
            assertFalse(offer.mayHaveRun(), offer::toString);
            DsmException poll = assertThrows(DsmException.class, q::poll);
            assertFalse(poll.mayHaveRun(), poll::toString);
        }
    }

    /** The CAS a producer or consumer of {@code node} makes on ticket {@code t}'s slot. */
    static void claim(RemoteMemory memory, DsmQueue<?> q, long t, int phase, int node, int fromPhase) {
        long states = q.root().bodyPtr() + QueueDescriptor.STATES_OFFSET;
        long ptr = states + (t % q.capacity()) * 8;
        long from = SlotState.of(t, fromPhase, 0);
        assertEquals(from, memory.compareAndSwap(ptr, from, SlotState.of(t, phase, node)));
    }
}
