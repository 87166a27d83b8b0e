package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Reads in flight held on a blocking lane until their thread waits ({@link LaneFlight}):
 * the waiter sends them in one write and reads their answers itself; a read nobody waits
 * for completes through the fallback reader; the thread's later verbs wait for its held
 * reads (issue order); a refused read fails alone; deadlines and a lost connection fail
 * them with their typed errors.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class LaneFlightTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private final Nodes nodes = new Nodes();
    private final StaticDirectory directory = new StaticDirectory();

    private static final long ptr = RemotePtr.pack(1, 0, 4096);
    private Transport a;
    private Transport b;
    private RemoteMemory memory;
    private TcpConnection ba;

    @AfterEach
    void close() {
        nodes.close();
    }

    /**
     * Node 1 (the target) and node 2 (operation timeout {@code timeout}) with their
     * connection open and {@code bytes(seed)} written at {@link #ptr} by a blocking write,
     * which opens a lane.
     */
    private void pair(Duration timeout, int seed, String... clientProperties) {
        a = nodes.member(1, Duration.ofSeconds(20), directory);
        b = nodes.member(2, timeout, directory, clientProperties);
        memory = new RemoteMemory(b, directory, WAIT);
        ba = Nodes.connection(b, a);
        memory.write(ptr, bytes(seed));
    }

    private static byte[] bytes(int seed) {
        byte[] b = new byte[64];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) (i * 7 + seed);
        }
        return b;
    }

    @Test
    void readsInFlightAreHeldOnALaneAndTheWaiterSendsThemInOneWriteAndReadsTheirAnswers() {
        pair(Duration.ofSeconds(20), 1);
        assertEquals(1, ba.lanesOpen());
        long wakes = VerbPathCounts.clientWakes.sum();
        long writes = VerbPathCounts.flightWrites.sum();
        long polls = VerbPathCounts.flightPolls.sum();
        int rounds = 200;
        for (int r = 0; r < rounds; r++) {
            CompletableFuture<byte[]> first = null;
            CompletableFuture<byte[]> last = null;
            for (int i = 0; i < 16; i++) {
                last = memory.readAsync(ptr, 64);
                if (first == null) {
                    first = last;
                }
            }
            assertInstanceOf(LaneFlight.Flight.class, last, "held on the lane");
            assertArrayEquals(bytes(1), memory.await(last));
            assertTrue(first.isDone(), "completion in issue order");
            assertArrayEquals(bytes(1), first.join());
        }
        long w = VerbPathCounts.flightWrites.sum() - writes;
        long p = VerbPathCounts.flightPolls.sum() - polls;
        System.out.printf("per 16 reads held on a lane: writes=%.2f fallback polls=%.2f I/O-thread wakes=%.2f%n",
                w / (double) rounds, p / (double) rounds, (VerbPathCounts.clientWakes.sum() - wakes)
                        / (double) rounds);
        // the counts are the JVM's: a flight an earlier test left unwaited may be sent by the fallback meanwhile
        assertTrue(w >= rounds && w <= rounds + rounds / 10, "one write per 16 reads, whoever sent them: " + w);
        assertTrue(VerbPathCounts.clientWakes.sum() - wakes <= rounds / 10,
                "the pipelined channel's I/O thread took no part");
    }

    /**
     * {@code tcp.hold-reads = false}: every {@code readAsync} is posted on the pipelined channel as
     * before {@link LaneFlight} (no flight, no write of a flight, nothing registered with
     * {@code WaitHelp}), while blocking verbs still take the lanes; {@code true} (the default) holds them.
     */
    @Test
    void holdReadsFalsePostsEveryReadAsyncOnThePipelinedChannel() {
        pair(Duration.ofSeconds(20), 2, "tcp.hold-reads", "false");
        assertEquals(1, ba.lanesOpen(), "the blocking write still took a lane");
        long wakes = VerbPathCounts.clientWakes.sum();
        for (int r = 0; r < 20; r++) {
            CompletableFuture<byte[]> first = null;
            CompletableFuture<byte[]> last = null;
            for (int i = 0; i < 16; i++) {
                last = memory.readAsync(ptr, 64);
                assertTrue(!(last instanceof LaneFlight.Waiting), "posted, not held: " + last.getClass());
                if (first == null) {
                    first = last;
                }
            }
            assertEquals(0, io.membus.core.transport.WaitHelp.registered(), "no flight registered");
            assertArrayEquals(bytes(2), memory.await(last));
            assertArrayEquals(bytes(2), first.join());
        }
        assertTrue(VerbPathCounts.clientWakes.sum() - wakes > 0, "the pipelined channel's I/O thread carried them");
    }

    @Test
    void holdReadsTrueIsTheDefaultAndHoldsReadAsyncOnALane() {
        pair(Duration.ofSeconds(20), 5, "tcp.hold-reads", "true");
        CompletableFuture<byte[]> f = memory.readAsync(ptr, 64);
        assertInstanceOf(LaneFlight.Flight.class, f, "held on the lane");
        assertArrayEquals(bytes(5), memory.await(f));
        org.junit.jupiter.api.Assertions.assertNull(((LaneFlight.Flight) f).value,
                "the completed future holds the bytes; the read's own field is cleared");
    }

    /**
     * A deferred verb (issued by a callback during a delivery) whose issue throws anything, an {@code Error}
     * included, is failed typed and not sent, and the verbs deferred after it are still issued.
     */
    @Test
    void aDeferredVerbWhoseIssueThrowsIsFailedTypedAndTheRestStillRun() {
        java.util.List<Object> seen = new java.util.ArrayList<>();
        LaneFlight.defer(() -> {
            throw new AssertionError("injected: issuing the deferred verb failed");
        }, seen::add, 7);
        LaneFlight.defer(() -> seen.add("second issued"), e -> seen.add("second refused: " + e), 7);
        LaneFlight.runDeferred();
        assertEquals(2, seen.size(), seen.toString());
        NodeUnavailableException e = assertInstanceOf(NodeUnavailableException.class, seen.get(0));
        assertTrue(!e.mayHaveRun(), "not sent: " + e);
        assertEquals("second issued", seen.get(1));
    }

    /**
     * A read held on a lane when its node's transport closes fails like every other verb refused by a closed
     * transport ({@code DsmClosedException}, not a {@code NodeUnavailableException}), nobody waiting for it.
     */
    @Test
    void closingTheTransportFailsAHeldReadNobodyWaitsForAsClosed() throws Exception {
        pair(Duration.ofSeconds(60), 6);
        a.faults().delay(2, Duration.ofMinutes(5)); // a reader that took it would wait: the close must end it
        try {
            CompletableFuture<byte[]> held = memory.readAsync(ptr, 64);
            assertInstanceOf(LaneFlight.Flight.class, held, "held on the lane");
            b.close();
            long until = System.nanoTime() + WAIT.toNanos();
            while (!held.isDone()) { // polled: the fallback fails it once its lane closed
                assertTrue(System.nanoTime() - until < 0, "the held read failed after the close");
                Thread.sleep(1);
            }
            java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                    held::get);
            assertInstanceOf(io.membus.core.error.DsmClosedException.class, e.getCause());
        } finally {
            a.faults().clear();
        }
    }

    @Test
    void aReadWithACallbackAndNoWaiterIsReadByAFlightReaderThread() throws Exception {
        pair(Duration.ofSeconds(20), 3);
        long readerReads = VerbPathCounts.flightReaderReads.sum();
        long polls = VerbPathCounts.flightPolls.sum();
        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<byte[]> seen = new AtomicReference<>();
        AtomicReference<String> ranOn = new AtomicReference<>();
        CompletableFuture<byte[]> f = memory.readAsync(ptr, 64);
        assertInstanceOf(LaneFlight.Flight.class, f, "held on the lane");
        f.whenComplete((v, e) -> {
            seen.set(v);
            ranOn.set(Thread.currentThread().getName());
            done.countDown();
        });
        assertTrue(done.await(WAIT.toSeconds(), TimeUnit.SECONDS), "the callback ran");
        assertArrayEquals(bytes(3), seen.get());
        // the fallback (the wheel's thread) reads it instead when this thread was descheduled for 0.5 ms before
        // the callback was attached (the callback then runs here, at once), or every flight reader was busy
        assertTrue(VerbPathCounts.flightReaderReads.sum() > readerReads || VerbPathCounts.flightPolls.sum() > polls,
                "read by a flight reader, or by the fallback; the callback ran on " + ranOn.get());
        assertTrue(!ranOn.get().equals(Thread.currentThread().getName()) || VerbPathCounts.flightPolls.sum() > polls,
                "the callback ran on this thread though no fallback read it first");
        assertEquals(Long.valueOf(0), Long.valueOf(memory.readLong(ptr + 64)), "the lane is usable afterwards");
    }

    @Test
    void aReadNobodyWaitsForAndWithoutCallbacksCompletesThroughTheFallbackReader() throws Exception {
        pair(Duration.ofSeconds(20), 4);
        long polls = VerbPathCounts.flightPolls.sum();
        CompletableFuture<byte[]> f = memory.readAsync(ptr, 64);
        assertInstanceOf(LaneFlight.Flight.class, f, "held on the lane");
        long until = System.nanoTime() + WAIT.toNanos();
        while (!f.isDone()) { // polled, never waited for: only the fallback reads it
            assertTrue(System.nanoTime() - until < 0, "the fallback reader completed it");
            Thread.sleep(1);
        }
        assertArrayEquals(bytes(4), f.join());
        assertTrue(VerbPathCounts.flightPolls.sum() > polls, "the fallback reader took the flight over");
    }

    @Test
    void waitingForAFutureMadeFromAHeldReadFinishesItsFlight() {
        pair(Duration.ofSeconds(20), 5);
        CompletableFuture<byte[]> f = memory.readAsync(ptr, 64);
        assertInstanceOf(LaneFlight.Flight.class, f, "held on the lane");
        assertEquals(bytes(5)[63], (byte) f.thenApply(v -> v[63]).join());
    }

    @Test
    void awaitingAFutureNotMadeFromAHeldReadStillFinishesTheThreadsFlight() {
        pair(Duration.ofSeconds(20), 15);
        int byWaiter = 0;
        int rounds = 20;
        for (int r = 0; r < rounds; r++) {
            CompletableFuture<byte[]> f = memory.readAsync(ptr, 64);
            assertInstanceOf(LaneFlight.Flight.class, f, "held on the lane");
            long polls = VerbPathCounts.flightPolls.sum();
            long readerReads = VerbPathCounts.flightReaderReads.sum();
            memory.await(CompletableFuture.allOf(f)); // not made from f (as a routed read's wrapper), no callback on it
            assertArrayEquals(bytes(15), f.join());
            if (VerbPathCounts.flightPolls.sum() == polls && VerbPathCounts.flightReaderReads.sum() == readerReads) {
                byWaiter++;
            }
        }
        // the fallback reads a flight only when this thread was descheduled for 0.5 ms between the read and the
        // wait (or another test's flight was polled meanwhile); without the help every round would go to it
        assertTrue(byWaiter >= rounds / 2, "the waiting thread read the answers in " + byWaiter + " of " + rounds);
    }

    @Test
    void aLaterVerbOfTheThreadRunsAfterItsHeldReads() {
        pair(Duration.ofSeconds(20), 7);
        for (int r = 0; r < 50; r++) {
            CompletableFuture<byte[]> before = memory.readAsync(ptr, 64);
            CompletableFuture<Void> write = memory.writeAsync(ptr, bytes(8 + r), 0, 64); // posted: after the read
            CompletableFuture<byte[]> after = memory.readAsync(ptr, 64);
            assertTrue(before.isDone(), "the held read finished before the posted write was issued");
            assertArrayEquals(bytes(7 + r), before.join(), "the read issued before the write does not see it");
            memory.await(write);
            assertArrayEquals(bytes(8 + r), memory.await(after), "the read issued after the write sees it");
            memory.write(ptr, bytes(8 + r)); // a blocking verb after held reads: same order rule
        }
    }

    @Test
    void aReadACallbackIssuesWhileTheFlightFinishesAlsoRunsBeforeTheThreadsNextVerb() {
        pair(Duration.ofSeconds(20), 17);
        long other = RemotePtr.pack(1, 0, 8192);
        String me = Thread.currentThread().getName();
        int checked = 0;
        for (int r = 0; r < 20; r++) {
            memory.write(other, bytes(18 + r));
            CompletableFuture<byte[]> first = memory.readAsync(ptr, 64);
            AtomicReference<CompletableFuture<byte[]>> nested = new AtomicReference<>();
            AtomicReference<String> ranOn = new AtomicReference<>();
            first.whenComplete((v, e) -> {
                ranOn.set(Thread.currentThread().getName());
                nested.set(memory.readAsync(other, 64)); // issued before the write below, on this thread
            });
            CompletableFuture<Void> write = memory.writeAsync(other, bytes(19 + r), 0, 64); // finishes the flight
            memory.await(write);
            if (!me.equals(ranOn.get())) {
                continue; // the fallback reader finished the flight (this thread was descheduled): another thread's read
            }
            checked++;
            assertArrayEquals(bytes(18 + r), memory.await(nested.get()),
                    "the callback's read was issued before the write: it must not see it");
        }
        assertTrue(checked > 0, "no round ran the callback on this thread");
    }

    @Test
    void aRefusedReadFailsAloneAndTheLaneStaysInStep() {
        pair(Duration.ofSeconds(20), 9);
        long key = a.table().get(0).remoteKey();
        CompletableFuture<byte[]> ok1 = ba.read(ptr, key, 64);
        CompletableFuture<byte[]> wrongKey = ba.read(ptr, key ^ 1, 64);
        CompletableFuture<byte[]> ok2 = ba.read(ptr, key, 64);
        assertInstanceOf(LaneFlight.Flight.class, wrongKey, "held on the lane");
        assertArrayEquals(bytes(9), RemoteMemory.await(ok2, WAIT));
        assertArrayEquals(bytes(9), RemoteMemory.await(ok1, WAIT));
        DsmException e = assertThrows(DsmException.class, () -> RemoteMemory.await(wrongKey, WAIT));
        assertTrue(!e.mayHaveRun(), "refused by the target's checks: " + e);
        assertEquals(1, ba.lanesOpen(), "the lane stays");
    }

    @Test
    void aHeldReadPastItsDeadlineFailsWithATimeoutWhetherOrNotAnybodyWaits() throws Exception {
        pair(Duration.ofMillis(400), 11);
        a.faults().drop(2); // the target takes node 2's verbs and never answers
        CompletableFuture<byte[]> waited = memory.readAsync(ptr, 64);
        assertInstanceOf(LaneFlight.Flight.class, waited, "held on the lane");
        DsmTimeoutException e = assertThrows(DsmTimeoutException.class, () -> memory.await(waited));
        assertTrue(e.mayHaveRun());
        assertEquals(0, ba.lanesOpen(), "the lane whose answer may still come is closed");
        a.faults().heal(2);
        memory.write(ptr, bytes(12)); // opens a lane again
        a.faults().drop(2);
        CompletableFuture<byte[]> unwaited = memory.readAsync(ptr, 64);
        assertInstanceOf(LaneFlight.Flight.class, unwaited, "held on the lane");
        CountDownLatch failed = new CountDownLatch(1);
        AtomicReference<Throwable> why = new AtomicReference<>();
        unwaited.whenComplete((v, t) -> {
            why.set(t);
            failed.countDown();
        });
        assertTrue(failed.await(WAIT.toSeconds(), TimeUnit.SECONDS), "the fallback reader kept its deadline");
        assertInstanceOf(DsmTimeoutException.class, why.get());
        a.faults().heal(2);
    }

    @Test
    void closingTheConnectionFailsAHeldRead() {
        pair(Duration.ofSeconds(60), 13);
        a.faults().delay(2, Duration.ofMinutes(5));
        CompletableFuture<byte[]> held = memory.readAsync(ptr, 64);
        assertInstanceOf(LaneFlight.Flight.class, held, "held on the lane");
        b.fence(1, "downed by the test");
        assertThrows(NodeUnavailableException.class, () -> memory.await(held));
        assertTrue(!ba.isOpen());
        a.faults().clear();
    }

    // ------------------------------------------------------------------ the review's findings (second attempt)

    @SuppressWarnings("unchecked")
    private CompletableFuture<byte[]>[] sixteenHeldReads() {
        CompletableFuture<byte[]>[] fs = new CompletableFuture[16];
        for (int i = 0; i < fs.length; i++) {
            fs[i] = memory.readAsync(ptr, 64);
            assertInstanceOf(LaneFlight.Flight.class, fs[i], "held on the lane");
        }
        return fs;
    }

    /**
     * Finding 1 (completion order): a flight another thread reads (here a flight reader, asked by a callback)
     * is not over until every one of its futures completed; the owner's next verb waits for that. The test
     * holds the delivery in the first future's callback until the owner is seen waiting.
     */
    @Test
    void theOwnersNextVerbWaitsUntilAFlightAnotherThreadReadsHasCompletedEveryFuture() throws Exception {
        pair(Duration.ofSeconds(20), 21);
        CompletableFuture<byte[]>[] fs = sixteenHeldReads();
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        fs[0].whenComplete((v, e) -> { // asks a flight reader: the delivery runs on it, held here
            entered.countDown();
            try {
                release.await(WAIT.toSeconds(), TimeUnit.SECONDS);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        });
        assertTrue(entered.await(WAIT.toSeconds(), TimeUnit.SECONDS), "another thread delivers the flight");
        Thread owner = Thread.currentThread();
        Thread releaser = new Thread(() -> { // releases the delivery once the owner waits for it
            long until = System.nanoTime() + WAIT.toNanos();
            while (System.nanoTime() - until < 0 && !waitsForADelivery(owner)) {
                try {
                    Thread.sleep(1);
                } catch (InterruptedException ie) {
                    return;
                }
            }
            release.countDown();
        }, "test-releaser");
        releaser.start();
        try {
            memory.write(ptr + 128, bytes(22)); // the owner's next verb (blocking, on a lane)
            for (int i = 0; i < fs.length; i++) {
                assertTrue(fs[i].isDone(), "read " + i + " of the earlier flight completed before the next verb");
            }
        } finally {
            release.countDown();
            releaser.interrupt();
            releaser.join();
        }
        for (CompletableFuture<byte[]> f : fs) {
            assertArrayEquals(bytes(21), f.join());
        }
    }

    /**
     * {@code get()} waits for its own future, not for the whole delivery of its flight: the owner holds a lock
     * {@code m}, holds a read whose callback takes {@code m}, and calls {@code get()} while a flight reader
     * delivers the flight (the read hook holds the reader until the owner waits). The reader completes the
     * future, then its callback blocks on {@code m}: a {@code get()} that waited for the delivery would wait for
     * ever (it did, before the fix); one that waits for its future returns and lets the callback run.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void getReturnsWhenItsFutureCompletesThoughACallbackOfTheDeliveryBlocksOnALockTheWaiterHolds() throws Exception {
        pair(Duration.ofSeconds(20), 37);
        Object m = new Object();
        CountDownLatch taken = new CountDownLatch(1);
        java.util.concurrent.atomic.AtomicBoolean aboutToGet = new java.util.concurrent.atomic.AtomicBoolean();
        AtomicReference<Object> result = new AtomicReference<>();
        CountDownLatch callbackRan = new CountDownLatch(1);
        Thread owner = new Thread(() -> {
            try {
                synchronized (m) {
                    CompletableFuture<byte[]> f = memory.readAsync(ptr, 64);
                    assertInstanceOf(LaneFlight.Flight.class, f, "held on the lane");
                    f.thenRun(() -> { // asks a flight reader; runs on it
                        synchronized (m) {
                            callbackRan.countDown();
                        }
                    });
                    assertTrue(taken.await(WAIT.toSeconds(), TimeUnit.SECONDS), "a flight reader took the flight");
                    aboutToGet.set(true);
                    result.set(f.get());
                }
            } catch (Throwable e) {
                result.set(e);
            }
        }, "test-owner");
        owner.setDaemon(true);
        LaneFlight.readHook = i -> {
            if (i != -1 || Thread.currentThread() == owner || taken.getCount() == 0) {
                return;
            }
            taken.countDown(); // the reader took the flight: it completes the future once the owner waits in get()
            long until = System.nanoTime() + WAIT.toNanos();
            while (System.nanoTime() - until < 0
                    && !(aboutToGet.get() && owner.getState() == Thread.State.WAITING)) {
                java.util.concurrent.locks.LockSupport.parkNanos(100_000);
            }
        };
        try {
            owner.start();
            owner.join(TimeUnit.SECONDS.toMillis(20)); // a bound for a hang, not a measurement
            assertTrue(!owner.isAlive(), "f.get() returned (it waited for the whole delivery, whose callback"
                    + " waits for the owner's lock: a deadlock)");
        } finally {
            LaneFlight.readHook = null;
        }
        assertTrue(result.get() instanceof byte[], "get() returned the value: " + result.get());
        assertArrayEquals(bytes(37), (byte[]) result.get());
        assertTrue(callbackRan.await(WAIT.toSeconds(), TimeUnit.SECONDS), "the callback ran once the lock was free");
    }

    /** Whether {@code t} waits for an answer on a blocking lane ({@code TcpLane.answer}). */
    private static boolean waitsOnALane(Thread t) {
        if (t == null) {
            return false;
        }
        for (StackTraceElement e : t.getStackTrace()) {
            if (e.getClassName().equals(TcpLane.class.getName()) && e.getMethodName().equals("answer")) {
                return true;
            }
        }
        return false;
    }

    /** Whether {@code t} waits in a flight's delivery wait ({@code LaneFlight.awaitDelivered}). */
    private static boolean waitsForADelivery(Thread t) {
        for (StackTraceElement e : t.getStackTrace()) {
            if (e.getClassName().equals(LaneFlight.class.getName()) && e.getMethodName().equals("awaitDelivered")) {
                return true;
            }
        }
        return false;
    }

    /**
     * Finding 1, the owner's next verb bounded: while another thread holds the delivery, a verb whose
     * deadline passes first fails with a not-sent timeout instead of waiting on.
     */
    @Test
    void theOwnersNextVerbWaitsForTheDeliveryOnlyUntilItsOwnDeadline() throws Exception {
        pair(Duration.ofSeconds(20), 27);
        CompletableFuture<byte[]>[] fs = sixteenHeldReads();
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        fs[0].whenComplete((v, e) -> {
            entered.countDown();
            try {
                release.await(WAIT.toSeconds(), TimeUnit.SECONDS);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        });
        try {
            assertTrue(entered.await(WAIT.toSeconds(), TimeUnit.SECONDS), "another thread delivers the flight");
            DsmTimeoutException e = assertThrows(DsmTimeoutException.class, () -> {
                long saved = io.membus.core.OperationDeadline.enter(Duration.ofMillis(50));
                try {
                    memory.write(ptr + 128, bytes(28));
                } finally {
                    io.membus.core.OperationDeadline.exit(saved);
                }
            });
            assertTrue(!e.mayHaveRun(), "not sent: " + e);
        } finally {
            release.countDown();
        }
        for (CompletableFuture<byte[]> f : fs) {
            assertArrayEquals(bytes(27), RemoteMemory.await(f, WAIT));
        }
    }

    /**
     * Finding 2 (nothing waits forever): an unexpected exception while the answers are read ends the flight:
     * the answered reads keep their values, every other read fails typed (it may have run: its request
     * left), the lane is closed, and the next verbs work. The same before the write: not sent.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anUnexpectedFailureWhileReadingAFlightFailsEveryUnansweredReadTypedAndClosesTheLane() {
        pair(Duration.ofSeconds(20), 23);
        Thread me = Thread.currentThread();
        LaneFlight.readHook = i -> {
            if (i == 5 && Thread.currentThread() == me) {
                throw new IllegalStateException("injected after five answers");
            }
        };
        try {
            CompletableFuture<byte[]>[] fs = sixteenHeldReads();
            assertArrayEquals(bytes(23), fs[0].join(), "answered before the failure");
            for (int i = 0; i < fs.length; i++) {
                assertTrue(fs[i].isDone(), "read " + i + " completed");
                if (i < 5) {
                    assertArrayEquals(bytes(23), fs[i].join());
                } else {
                    int at = i;
                    NodeUnavailableException e = assertThrows(NodeUnavailableException.class,
                            () -> RemoteMemory.await(fs[at], WAIT));
                    assertTrue(e.mayHaveRun(), "its request was sent: " + e);
                }
            }
            assertEquals(0, ba.lanesOpen(), "the lane, out of step, is closed");
            LaneFlight.readHook = i -> {
                if (i == -1 && Thread.currentThread() == me) {
                    throw new AssertionError("an Error before the write");
                }
            };
            memory.write(ptr + 128, bytes(24)); // opens a lane again
            CompletableFuture<byte[]>[] gs = sixteenHeldReads();
            assertThrows(AssertionError.class, gs[15]::join, "the Error reaches the thread that read");
            for (CompletableFuture<byte[]> g : gs) {
                NodeUnavailableException e = assertThrows(NodeUnavailableException.class,
                        () -> RemoteMemory.await(g, WAIT));
                assertTrue(!e.mayHaveRun(), "never sent: " + e);
            }
        } finally {
            LaneFlight.readHook = null;
        }
        assertArrayEquals(bytes(23), memory.read(ptr, 64), "the next verbs work");
        assertArrayEquals(bytes(23), memory.await(memory.readAsync(ptr, 64)));
    }

    /**
     * Finding 3 (timed waits): {@code get(10 ms)} on a read whose target answers slowly throws its
     * TimeoutException (the waiter hands the flight to a reader instead of reading past its own deadline),
     * and the read completes afterwards with its value; the same for {@code RemoteMemory.await(f, wait)}.
     */
    @Test
    void aTimedWaitShorterThanTheReadReadsNothingPastItsDeadlineAndTheReadStillCompletes() throws Exception {
        pair(Duration.ofSeconds(20), 25);
        a.faults().delay(2, Duration.ofMillis(300)); // the target answers node 2 late; node 2 has no rule: lanes stay
        try {
            CompletableFuture<byte[]> f = memory.readAsync(ptr, 64);
            assertInstanceOf(LaneFlight.Flight.class, f, "held on the lane");
            assertThrows(java.util.concurrent.TimeoutException.class, () -> f.get(10, TimeUnit.MILLISECONDS));
            assertArrayEquals(bytes(25), f.get(WAIT.toSeconds(), TimeUnit.SECONDS), "completed by a reader");

            CompletableFuture<byte[]> g = memory.readAsync(ptr, 64);
            assertInstanceOf(LaneFlight.Flight.class, g, "held on the lane");
            assertThrows(DsmTimeoutException.class, () -> RemoteMemory.await(g, Duration.ofMillis(10)));
            assertArrayEquals(bytes(25), RemoteMemory.await(g, WAIT), "completed by a reader");
        } finally {
            a.faults().clear();
        }
    }

    /**
     * Finding 5 (callbacks): a verb a callback issues while its thread delivers the flight is issued after
     * the delivery: when its future completes, every later read of the flight has completed. The second
     * read's callback stalls the delivery so that a verb issued at once would complete first.
     */
    @Test
    void aVerbACallbackIssuesDuringTheDeliveryCompletesAfterTheFlightsLaterReads() throws Exception {
        pair(Duration.ofSeconds(20), 29);
        long other = RemotePtr.pack(1, 0, 8192);
        int checked = 0;
        for (int r = 0; r < 30 && checked < 3; r++) {
            CompletableFuture<byte[]>[] fs = sixteenHeldReads();
            AtomicReference<CompletableFuture<Void>> nested = new AtomicReference<>();
            // completed by the write's callback: a waiter of the write may wake before that callback ran
            CompletableFuture<Boolean> laterDone = new CompletableFuture<>();
            AtomicReference<Boolean> duringDelivery = new AtomicReference<>();
            byte[] value = bytes(30 + r);
            fs[0].whenComplete((v, e) -> {
                // false when the fallback delivered the flight before this callback was attached (a descheduled
                // test thread): then it runs at once, outside any delivery, and the round checks nothing
                duringDelivery.set(!fs[1].isDone());
                CompletableFuture<Void> w = memory.writeAsync(other, value, 0, 64);
                w.whenComplete((x, t) -> {
                    boolean all = true;
                    for (int i = 1; i < fs.length; i++) {
                        all &= fs[i].isDone();
                    }
                    laterDone.complete(all);
                });
                nested.set(w);
            });
            fs[1].whenComplete((v, e) -> {
                try {
                    Thread.sleep(100); // a slow callback: the write above, if issued at once, is answered meanwhile
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                }
            });
            CompletableFuture<byte[]> composed = fs[2].thenCompose(v -> memory.readAsync(other, 64));
            memory.await(fs[15]);
            memory.await(nested.get());
            if (!duringDelivery.get()) {
                continue;
            }
            checked++;
            assertEquals(Boolean.TRUE, laterDone.get(WAIT.toSeconds(), TimeUnit.SECONDS),
                    "the callback's write completed after the flight's later reads");
            assertArrayEquals(value, memory.await(composed), "the composed read was issued after the write");
        }
        assertTrue(checked > 0, "no round ran the callbacks during a delivery");
    }

    /**
     * A blocking verb in a callback the delivery of a flight runs would wait for verbs the delivery holds back:
     * it is refused before anything is sent ({@code BlockingCallOnTransportThreadException}, not run), as on a
     * transport thread.
     */
    @Test
    void aBlockingVerbInACallbackOfTheDeliveryIsRefusedBeforeItIsSent() {
        pair(Duration.ofSeconds(20), 33);
        long other = RemotePtr.pack(1, 0, 8192);
        memory.write(other, bytes(33));
        int checked = 0;
        for (int r = 0; r < 30 && checked < 3; r++) {
            CompletableFuture<byte[]>[] fs = sixteenHeldReads();
            AtomicReference<Throwable> refused = new AtomicReference<>();
            AtomicReference<Boolean> duringDelivery = new AtomicReference<>();
            fs[0].whenComplete((v, e) -> {
                duringDelivery.set(!fs[1].isDone());
                try {
                    memory.write(other, bytes(34));
                } catch (RuntimeException t) {
                    refused.set(t);
                }
            });
            memory.await(fs[15]);
            if (!duringDelivery.get()) {
                memory.write(other, bytes(33)); // ran outside any delivery (the fallback was first): put it back
                continue;
            }
            checked++;
            DsmException e = assertInstanceOf(io.membus.core.error.BlockingCallOnTransportThreadException.class,
                    refused.get());
            assertTrue(!e.mayHaveRun());
            assertArrayEquals(bytes(33), memory.read(other, 64), "the refused write never ran");
        }
        assertTrue(checked > 0, "no round ran the callback during a delivery");
    }

    /**
     * A blocking wait in a callback a delivery runs, for a future of another flight that is not done yet, fails
     * at once with {@code BlockingCallOnTransportThreadException} (callbacks must not block), in {@code join()},
     * {@code get()} and {@code get(timeout)}: the other flight is a read held on the lane to node 3, which
     * answers node 2 three seconds late; before the fix the callback waited for that flight's delivery.
     */
    @Test
    void aCallbackOfADeliveryThatWaitsForAnotherFlightsReadFailsAtOnce() {
        pair(Duration.ofSeconds(20), 39);
        Transport c = nodes.member(3, Duration.ofSeconds(20), directory);
        long onC = RemotePtr.pack(3, 0, 4096);
        TcpConnection bc = Nodes.connection(b, c);
        memory.write(onC, bytes(40)); // opens a lane to node 3
        assertEquals(1, bc.lanesOpen());
        c.faults().delay(2, Duration.ofSeconds(3)); // node 3 answers node 2 late; node 2 has no rule: lanes stay
        try {
            CompletableFuture<byte[]> later = memory.readAsync(onC, 64); // flight on the lane to node 3
            assertInstanceOf(LaneFlight.Flight.class, later, "held on the lane to node 3");
            CompletableFuture<byte[]> f = memory.readAsync(ptr, 64); // flight on the lane to node 1
            assertInstanceOf(LaneFlight.Flight.class, f, "held on the lane to node 1");
            java.util.List<Object> seen = new java.util.ArrayList<>();
            f.whenComplete((v, e) -> {
                seen.add(later.isDone());
                for (int k = 0; k < 3; k++) {
                    try {
                        if (k == 0) {
                            later.join();
                        } else if (k == 1) {
                            later.get();
                        } else {
                            later.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                        }
                        seen.add("returned");
                    } catch (Throwable t) {
                        seen.add(t);
                    }
                }
            });
            assertArrayEquals(bytes(39), f.join()); // this thread reads node 1's flight and runs the callback
            assertEquals(4, seen.size(), "the callback ran during the delivery: " + seen);
            assertEquals(Boolean.FALSE, seen.get(0), "the other flight's read was not done yet");
            for (int k = 1; k < 4; k++) {
                DsmException e = assertInstanceOf(io.membus.core.error.BlockingCallOnTransportThreadException.class,
                        seen.get(k), "wait " + k);
                assertTrue(!e.mayHaveRun());
            }
            assertArrayEquals(bytes(40), later.join(), "the other flight completes afterwards");
        } finally {
            c.faults().clear();
        }
    }

    /**
     * The flight readers are not a fixed pool for the whole transport: with 2 lanes per peer, nodes 1 and 3
     * never answering node 2 (every lane to them held by a flight whose reader is stuck in a read: 4 readers),
     * a callback-only read to a healthy node 4 still gets a reader and completes. With the earlier maximum
     * (lanes + 1 = 3 for the whole transport) it failed with a not-sent timeout.
     */
    @Test
    void aCallbackOnlyReadToAHealthyPeerCompletesWhileEveryReaderOfOtherPeersFlightsIsStuck() throws Exception {
        pair(Duration.ofSeconds(20), 41, "tcp.blocking-lanes", "2");
        Transport c = nodes.member(3, Duration.ofSeconds(20), directory);
        Transport d = nodes.member(4, Duration.ofSeconds(20), directory);
        long onC = RemotePtr.pack(3, 0, 4096);
        long onD = RemotePtr.pack(4, 0, 4096);
        TcpConnection bc = Nodes.connection(b, c);
        TcpConnection bd = Nodes.connection(b, d);
        memory.write(onC, bytes(42));
        memory.write(onD, bytes(43)); // a lane to node 4
        assertEquals(1, bd.lanesOpen());
        a.faults().drop(2); // nodes 1 and 3 take node 2's verbs and never answer; node 2 has no rule: lanes stay
        c.faults().drop(2);
        try {
            long until = System.nanoTime() + WAIT.toNanos();
            int stuck = 0;
            // flights with a callback on the lanes to nodes 1 and 3, read by flight readers that get stuck: at
            // least 3, the earlier fixed maximum (lanes + 1), which left node 4's read (and the opening of a 4th
            // lane) without a thread
            while (stuck < 3) {
                assertTrue(System.nanoTime() - until < 0, "4 flights to nodes 1 and 3, their readers stuck: "
                        + stuck + " readers, " + LaneFlight.live() + " flights");
                for (long p : new long[] {ptr, onC}) {
                    Thread t = new Thread(() -> memory.readAsync(p, 64).whenComplete((v, e) -> { }), "test-issuer");
                    t.start(); // one flight per thread and connection: a new thread for each
                    t.join();
                }
                Thread.sleep(20);
                stuck = 0;
                for (Thread t : Thread.getAllStackTraces().keySet()) {
                    if (t.getName().startsWith("membus-tcp-2-flights-") && waitsOnALane(t)) {
                        stuck++;
                    }
                }
            }
            CountDownLatch done = new CountDownLatch(1);
            AtomicReference<Object> seen = new AtomicReference<>();
            long saved = io.membus.core.OperationDeadline.enter(Duration.ofSeconds(5)); // before the stuck reads end
            try {
                CompletableFuture<byte[]> f = memory.readAsync(onD, 64);
                assertInstanceOf(LaneFlight.Flight.class, f, "held on the lane to node 4");
                f.whenComplete((v, e) -> { // callback only: a flight reader must read it
                    seen.set(e != null ? e : v);
                    done.countDown();
                });
            } finally {
                io.membus.core.OperationDeadline.exit(saved);
            }
            assertTrue(done.await(WAIT.toSeconds(), TimeUnit.SECONDS), "the read to node 4 completed");
            assertTrue(seen.get() instanceof byte[], "a flight reader read it: " + seen.get());
            assertArrayEquals(bytes(43), (byte[]) seen.get());
        } finally {
            a.faults().clear();
            c.faults().clear();
        }
    }

    /**
     * Finding 5 (threads): a read that finds no idle lane is posted, and a lane opens for the next flights on
     * one of the transport's own threads ({@code membus-tcp-2-flights-<n>}), not on the JVM's common pool.
     * The only lane is held by a blocking read the target answers 300 ms late; no flight exists, so no flight
     * reader thread is started for any other reason.
     */
    @Test
    void aLaneForFlightsOpensOnTheTransportsOwnThreads() throws Exception {
        pair(Duration.ofSeconds(20), 35);
        assertEquals(1, ba.lanesOpen());
        a.faults().delay(2, Duration.ofMillis(300)); // the target answers node 2 late; node 2 has no rule: lanes stay
        try {
            Thread[] reader = new Thread[1];
            CompletableFuture<byte[]> blocking = CompletableFuture.supplyAsync(() -> memory.read(ptr, 64),
                    runnable -> {
                        reader[0] = new Thread(runnable, "test-blocking-reader");
                        reader[0].start();
                    });
            long until = System.nanoTime() + WAIT.toNanos();
            while (!waitsOnALane(reader[0])) { // the only lane is busy from here on, for 300 ms
                assertTrue(System.nanoTime() - until < 0, "the blocking read took the lane");
                Thread.sleep(1);
            }
            CompletableFuture<byte[]> posted = memory.readAsync(ptr, 64); // finds no idle lane: asks for one, posted
            assertTrue(!(posted instanceof LaneFlight.Flight), "no idle lane: posted");
            until = System.nanoTime() + WAIT.toNanos();
            while (ba.lanesOpen() < 2) {
                assertTrue(System.nanoTime() - until < 0, "a second lane opened");
                Thread.sleep(1);
            }
            boolean opener = false;
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                opener |= t.getName().startsWith("membus-tcp-2-flights-");
            }
            assertTrue(opener, "the lane opened on a membus-tcp-2-flights thread (they end after 1 s idle)");
            assertArrayEquals(bytes(35), blocking.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            assertArrayEquals(bytes(35), memory.await(posted));
        } finally {
            a.faults().clear();
        }
    }

    /**
     * The count of flights that lets verbs skip the flight block when none exists ({@code LaneFlight.anyActive})
     * goes back to 0 once every flight is delivered, however it was read (its waiter, a flight reader, the
     * owner's next verb), and a thread's verbs with no flight alive complete as usual.
     */
    @Test
    void theCountOfActiveFlightsGoesBackToZeroOnceEveryFlightIsDelivered() throws Exception {
        pair(Duration.ofSeconds(20), 45);
        for (int r = 0; r < 50; r++) {
            CompletableFuture<byte[]> waited = memory.readAsync(ptr, 64);
            assertTrue(LaneFlight.active() > 0, "a flight is counted while it is held");
            assertArrayEquals(bytes(45), waited.join()); // read by this thread
            CountDownLatch done = new CountDownLatch(1);
            memory.readAsync(ptr, 64).whenComplete((v, e) -> done.countDown()); // read by a flight reader
            assertTrue(done.await(WAIT.toSeconds(), TimeUnit.SECONDS));
            CompletableFuture<byte[]> next = memory.readAsync(ptr, 64);
            memory.write(ptr + 256, bytes(46)); // the owner's next verb finishes the flight first
            assertTrue(next.isDone(), "issue order");
        }
        long until = System.nanoTime() + WAIT.toNanos();
        while (LaneFlight.active() != 0) { // a flight reader marks its flight delivered after the callbacks ran
            assertTrue(LaneFlight.active() > 0, "never below 0: " + LaneFlight.active());
            assertTrue(System.nanoTime() - until < 0, "every flight delivered: " + LaneFlight.active() + " counted");
            Thread.sleep(1);
        }
        assertArrayEquals(bytes(46), memory.read(ptr + 256, 64), "verbs with no flight alive");
    }

    /** Finding 5 (per-thread state): flights delivered by other threads are not kept by their thread. */
    @Test
    void flightsDeliveredByOtherThreadsAreNotKeptPerThread() throws Exception {
        pair(Duration.ofSeconds(20), 31);
        for (int r = 0; r < 200; r++) {
            CountDownLatch done = new CountDownLatch(1);
            memory.readAsync(ptr, 64).whenComplete((v, e) -> done.countDown()); // read by a flight reader
            assertTrue(done.await(WAIT.toSeconds(), TimeUnit.SECONDS));
            assertTrue(io.membus.core.transport.WaitHelp.registered() <= 2,
                    "settled flights dropped: " + io.membus.core.transport.WaitHelp.registered());
        }
    }
}
