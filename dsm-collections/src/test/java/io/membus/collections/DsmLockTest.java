package io.membus.collections;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DsmLockTest {

    @Test
    void reentrantWithOneTokenPerAcquisition() {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmLock a = c.node(1).lock("l");
            DsmLock b = c.node(2).lock("l");
            long t1 = a.lockWithToken();
            assertEquals(1, t1);
            assertTrue(a.tryLock(), "reentrant");
            assertEquals(2, a.getHoldCount());
            assertEquals(t1, a.token());
            assertEquals(1, b.holderNode());
            assertFalse(b.tryLock());
            a.unlock();
            assertTrue(a.isLocked(), "one hold left");
            a.unlock();
            assertFalse(a.isLocked());
            assertEquals(0, a.getHoldCount());
            long t2 = b.lockWithToken();
            assertEquals(2, t2);
            b.unlock();
            assertEquals(3, a.lockWithToken());
            a.unlock();
            assertEquals(3, b.lastToken());
        }
    }

    @Test
    void unlockByNonHolderIsIllegalMonitorState() throws Exception {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmLock a = c.node(1).lock("l");
            assertThrows(IllegalMonitorStateException.class, a::unlock);
            assertThrows(IllegalMonitorStateException.class, a::token);
            a.lock();
            CompletableFuture<Throwable> other = CompletableFuture.supplyAsync(() -> {
                try {
                    a.unlock();
                    return null;
                } catch (Throwable t) {
                    return t;
                }
            });
            assertInstanceOf(IllegalMonitorStateException.class, other.get(30, TimeUnit.SECONDS));
            assertTrue(a.isHeldByCurrentThread());
            a.unlock();
            assertThrows(UnsupportedOperationException.class, a::newCondition);
        }
    }

    @Test
    void timedTryLockTimesOutAndSucceedsWhenReleased() throws Exception {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmLock a = c.node(1).lock("l");
            DsmLock b = c.node(2).lock("l");
            a.lock();
            assertFalse(b.tryLock(50, TimeUnit.MILLISECONDS));
            assertFalse(b.tryLock(0, TimeUnit.MILLISECONDS));
            // a thread of the same node waits on the local gate
            assertFalse(CompletableFuture.supplyAsync(() -> {
                try {
                    return a.tryLock(20, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            }).get(30, TimeUnit.SECONDS));
            CompletableFuture<Long> waiter = CompletableFuture.supplyAsync(() -> {
                try {
                    assertTrue(b.tryLock(60, TimeUnit.SECONDS));
                    long t = b.token();
                    b.unlock();
                    return t;
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            });
            a.unlock();
            assertEquals(2, waiter.get(60, TimeUnit.SECONDS));
        }
    }

    @Test
    void lockInterruptiblyThrowsWhenInterruptedWhileWaitingAndLockKeepsTheInterrupt() throws Exception {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmLock a = c.node(1).lock("l");
            DsmLock b = c.node(2).lock("l");
            a.lock();
            AtomicReference<Throwable> seen = new AtomicReference<>();
            CountDownLatch started = new CountDownLatch(1);
            Thread t = new Thread(() -> {
                started.countDown();
                try {
                    b.lockInterruptibly();
                    seen.set(new AssertionError("acquired a held lock"));
                } catch (InterruptedException e) {
                    seen.set(e);
                }
            });
            t.start();
            started.await();
            t.interrupt();
            t.join(30_000);
            assertFalse(t.isAlive());
            assertInstanceOf(InterruptedException.class, seen.get());
            assertEquals(0, b.getHoldCount());
            // already interrupted: throws at once
            Thread.currentThread().interrupt();
            assertThrows(InterruptedException.class, () -> b.tryLock(1, TimeUnit.SECONDS));
            assertFalse(Thread.interrupted());
            // lock() is not interruptible, and keeps the interrupt status
            AtomicReference<Boolean> flag = new AtomicReference<>();
            Thread u = new Thread(() -> {
                b.lock();
                flag.set(Thread.currentThread().isInterrupted());
                b.unlock();
            });
            u.start();
            await().atMost(Duration.ofSeconds(30)).until(() -> u.getState() == Thread.State.TIMED_WAITING
                    || u.getState() == Thread.State.WAITING);
            u.interrupt();
            a.unlock();
            u.join(30_000);
            assertEquals(Boolean.TRUE, flag.get());
        }
    }

    /** The holder's node is declared dead: a waiter breaks the lock with a larger token; the old holder's unlock fails. */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void aDeadHoldersLockIsBrokenWithALargerToken(String transport) throws Exception {
        try (CollCluster c = new CollCluster(transport, 3)) {
            int rootNode = c.node(1).lock("ledger").root().block().nodeId();
            int holder = rootNode == 1 ? 2 : 1;
            int waiter = 6 - rootNode - holder;
            DsmLock h = c.node(holder).lock("ledger");
            DsmLock w = c.node(waiter).lock("ledger");
            long held = h.lockWithToken();
            CompletableFuture<Long> next = CompletableFuture.supplyAsync(() -> {
                try {
                    assertTrue(w.tryLock(60, TimeUnit.SECONDS));
                    return w.token();
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            });
            assertThrows(java.util.concurrent.TimeoutException.class, () -> next.get(100, TimeUnit.MILLISECONDS));
            c.forget(holder);
            long broken = next.get(60, TimeUnit.SECONDS);
            assertTrue(broken > held, "token " + broken + " after " + held);
            assertEquals(waiter, w.holderNode());
            LockLostException lost = assertThrows(LockLostException.class, h::unlock);
            assertEquals(held, lost.token());
            assertEquals(broken, lost.currentToken());
            assertEquals(0, h.getHoldCount(), "the local hold is released");
            assertTrue(w.isLocked(), "the new holder keeps the lock");
        }
    }

    /** A node restarted with the same id finds its earlier incarnation's hold and breaks it. */
    @Test
    void anEarlierIncarnationsHoldIsBroken() {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmLock first = c.node(1).lock("l");
            long t = first.lockWithToken();
            // a new handle for the same node: what the restarted process opens
            DsmLock restarted = new DsmCollections(c.node(1).memory(), c.node(1).allocator(), c.directory).lock("l");
            assertTrue(restarted.tryLock());
            assertEquals(t + 1, restarted.token());
            restarted.unlock();
        }
    }

    /**
     * Threads on three nodes take the lock many times and do an unprotected
     * read-then-write on a shared counter inside: the count is exact, and holders
     * never overlap in token order (each exit precedes the next token's entry).
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void holdersNeverOverlapAndTokensGrow(String transport) throws Exception {
        try (CollCluster c = new CollCluster(transport, 3)) {
            int threads = 6;
            int per = 150;
            AtomicLong clock = new AtomicLong();
            List<long[]> sections = java.util.Collections.synchronizedList(new ArrayList<>());
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            try {
                List<Callable<Void>> tasks = new ArrayList<>();
                for (int i = 0; i < threads; i++) {
                    DsmLock lock = c.node(1 + i % 3).lock("mutex");
                    DsmAtomicLong counter = c.node(1 + i % 3).atomicLong("unprotected");
                    tasks.add(() -> {
                        for (int k = 0; k < per; k++) {
                            long token = lock.lockWithToken();
                            long enter = clock.incrementAndGet();
                            try {
                                counter.set(counter.get() + 1);
                            } finally {
                                long exit = clock.incrementAndGet();
                                sections.add(new long[] {token, enter, exit});
                                lock.unlock();
                            }
                        }
                        return null;
                    });
                }
                for (Future<Void> f : pool.invokeAll(tasks, 120, TimeUnit.SECONDS)) {
                    assertFalse(f.isCancelled(), "a task did not finish in time");
                    f.get();
                }
            } finally {
                pool.shutdownNow();
            }
            assertEquals((long) threads * per, c.node(1).atomicLong("unprotected").get());
            assertNoOverlap(sections);
            assertEquals((long) threads * per, c.node(2).lock("mutex").lastToken());
        }
    }

    /** The checker: sorted by token, every section ends before the next token's begins; tokens distinct. */
    static void assertNoOverlap(List<long[]> sections) {
        List<long[]> sorted = new ArrayList<>(sections);
        sorted.sort(Comparator.comparingLong(s -> s[0]));
        for (int i = 1; i < sorted.size(); i++) {
            long[] prev = sorted.get(i - 1);
            long[] cur = sorted.get(i);
            assertNotEquals(prev[0], cur[0], "token " + cur[0] + " handed out twice");
            assertTrue(prev[2] < cur[1], "token " + prev[0] + " [" + prev[1] + ", " + prev[2] + "] overlaps token "
                    + cur[0] + " [" + cur[1] + ", " + cur[2] + "]");
        }
    }

    /** The checker catches a planted overlap and a duplicated token. */
    @Test
    void theOverlapCheckerCatchesPlantedBugs() {
        assertThrows(AssertionError.class, () -> assertNoOverlap(List.of(new long[] {1, 1, 4}, new long[] {2, 3, 5})));
        assertThrows(AssertionError.class, () -> assertNoOverlap(List.of(new long[] {1, 1, 2}, new long[] {1, 3, 4})));
        assertNoOverlap(List.of(new long[] {2, 3, 4}, new long[] {1, 1, 2}));
    }
}
