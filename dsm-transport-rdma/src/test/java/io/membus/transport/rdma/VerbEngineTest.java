package io.membus.transport.rdma;

import io.membus.core.Access;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.OutOfBoundsException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.test.Seeds;
import io.membus.core.fault.FaultInjector;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The verb engine against the software NIC: the same posting interface and the
 * same native work-request bytes the NIC reads, executed on registered native
 * memory, completed in order on the NIC's thread.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class VerbEngineTest {
    private static final int PEER = 2;
    private static final Duration WAIT = Duration.ofSeconds(20);

    private SoftNic nic;
    private Segment segment;
    private RemoteCatalog catalog;
    private final FaultInjector faults = new FaultInjector();
    private final java.util.concurrent.atomic.AtomicReference<String> brokenReported =
            new java.util.concurrent.atomic.AtomicReference<>();

    private VerbEngine engine(int depth, int stagingBytes, Duration timeout, int flags) {
        nic = new SoftNic(depth, stagingBytes);
        segment = Segment.allocate(PEER, 1, 0, 64 * 1024, flags,
                (address, size) -> CatalogEntry.remoteKey(nic.register(address, size,
                        RdmaTransport.regionAccess(flags)), 0x2468));
        catalog = new RemoteCatalog(PEER);
        catalog.replaceAll(List.of(new CatalogEntry(0, segment.address(), segment.size(), segment.remoteKey(), flags)));
        VerbEngine engine = new VerbEngine(nic, PEER, timeout, faults, catalog);
        engine.onBroken(brokenReported::set);
        nic.attach(engine);
        return engine;
    }

    @AfterEach
    void close() throws InterruptedException {
        if (nic != null) {
            nic.shutdown();
        }
        if (segment != null) {
            segment.close();
        }
    }

    private long addr(long offset) {
        return segment.address() + offset;
    }

    private long ptr(long offset) {
        return RemotePtr.pack(PEER, 0, offset);
    }

    private static <T> T await(CompletableFuture<T> f) {
        return RemoteMemory.await(f, WAIT);
    }

    private static Throwable failure(CompletableFuture<?> f) {
        CompletionException e = assertThrows(CompletionException.class, () -> f.orTimeout(20, TimeUnit.SECONDS).join());
        return e.getCause();
    }

    @Test
    void readWriteCompareAndSwapAndFetchAndAddReachTheRegisteredMemory() {
        VerbEngine e = engine(8, 256, WAIT, Access.ALL);
        long key = segment.remoteKey();
        byte[] data = "one-sided bytes".getBytes();
        await(e.write(ptr(100), key, addr(100), data, 0, data.length));
        byte[] local = new byte[data.length];
        segment.read(100, local, 0, local.length);
        assertArrayEquals(data, local, "the write reached the segment's memory");
        assertArrayEquals(data, await(e.read(ptr(100), key, addr(100), data.length)));

        segment.writeLong(8, 41);
        assertEquals(41L, await(e.compareAndSwap(ptr(8), key, addr(8), 41, 77)), "a successful CAS returns expected");
        assertEquals(77L, await(e.compareAndSwap(ptr(8), key, addr(8), 41, 99)), "a failed CAS returns the current value");
        assertEquals(77L, segment.readLong(8));
        assertEquals(77L, await(e.fetchAndAdd(ptr(8), key, addr(8), -7)));
        assertEquals(70L, segment.readLong(8));
        assertEquals(0, e.outstanding());
        assertEquals(5, nic.posted.get(), "one work request per small verb");
    }

    @Test
    void longVerbsAreSplitAcrossSlotsAndQueueBehindAFullRing() {
        SplittableRandom random = Seeds.random("membus.test.seed", "longVerbsAreSplitAcrossSlotsAndQueueBehindAFullRing");
        VerbEngine e = engine(4, 64, WAIT, Access.ALL);
        long key = segment.remoteKey();
        byte[] model = new byte[(int) segment.size()];
        List<CompletableFuture<Void>> writes = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            int length = random.nextInt(0, 1500);
            int offset = random.nextInt(0, model.length - length);
            byte[] src = new byte[length];
            random.nextBytes(src);
            writes.add(e.write(ptr(offset), key, addr(offset), src, 0, length));
            System.arraycopy(src, 0, model, offset, length); // issue order is execution order
            Arrays.fill(src, (byte) 0); // the caller reuses its buffer at once: the engine copied it
        }
        writes.forEach(VerbEngineTest::await);
        assertEquals(0, e.backlog());
        byte[] all = await(e.read(ptr(0), key, addr(0), model.length));
        byte[] direct = new byte[model.length];
        segment.read(0, direct, 0, direct.length);
        assertArrayEquals(model, direct, "overlapping split writes landed in issue order");
        assertArrayEquals(model, all, "a 64 KiB read over 64-byte slots returns the memory exactly");
        assertTrue(nic.posted.get() > 4 * 40, "long verbs took several work requests each: " + nic.posted.get());
    }

    @Test
    void writesCopyTheCallersBytesEvenWhenTheyWaitForASlot() {
        VerbEngine e = engine(2, 16, WAIT, Access.ALL);
        long key = segment.remoteKey();
        nic.stall();
        byte[] buf = new byte[100];
        List<CompletableFuture<Void>> futures = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            Arrays.fill(buf, (byte) (i + 1));
            futures.add(e.write(ptr(i * 100L), key, addr(i * 100L), buf, 0, buf.length));
        }
        Arrays.fill(buf, (byte) -1);
        assertTrue(e.backlog() > 0, "the ring of 2 slots is full: verbs wait in the backlog");
        nic.resume();
        futures.forEach(VerbEngineTest::await);
        for (int i = 0; i < 5; i++) {
            byte[] got = new byte[100];
            segment.read(i * 100L, got, 0, 100);
            byte[] want = new byte[100];
            Arrays.fill(want, (byte) (i + 1));
            assertArrayEquals(want, got, "write " + i);
        }
    }

    @Test
    void futuresCompleteInIssueOrder() {
        VerbEngine e = engine(8, 64, WAIT, Access.ALL);
        long key = segment.remoteKey();
        List<Integer> order = new CopyOnWriteArrayList<>();
        List<CompletableFuture<?>> all = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            int n = i;
            CompletableFuture<?> f = switch (i % 3) {
                case 0 -> e.fetchAndAdd(ptr(0), key, addr(0), 1);
                case 1 -> e.read(ptr(64), key, addr(64), 1 + (i % 150));
                default -> e.write(ptr(256), key, addr(256), new byte[70], 0, 70);
            };
            all.add(f.whenComplete((v, t) -> order.add(n)));
        }
        all.forEach(VerbEngineTest::await);
        List<Integer> sorted = new ArrayList<>(order);
        sorted.sort(null);
        assertEquals(sorted, order);
        assertEquals(67L, segment.readLong(0), "every fetch-and-add counted once");
    }

    @Test
    void concurrentAtomicsFromManyThreadsGiveTheExactTotal() throws Exception {
        VerbEngine e = engine(16, 64, WAIT, Access.ALL);
        long key = segment.remoteKey();
        int threads = 4;
        int each = 500;
        List<Thread> workers = new ArrayList<>();
        List<CompletableFuture<Long>> futures = new CopyOnWriteArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread w = new Thread(() -> {
                for (int i = 0; i < each; i++) {
                    futures.add(e.fetchAndAdd(ptr(16), key, addr(16), 3));
                }
            });
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            w.join();
        }
        List<Long> olds = new ArrayList<>();
        futures.forEach(f -> olds.add(await(f)));
        assertEquals(3L * threads * each, segment.readLong(16));
        olds.sort(null);
        for (int i = 0; i < olds.size(); i++) {
            assertEquals(3L * i, olds.get(i), "every old value seen exactly once");
        }
    }

    @Test
    void aRefusedWorkRequestFailsWithItsTypedErrorAndBreaksTheQueuePair() {
        VerbEngine e = engine(8, 64, WAIT, Access.ALL);
        long key = segment.remoteKey();
        nic.stall();
        CompletableFuture<byte[]> good = e.read(ptr(0), key, addr(0), 8);
        // posted with an address past the registered region: the NIC refuses it (the catalog would have)
        CompletableFuture<byte[]> bad = e.read(ptr(segment.size() - 4), key, addr(segment.size() - 4), 8);
        CompletableFuture<Long> behind = e.fetchAndAdd(ptr(8), key, addr(8), 1);
        nic.resume();
        assertNotNull(await(good));
        OutOfBoundsException oob = assertInstanceOf(OutOfBoundsException.class, failure(bad));
        assertEquals(segment.size(), oob.capacity());
        NodeUnavailableException flushed = assertInstanceOf(NodeUnavailableException.class, failure(behind));
        assertTrue(flushed.getMessage().contains("IBV_WC_REM_ACCESS_ERR"), flushed.getMessage());
        assertEquals(0L, segment.readLong(8), "the verb behind the failure was never executed");
        assertNotNull(e.brokenReason());
        assertInstanceOf(NodeUnavailableException.class, failure(e.read(ptr(0), key, addr(0), 8)),
                "a broken engine refuses later verbs at once");
        pollUntil(() -> nic.closed.get() == 1, "the queue pair is destroyed");
        pollUntil(() -> brokenReported.get() != null, "the connection is told");
        assertTrue(brokenReported.get().contains("IBV_WC_REM_ACCESS_ERR"), brokenReported.get());
    }

    @Test
    void aWrongRkeyIsAWrongRemoteKey() {
        VerbEngine e = engine(8, 64, WAIT, Access.ALL);
        long wrong = segment.remoteKey() ^ 0x0000_0000_0001_0000L;
        assertInstanceOf(WrongRemoteKeyException.class, failure(e.read(ptr(0), wrong, addr(0), 8)));
    }

    @Test
    void aStalledNicFiresTheDeadlineAndTheLateCompletionIsIgnored() {
        VerbEngine e = engine(4, 64, Duration.ofMillis(200), Access.ALL);
        long key = segment.remoteKey();
        nic.stall();
        CompletableFuture<Long> late = e.fetchAndAdd(ptr(0), key, addr(0), 5);
        DsmTimeoutException t = assertInstanceOf(DsmTimeoutException.class, failure(late));
        assertEquals(PEER, t.nodeId());
        nic.resume();
        pollUntil(() -> e.outstanding() == 0, "the late completion freed its slot");
        assertEquals(5L, segment.readLong(0), "a timed-out verb may have executed (it did here)");
        assertEquals(5L, await(e.fetchAndAdd(ptr(0), key, addr(0), 1)), "the engine keeps working");
        assertEquals(null, e.brokenReason());
    }

    @Test
    void aLateCompletionOfATimedOutVerbNeverCompletesTheVerbThatReusesItsSlot() {
        VerbEngine e = engine(1, 64, Duration.ofSeconds(1), Access.ALL); // one slot: the next verb must reuse it
        long key = segment.remoteKey();
        nic.stall();
        CompletableFuture<Long> timedOut = e.fetchAndAdd(ptr(0), key, addr(0), 5);
        assertInstanceOf(DsmTimeoutException.class, failure(timedOut));
        CompletableFuture<Long> next = e.fetchAndAdd(ptr(0), key, addr(0), 1); // waits: the slot is still posted
        assertEquals(1, e.backlog());
        nic.resume();
        // wr id 0's completion (old value 0) is dropped; wr id 1 in the same slot carries this verb's old value
        assertEquals(5L, await(next));
        assertEquals(6L, segment.readLong(0));
        assertEquals(null, e.brokenReason());
    }

    @Test
    void aFailedCompletionOfATimedOutVerbStillBreaksTheEngine() {
        VerbEngine e = engine(4, 64, Duration.ofMillis(200), Access.ALL);
        long key = segment.remoteKey();
        nic.stall();
        // past the registered region: the NIC refuses it, after its deadline fired
        CompletableFuture<byte[]> bad = e.read(ptr(segment.size() - 4), key, addr(segment.size() - 4), 8);
        assertInstanceOf(DsmTimeoutException.class, failure(bad));
        nic.resume();
        // the queue pair is in error state now: the engine must know, not wait for the next verb to be flushed
        pollUntil(() -> e.brokenReason() != null, "the engine breaks on the failed completion");
        assertTrue(e.brokenReason().contains("IBV_WC_REM_ACCESS_ERR"), e.brokenReason());
        pollUntil(() -> brokenReported.get() != null, "the connection is told");
        assertInstanceOf(NodeUnavailableException.class, failure(e.read(ptr(0), key, addr(0), 8)));
    }

    @Test
    void closeFailsVerbsInFlightAndLaterVerbs() {
        VerbEngine e = engine(4, 64, WAIT, Access.ALL);
        long key = segment.remoteKey();
        nic.stall();
        List<CompletableFuture<byte[]>> inFlight = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            inFlight.add(e.read(ptr(0), key, addr(0), 8)); // 4 posted, 2 in the backlog
        }
        e.close("test closed it");
        for (CompletableFuture<byte[]> f : inFlight) {
            NodeUnavailableException n = assertInstanceOf(NodeUnavailableException.class, failure(f));
            assertTrue(n.getMessage().startsWith("node unavailable: node=2, reason=test closed it, outcome="),
                    n.getMessage());
            assertTrue(n.mayHaveRun(), "posted or not, the engine reports the verbs it held as of unknown outcome");
        }
        assertInstanceOf(NodeUnavailableException.class, failure(e.write(ptr(0), key, addr(0), new byte[1], 0, 1)));
        nic.resume();
        pollUntil(() -> nic.closed.get() == 1, "the queue pair is destroyed");
    }

    @Test
    void droppedVerbsAreNeverPostedAndDelayedVerbsKeepTheirOrder() {
        VerbEngine e = engine(4, 64, Duration.ofMillis(300), Access.ALL);
        long key = segment.remoteKey();
        faults.drop(PEER);
        assertInstanceOf(DsmTimeoutException.class, failure(e.fetchAndAdd(ptr(0), key, addr(0), 1)));
        assertEquals(0, nic.posted.get(), "a dropped verb is never posted");
        faults.delay(PEER, Duration.ofMillis(50));
        CompletableFuture<Long> first = e.fetchAndAdd(ptr(0), key, addr(0), 1);
        faults.heal(PEER);
        CompletableFuture<Long> second = e.fetchAndAdd(ptr(0), key, addr(0), 10);
        assertEquals(0L, await(first), "the delayed verb still runs first");
        assertEquals(1L, await(second));
        assertEquals(11L, segment.readLong(0));
    }

    private static void pollUntil(java.util.function.BooleanSupplier condition, String what) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not reached within " + WAIT + ": " + what);
            }
            Thread.onSpinWait();
            Thread.yield();
        }
    }
}
