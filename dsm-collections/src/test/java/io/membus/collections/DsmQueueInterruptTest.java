package io.membus.collections;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The {@code BlockingQueue} and {@code Lock} interrupt contracts over a network path:
 * a thread blocked in {@code take}, {@code poll(timeout)}, {@code put},
 * {@code offer(timeout)} or {@code lockInterruptibly} and interrupted at a random
 * moment — waiting between looks, or in the middle of a verb — ends with
 * {@link InterruptedException} (its interrupt status cleared), and no element is
 * lost or duplicated: every element whose {@code put} returned is taken exactly once,
 * in order, and the one whose {@code put} threw is not in the queue. Seeded: replay
 * with {@code -Dmembus.seed=}.
 */
class DsmQueueInterruptTest {
    static final long SEED = Long.getLong("membus.seed", System.nanoTime());
    static final int TRIES = 40;
    static final int ELEMENTS = 40;

    enum Mode { TAKE, TIMED_POLL, PUT, TIMED_OFFER }

    @ParameterizedTest
    @ValueSource(strings = {"local", "tcp"})
    void anInterruptedBlockedCallThrowsInterruptedExceptionAndLosesOrDuplicatesNothing(String transport) {
        System.out.println("DsmQueueInterruptTest seed=" + SEED + " (replay with -Dmembus.seed=" + SEED + ")");
        try (CollCluster c = new CollCluster(transport, 3)) {
            for (int i = 0; i < TRIES; i++) {
                Mode mode = Mode.values()[i % Mode.values().length];
                SplittableRandom r = new SplittableRandom(SEED + i);
                String where = transport + " try " + i + " " + mode + " seed=" + SEED;
                String name = "q" + i;
                assertTimeoutPreemptively(Duration.ofSeconds(60), () -> {
                    if (mode == Mode.TAKE || mode == Mode.TIMED_POLL) {
                        consumerTry(c, name, mode, r, where);
                    } else {
                        producerTry(c, name, mode, r, where);
                    }
                }, where);
            }
        }
    }

    /** A consumer on node 2 takes what node 3 puts; it is interrupted at a random moment. */
    private static void consumerTry(CollCluster c, String name, Mode mode, SplittableRandom r, String where)
            throws Exception {
        DsmQueue<Integer> q1 = c.node(1).queue(name, Integer.class, 4);
        DsmQueue<Integer> q2 = c.node(2).queue(name, Integer.class, 4);
        DsmQueue<Integer> q3 = c.node(3).queue(name, Integer.class, 4);
        long producerSeed = r.nextLong();
        List<Integer> taken = new ArrayList<>();
        AtomicReference<Throwable> ended = new AtomicReference<>();
        AtomicBoolean statusAfter = new AtomicBoolean();
        Thread consumer = new Thread(() -> {
            try {
                while (true) {
                    Integer v = mode == Mode.TAKE ? q2.take() : q2.poll(10, TimeUnit.SECONDS);
                    if (v == null) {
                        throw new AssertionError("poll(10 s) returned null while a producer was putting");
                    }
                    taken.add(v);
                }
            } catch (Throwable t) {
                statusAfter.set(Thread.currentThread().isInterrupted());
                ended.set(t);
            }
        }, "consumer");
        AtomicReference<Throwable> producerFailure = new AtomicReference<>();
        Thread producer = new Thread(() -> {
            SplittableRandom pr = new SplittableRandom(producerSeed);
            try {
                for (int v = 0; v < ELEMENTS; v++) {
                    q3.put(v);
                    LockSupport.parkNanos(pr.nextLong(2_000_000));
                }
            } catch (Throwable t) {
                producerFailure.set(t);
            }
        }, "producer");
        consumer.start();
        producer.start();
        LockSupport.parkNanos(r.nextLong(20_000_000));
        consumer.interrupt();
        consumer.join(30_000);
        assertFalse(consumer.isAlive(), where + ": the interrupted consumer is still running");
        if (!(ended.get() instanceof InterruptedException)) {
            throw new AssertionError(where + ": the interrupted consumer ended with " + ended.get()
                    + " instead of InterruptedException", ended.get());
        }
        assertFalse(statusAfter.get(), where + ": InterruptedException left the interrupt status set");
        // the rest, from another node (the producer may be blocked on a full ring until then)
        List<Integer> rest = new ArrayList<>();
        while (producer.isAlive() || !q1.isEmpty()) {
            Integer v = q1.poll(20, TimeUnit.MILLISECONDS);
            if (v != null) {
                rest.add(v);
            }
        }
        producer.join();
        assertNull(producerFailure.get(), where + ": the producer failed: " + producerFailure.get());
        List<Integer> all = new ArrayList<>(taken);
        all.addAll(rest);
        assertEquals(range(ELEMENTS), all, where + ": taken " + taken + " then " + rest);
    }

    /** A producer on node 2 puts 0, 1, 2, ... while node 3 takes; it is interrupted at a random moment. */
    private static void producerTry(CollCluster c, String name, Mode mode, SplittableRandom r, String where)
            throws Exception {
        DsmQueue<Integer> q1 = c.node(1).queue(name, Integer.class, 4);
        DsmQueue<Integer> q2 = c.node(2).queue(name, Integer.class, 4);
        DsmQueue<Integer> q3 = c.node(3).queue(name, Integer.class, 4);
        long consumerSeed = r.nextLong();
        AtomicInteger returned = new AtomicInteger();
        AtomicReference<Throwable> ended = new AtomicReference<>();
        AtomicBoolean statusAfter = new AtomicBoolean();
        Thread producer = new Thread(() -> {
            try {
                for (int v = 0; ; v++) {
                    if (mode == Mode.PUT) {
                        q2.put(v);
                    } else if (!q2.offer(v, 10, TimeUnit.SECONDS)) {
                        throw new AssertionError("offer(10 s) found no room while a consumer was taking");
                    }
                    returned.set(v + 1);
                }
            } catch (Throwable t) {
                statusAfter.set(Thread.currentThread().isInterrupted());
                ended.set(t);
            }
        }, "producer");
        List<Integer> taken = new ArrayList<>();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> consumerFailure = new AtomicReference<>();
        Thread consumer = new Thread(() -> {
            SplittableRandom cr = new SplittableRandom(consumerSeed);
            try {
                while (!stop.get()) {
                    Integer v = q3.poll(5, TimeUnit.MILLISECONDS);
                    if (v != null) {
                        taken.add(v);
                    }
                    LockSupport.parkNanos(cr.nextLong(2_000_000));
                }
            } catch (Throwable t) {
                consumerFailure.set(t);
            }
        }, "consumer");
        producer.start();
        consumer.start();
        LockSupport.parkNanos(r.nextLong(20_000_000));
        producer.interrupt();
        producer.join(30_000);
        assertFalse(producer.isAlive(), where + ": the interrupted producer is still running");
        stop.set(true);
        consumer.join(30_000);
        assertNull(consumerFailure.get(), where + ": the consumer failed: " + consumerFailure.get());
        if (!(ended.get() instanceof InterruptedException)) {
            throw new AssertionError(where + ": the interrupted producer ended with " + ended.get()
                    + " instead of InterruptedException", ended.get());
        }
        assertFalse(statusAfter.get(), where + ": InterruptedException left the interrupt status set");
        List<Integer> all = new ArrayList<>(taken);
        Integer v;
        while ((v = q1.poll()) != null) {
            all.add(v);
        }
        assertEquals(range(returned.get()), all, where + ": " + returned.get() + " puts returned; taken " + all);
        assertTrue(q2.isEmpty());
    }

    /**
     * A non-blocking {@code poll()} on another node returns promptly after a producer
     * was interrupted at a random moment in {@code put}: the producer never leaves its
     * slot claimed (before, a claim abandoned by an interrupt in a verb held the head
     * until the producer's node was taken for dead, and every poll() waited for it).
     * 20 tries over tcp; each poll() must return within 10 s (no fault: it takes a few
     * round trips).
     */
    @org.junit.jupiter.api.Test
    void aPollDoesNotWaitForAProducerThatWasInterrupted() throws Exception {
        System.out.println("DsmQueueInterruptTest seed=" + SEED + " (replay with -Dmembus.seed=" + SEED + ")");
        try (CollCluster c = new CollCluster("tcp", 3)) {
            java.util.concurrent.ExecutorService pollers = java.util.concurrent.Executors.newSingleThreadExecutor();
            try {
                for (int i = 0; i < TRIES / 2; i++) {
                    SplittableRandom r = new SplittableRandom(SEED + 2000 + i);
                    String where = "tcp poll try " + i + " seed=" + SEED;
                    String name = "p" + i;
                    DsmQueue<Integer> q1 = c.node(1).queue(name, Integer.class, 64);
                    DsmQueue<Integer> q2 = c.node(2).queue(name, Integer.class, 64);
                    AtomicInteger returned = new AtomicInteger();
                    Thread producer = new Thread(() -> {
                        try {
                            for (int v = 0; v < 60; v++) {
                                q2.put(v);
                                returned.set(v + 1);
                            }
                        } catch (Throwable t) {
                            // InterruptedException (or, before, a DsmException): either way it stops here
                        }
                    }, "producer");
                    producer.start();
                    LockSupport.parkNanos(r.nextLong(10_000_000));
                    producer.interrupt();
                    producer.join(30_000);
                    assertFalse(producer.isAlive(), where);
                    List<Integer> all = new ArrayList<>();
                    while (true) {
                        java.util.concurrent.Future<Integer> f = pollers.submit(() -> q1.poll());
                        Integer v;
                        try {
                            v = f.get(10, TimeUnit.SECONDS);
                        } catch (java.util.concurrent.TimeoutException e) {
                            throw new AssertionError(where + ": poll() did not return within 10 s after "
                                    + all + " (" + returned.get() + " puts returned)");
                        }
                        if (v == null) {
                            break;
                        }
                        all.add(v);
                    }
                    assertEquals(range(returned.get()), all, where);
                }
            } finally {
                pollers.shutdownNow();
            }
        }
    }

    /**
     * The same for {@link DsmLock}: a thread on node 2 that takes the lock again and
     * again ({@code lockInterruptibly}, {@code tryLock(10 s)}) against a holder on node
     * 3, interrupted at a random moment, ends with {@link InterruptedException} and does
     * not hold the lock; mutual exclusion held throughout, and node 1 can take it after.
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "tcp"})
    void anInterruptedLockAcquisitionThrowsInterruptedExceptionAndLeavesTheLockFree(String transport) {
        System.out.println("DsmQueueInterruptTest seed=" + SEED + " (replay with -Dmembus.seed=" + SEED + ")");
        try (CollCluster c = new CollCluster(transport, 3)) {
            for (int i = 0; i < TRIES / 2; i++) {
                SplittableRandom r = new SplittableRandom(SEED + 1000 + i);
                int kind = i % 3;
                String where = transport + " lock try " + i
                        + (kind == 0 ? " lockInterruptibly" : kind == 1 ? " tryLock(10 s)" : " lock()") + " seed=" + SEED;
                String name = "l" + i;
                assertTimeoutPreemptively(Duration.ofSeconds(60), () -> lockTry(c, name, kind, r, where), where);
            }
        }
    }

    /** kind 0: lockInterruptibly, 1: tryLock(10 s), 2: lock(), which an interrupt must not stop (the status is kept). */
    private static void lockTry(CollCluster c, String name, int kind, SplittableRandom r, String where)
            throws Exception {
        DsmLock l1 = c.node(1).lock(name);
        DsmLock l2 = c.node(2).lock(name);
        DsmLock l3 = c.node(3).lock(name);
        AtomicInteger inside = new AtomicInteger();
        AtomicReference<String> overlap = new AtomicReference<>();
        AtomicBoolean stop = new AtomicBoolean();
        long holderSeed = r.nextLong();
        AtomicReference<Throwable> holderFailure = new AtomicReference<>();
        Thread holder = new Thread(() -> {
            SplittableRandom hr = new SplittableRandom(holderSeed);
            try {
                while (!stop.get()) {
                    l3.lock();
                    try {
                        if (inside.incrementAndGet() != 1) {
                            overlap.set("node 3 and node 2 held the lock at once");
                        }
                        LockSupport.parkNanos(hr.nextLong(2_000_000));
                        inside.decrementAndGet();
                    } finally {
                        l3.unlock();
                    }
                    LockSupport.parkNanos(hr.nextLong(1_000_000));
                }
            } catch (Throwable t) {
                holderFailure.set(t);
            }
        }, "holder");
        AtomicReference<Throwable> ended = new AtomicReference<>();
        AtomicBoolean statusAfter = new AtomicBoolean();
        AtomicBoolean heldAfter = new AtomicBoolean();
        AtomicBoolean interrupted = new AtomicBoolean();
        AtomicInteger stopVictim = new AtomicInteger(20); // lock(): 20 more acquisitions once interrupted
        Thread victim = new Thread(() -> {
            try {
                while (kind != 2 || !interrupted.get() || !Thread.currentThread().isInterrupted()
                        || stopVictim.decrementAndGet() > 0) {
                    if (kind == 2) {
                        l2.lock();
                    } else if (kind == 1) {
                        if (!l2.tryLock(10, TimeUnit.SECONDS)) {
                            throw new AssertionError("tryLock(10 s) failed against a holder that lets go every 2 ms");
                        }
                    } else {
                        l2.lockInterruptibly();
                    }
                    try {
                        if (inside.incrementAndGet() != 1) {
                            overlap.set("node 2 and node 3 held the lock at once");
                        }
                        inside.decrementAndGet();
                    } finally {
                        l2.unlock();
                    }
                }
                // lock(): acquisitions went on after the interrupt, none stopped by it, and it is still pending
                statusAfter.set(Thread.interrupted());
                heldAfter.set(l2.isHeldByCurrentThread());
            } catch (Throwable t) {
                statusAfter.set(Thread.currentThread().isInterrupted());
                heldAfter.set(l2.isHeldByCurrentThread());
                ended.set(t);
            }
        }, "victim");
        holder.start();
        victim.start();
        LockSupport.parkNanos(r.nextLong(20_000_000));
        interrupted.set(true);
        victim.interrupt();
        victim.join(30_000);
        assertFalse(victim.isAlive(), where + ": the interrupted thread is still running");
        stop.set(true);
        holder.join(30_000);
        assertNull(holderFailure.get(), where + ": the holder failed: " + holderFailure.get());
        if (kind == 2) {
            if (ended.get() != null) {
                throw new AssertionError(where + ": an interrupt stopped lock() with " + ended.get(), ended.get());
            }
            assertTrue(statusAfter.get(), where + ": lock() lost the interrupt status");
        } else {
            if (!(ended.get() instanceof InterruptedException)) {
                throw new AssertionError(where + ": the interrupted thread ended with " + ended.get()
                        + " instead of InterruptedException", ended.get());
            }
            assertFalse(statusAfter.get(), where + ": InterruptedException left the interrupt status set");
        }
        assertFalse(heldAfter.get(), where + ": the interrupted thread holds the lock");
        assertNull(overlap.get(), where);
        assertTrue(l1.tryLock(10, TimeUnit.SECONDS), where + ": node 1 could not take the lock after");
        l1.unlock();
    }

    private static List<Integer> range(int n) {
        List<Integer> l = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            l.add(i);
        }
        return l;
    }
}
