package io.membus.core.transport;

import io.membus.core.Access;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.Words;
import io.membus.core.error.AccessDeniedException;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.MisalignedAtomicException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.OutOfBoundsException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.test.Seeds;
import io.membus.core.test.TestJvm;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import java.util.zip.CRC32;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The contract every {@link Transport} meets (see {@link Verbs}): one suite, run by
 * a subclass per transport. A subclass names its transport and the properties of
 * node {@code id} in the current test ({@link #testId} makes them unique per test).
 *
 * <p>Each test starts its own nodes and closes them afterwards.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
public abstract class TransportContractTest {
    /** Deadline for verbs in tests that do not test deadlines: generous for a loaded 2-core CI machine. */
    protected static final Duration OP_TIMEOUT = Duration.ofSeconds(20);
    protected static final long SEGMENT_SIZE = 64 * 1024;

    /** Unique per test: subclasses use it to isolate fabrics, directories, ports. */
    protected String testId;
    private final List<Transport> nodes = new ArrayList<>();

    /** The transport's name, as {@link Transports#create} takes it. */
    protected abstract String transportName();

    /** Transport properties of node {@code nodeId} in this test. */
    protected abstract Map<String, String> nodeProperties(int nodeId);

    /** Whether nodes of this transport can run in separate processes. */
    protected boolean multiProcess() {
        return true;
    }

    /**
     * Whether a target refuses verbs from a node it fenced. False only for
     * transports where the target takes no part in a verb and cannot refuse it
     * ({@code shm}: the initiator's CPU runs it).
     */
    protected boolean targetRefusesFencedInitiators() {
        return true;
    }

    @BeforeEach
    void name(TestInfo info) {
        testId = getClass().getSimpleName() + "-" + info.getTestMethod().map(m -> m.getName()).orElse("test")
                + "-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
    }

    @AfterEach
    void closeNodes() {
        for (Transport t : nodes) {
            t.close();
        }
        nodes.clear();
        afterNodesClosed();
    }

    /** Hook for subclasses to clean up after the nodes of a test closed (directories). */
    protected void afterNodesClosed() {
    }

    protected Transport node(int nodeId) {
        return node(nodeId, OP_TIMEOUT);
    }

    protected Transport node(int nodeId, Duration operationTimeout) {
        TransportConfig config = TransportConfig.builder(nodeId)
                .operationTimeout(operationTimeout)
                .connectTimeout(Duration.ofSeconds(10))
                .properties(nodeProperties(nodeId))
                .build();
        Transport t = Transports.create(transportName(), config);
        nodes.add(t);
        return t;
    }

    protected static Connection connect(Transport from, Transport to) {
        return RemoteMemory.await(from.connect(to.self()), Duration.ofSeconds(30));
    }

    protected static <T> T await(CompletableFuture<T> f) {
        return RemoteMemory.await(f, OP_TIMEOUT.plusSeconds(5));
    }

    protected static <E extends Throwable> E assertFails(Class<E> type, CompletableFuture<?> f) {
        return assertThrows(type, () -> await(f));
    }

    protected static long checksum(Segment s) {
        byte[] all = new byte[(int) s.size()];
        s.read(0, all, 0, all.length);
        CRC32 crc = new CRC32();
        crc.update(all);
        return crc.getValue();
    }

    private static void fillRandom(Segment s, long seed) {
        byte[] b = new byte[(int) s.size()];
        new SplittableRandom(seed).nextBytes(b);
        s.write(0, b, 0, b.length);
    }

    @Test
    void readYourWriteAndVisibilityToOtherNodes() {
        Transport a = node(1);
        Transport b = node(2);
        Transport c = node(3);
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Connection ab = connect(b, a);
        Connection cb = connect(c, a);
        byte[] data = new byte[4096];
        new SplittableRandom(7).nextBytes(data);
        long ptr = seg.pointer(1000);

        await(ab.write(ptr, seg.remoteKey(), data));
        assertArrayEquals(data, await(ab.read(ptr, seg.remoteKey(), data.length)), "read-your-write");
        assertArrayEquals(data, await(cb.read(ptr, seg.remoteKey(), data.length)), "visible to another node");
        byte[] local = new byte[data.length];
        seg.read(1000, local, 0, local.length);
        assertArrayEquals(data, local, "visible to the owner");

        await(ab.write(ptr, seg.remoteKey(), data, 10, 8));
        byte[] word = await(cb.read(ptr, seg.remoteKey(), 8));
        assertEquals(Words.getLong(data, 10), Words.getLong(word, 0), "write of a sub-range");
        assertEquals(0, await(ab.read(ptr, seg.remoteKey(), 0)).length, "zero-length read");
        assertEquals(0, await(ab.read(seg.pointer(SEGMENT_SIZE), seg.remoteKey(), 0)).length,
                "zero-length read at the end of the segment");
    }

    @Test
    void compareAndSwapReturnsTheOldValueOnSuccessAndFailure() {
        Transport a = node(1);
        Transport b = node(2);
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Connection ab = connect(b, a);
        long ptr = seg.pointer(64);
        long key = seg.remoteKey();

        assertEquals(0L, await(ab.compareAndSwap(ptr, key, 0, 42)), "success returns expected");
        assertEquals(42L, seg.readLong(64));
        assertEquals(42L, await(ab.compareAndSwap(ptr, key, 7, 99)), "failure returns the current value");
        assertEquals(42L, seg.readLong(64), "failed CAS leaves the word");
        assertEquals(42L, await(ab.compareAndSwap(ptr, key, 42, -1)));
        assertEquals(-1L, seg.readLong(64));
        assertEquals(-1L, await(ab.fetchAndAdd(ptr, key, 5)), "fetch-and-add returns the value before");
        assertEquals(4L, seg.readLong(64));
        assertEquals(4L, await(ab.fetchAndAdd(ptr, key, Long.MIN_VALUE)), "fetch-and-add wraps");
        assertEquals(4L + Long.MIN_VALUE, seg.readLong(64));
    }

    @Test
    void concurrentFetchAndAddAndCasFromManyThreadsAndNodesGiveTheExactTotal() throws Exception {
        Transport a = node(1);
        Transport b = node(2);
        Transport c = node(3);
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        long faaPtr = seg.pointer(0);
        long casPtr = seg.pointer(8);
        long key = seg.remoteKey();
        int threadsPerNode = 3;
        int perThread = 1500;
        ExecutorService pool = Executors.newFixedThreadPool(2 * threadsPerNode + 1);
        try {
            List<Future<?>> done = new ArrayList<>();
            CountDownLatch start = new CountDownLatch(1);
            for (Transport t : List.of(b, c)) {
                Connection conn = connect(t, a);
                for (int i = 0; i < threadsPerNode; i++) {
                    done.add(pool.submit(() -> {
                        start.await();
                        for (int n = 0; n < perThread; n++) {
                            await(conn.fetchAndAdd(faaPtr, key, 1));
                            long seen = await(conn.compareAndSwap(casPtr, key, 0, 0));
                            while (true) {
                                long old = await(conn.compareAndSwap(casPtr, key, seen, seen + 1));
                                if (old == seen) {
                                    break;
                                }
                                seen = old;
                            }
                        }
                        return null;
                    }));
                }
            }
            // the owner on its own word, concurrently with peers' verbs
            done.add(pool.submit(() -> {
                start.await();
                for (int n = 0; n < perThread; n++) {
                    ownWordFetchAndAdd(a, faaPtr, key, 1);
                }
                return null;
            }));
            start.countDown();
            for (Future<?> f : done) {
                f.get(100, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals((2L * threadsPerNode + 1) * perThread, seg.readLong(0), "fetch-and-add total");
        assertEquals(2L * threadsPerNode * perThread, seg.readLong(8), "compare-and-swap increment total");
    }

    @Test
    void verbsOnOneConnectionCompleteInIssueOrder() {
        Transport a = node(1);
        Transport b = node(2);
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Connection ab = connect(b, a);
        long ptr = seg.pointer(0);
        long key = seg.remoteKey();
        int n = 2000;
        // Completion order is issue order: when verb i completes, verb i-1 has completed.
        // (Checked inside each callback rather than by the order callbacks run in: a
        // callback registered on a future that is already complete runs on the
        // registering thread, concurrently with the I/O thread completing later ones.)
        List<Integer> outOfOrder = Collections.synchronizedList(new ArrayList<>());
        List<CompletableFuture<Long>> adds = new ArrayList<>();
        List<CompletableFuture<Long>> readsAfterWrites = new ArrayList<>();
        CompletableFuture<Long> previous = CompletableFuture.completedFuture(-1L);
        for (int i = 0; i < n; i++) {
            int issue = i;
            CompletableFuture<Long> before = previous;
            CompletableFuture<Long> f = ab.fetchAndAdd(ptr, key, 1);
            f.whenComplete((v, e) -> {
                if (!before.isDone()) {
                    outOfOrder.add(issue);
                }
            });
            adds.add(f);
            previous = f;
            if (i % 100 == 99) {
                // a read issued after a write on the same connection sees it
                byte[] mark = new byte[8];
                Words.putLong(mark, 0, i);
                ab.write(seg.pointer(64), key, mark);
                readsAfterWrites.add(ab.read(seg.pointer(64), key, 8).thenApply(bytes -> Words.getLong(bytes, 0)));
            }
        }
        for (int i = 0; i < n; i++) {
            assertEquals((long) i, await(adds.get(i)), "verbs executed in issue order");
        }
        for (int i = 0; i < readsAfterWrites.size(); i++) {
            assertEquals(100L * i + 99, await(readsAfterWrites.get(i)), "read after write on one connection");
        }
        assertEquals(List.of(), outOfOrder, "verbs that completed before the verb issued just before them");
        assertEquals(n, seg.readLong(0));
    }

    @Test
    void batchPostsInOrderOnSubmit() {
        Transport a = node(1);
        Transport b = node(2);
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Connection ab = connect(b, a);
        long key = seg.remoteKey();
        Batch batch = ab.batch();
        byte[] data = {1, 2, 3, 4, 5, 6, 7, 8};
        CompletableFuture<Void> w = batch.write(seg.pointer(0), key, data);
        data[0] = 99; // the batch copied the bytes
        CompletableFuture<byte[]> r = batch.read(seg.pointer(0), key, 8);
        CompletableFuture<Long> cas = batch.compareAndSwap(seg.pointer(0), key, Words.getLong(
                new byte[]{1, 2, 3, 4, 5, 6, 7, 8}, 0), 10);
        CompletableFuture<Long> faa = batch.fetchAndAdd(seg.pointer(0), key, 5);
        assertEquals(4, batch.size());
        assertFalse(w.isDone(), "nothing is posted before submit");
        batch.submit();
        await(w);
        assertArrayEquals(new byte[]{1, 2, 3, 4, 5, 6, 7, 8}, await(r));
        assertEquals(Words.getLong(new byte[]{1, 2, 3, 4, 5, 6, 7, 8}, 0), await(cas));
        assertEquals(10L, await(faa));
        assertEquals(15L, seg.readLong(0));
        assertThrows(IllegalStateException.class, batch::submit, "a batch is submitted once");
    }

    @Test
    void aWriteWhoseSourceRangeIsOutsideItsArrayFailsAndTouchesNothing() {
        Transport a = node(1);
        Transport b = node(2);
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Connection ab = connect(b, a);
        byte[] src = new byte[16];
        Arrays.fill(src, (byte) 7);
        for (int[] range : new int[][]{{-1, 4}, {0, 17}, {12, 8}, {0, -1}}) {
            ExecutionException direct = assertThrows(ExecutionException.class,
                    () -> ab.write(seg.pointer(0), seg.remoteKey(), src, range[0], range[1]).get(10, TimeUnit.SECONDS));
            assertTrue(direct.getCause() instanceof IllegalArgumentException, "connection: " + direct.getCause());
            Batch batch = ab.batch();
            CompletableFuture<Void> batched = batch.write(seg.pointer(0), seg.remoteKey(), src, range[0], range[1]);
            batch.submit();
            ExecutionException inBatch = assertThrows(ExecutionException.class, () -> batched.get(10, TimeUnit.SECONDS));
            assertTrue(inBatch.getCause() instanceof IllegalArgumentException, "batch: " + inBatch.getCause());
        }
        assertEquals(0L, seg.readLong(0), "nothing was written");
        assertEquals(0L, seg.readLong(8), "nothing was written");
    }

    @Test
    void everyBadInputIsRefusedWithItsTypedErrorAndTouchesNothing() {
        Transport a = node(1);
        Transport b = node(2);
        Segment rwa = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Segment readOnly = a.export(new SegmentSpec(1, SEGMENT_SIZE, Access.READ_ONLY, null));
        Segment noAtomics = a.export(new SegmentSpec(2, SEGMENT_SIZE, Access.READ_WRITE, null));
        long seed = Seeds.seed("membus.contract.seed", "badInputs");
        fillRandom(rwa, seed);
        fillRandom(readOnly, seed + 1);
        fillRandom(noAtomics, seed + 2);
        long[] before = {checksum(rwa), checksum(readOnly), checksum(noAtomics)};
        Connection ab = connect(b, a);
        long key = rwa.remoteKey();
        byte[] eight = new byte[8];
        byte[] big = new byte[4096];

        Map<String, Supplier<CompletableFuture<?>>> wrongKey = Map.of(
                "read", () -> ab.read(rwa.pointer(0), key ^ 1, 8),
                "write", () -> ab.write(rwa.pointer(0), key + 1, eight),
                "cas", () -> ab.compareAndSwap(rwa.pointer(0), 0, 0, 1),
                "faa", () -> ab.fetchAndAdd(rwa.pointer(0), readOnly.remoteKey(), 1));
        wrongKey.forEach((verb, call) -> {
            WrongRemoteKeyException e = assertFails(WrongRemoteKeyException.class, call.get());
            assertTrue(e.getMessage().startsWith("wrong remote key: ptr=1:0+0x0"), verb + ": " + e.getMessage());
            assertFalse(e.getMessage().contains(Long.toString(key)), "a message never shows the key");
        });

        OutOfBoundsException oob = assertFails(OutOfBoundsException.class,
                ab.write(rwa.pointer(SEGMENT_SIZE - 4), key, eight));
        assertEquals("out of bounds: ptr=1:0+0xfffc, node=1, segment=0, offset=65532, length=8, capacity=65536; "
                + "the pointer or length is wrong: offset+length must not exceed the segment's capacity", oob.getMessage());
        assertEquals(SEGMENT_SIZE, oob.capacity());
        assertFails(OutOfBoundsException.class, ab.read(rwa.pointer(SEGMENT_SIZE), key, 1));
        assertFails(OutOfBoundsException.class, ab.read(rwa.pointer(RemotePtr.MAX_OFFSET), key, 8));
        assertFails(OutOfBoundsException.class, ab.write(rwa.pointer(SEGMENT_SIZE - 100), key, big));
        assertFails(OutOfBoundsException.class, ab.compareAndSwap(rwa.pointer(SEGMENT_SIZE), key, 0, 1));
        assertFails(OutOfBoundsException.class, ab.fetchAndAdd(rwa.pointer(SEGMENT_SIZE + 8), key, 1));
        assertFails(BadLengthException.class, ab.read(rwa.pointer(0), key, -1));
        assertFails(BadLengthException.class, ab.read(rwa.pointer(0), key, SegmentTable.MAX_VERB_LENGTH + 1));

        AccessDeniedException denied = assertFails(AccessDeniedException.class,
                ab.write(readOnly.pointer(0), readOnly.remoteKey(), eight));
        assertEquals(Access.WRITE, denied.required());
        assertEquals(Access.READ_ONLY, denied.segmentFlags());
        assertFails(AccessDeniedException.class, ab.compareAndSwap(readOnly.pointer(0), readOnly.remoteKey(), 0, 1));
        assertFails(AccessDeniedException.class, ab.fetchAndAdd(noAtomics.pointer(0), noAtomics.remoteKey(), 1));
        assertFails(AccessDeniedException.class, ab.compareAndSwap(noAtomics.pointer(0), noAtomics.remoteKey(), 0, 1));

        MisalignedAtomicException mis = assertFails(MisalignedAtomicException.class,
                ab.compareAndSwap(rwa.pointer(4), key, 0, 1));
        assertEquals("misaligned atomic: ptr=1:0+0x4, offset=4, alignment=8; "
                + "atomics act on 8-byte words at offsets that are multiples of 8", mis.getMessage());
        assertFails(MisalignedAtomicException.class, ab.fetchAndAdd(rwa.pointer(SEGMENT_SIZE - 9), key, 1));

        UnknownSegmentException unknown = assertFails(UnknownSegmentException.class,
                ab.read(RemotePtr.pack(1, 7, 0), key, 8));
        assertEquals(7, unknown.segmentIndex());
        InvalidPointerException nul = assertFails(InvalidPointerException.class, ab.read(RemotePtr.NULL, key, 8));
        assertEquals(0, nul.ptr());
        InvalidPointerException otherNode = assertFails(InvalidPointerException.class,
                ab.write(RemotePtr.pack(2, 0, 0), key, eight));
        assertEquals(1, otherNode.connectionNode());

        assertArrayEquals(before, new long[]{checksum(rwa), checksum(readOnly), checksum(noAtomics)},
                "refused verbs touched no byte");
        // the connection still works after every refusal
        assertEquals(Words.getLong(await(ab.read(rwa.pointer(0), key, 8)), 0), rwa.readLong(0));
    }

    @Test
    void randomVerbsWithRandomBadFieldsNeverTouchAByte() {
        Transport a = node(1);
        Transport b = node(2);
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        SplittableRandom random = Seeds.random("membus.contract.seed", "randomBadVerbs");
        fillRandom(seg, random.nextLong());
        long before = checksum(seg);
        Connection ab = connect(b, a);
        for (int i = 0; i < 500; i++) {
            long ptr;
            long key = seg.remoteKey();
            int length = random.nextInt(1, 64);
            int kind = random.nextInt(5);
            switch (kind) {
                case 0 -> ptr = seg.pointer(SEGMENT_SIZE + random.nextInt(0, 1000) * 8L);
                case 1 -> {
                    ptr = seg.pointer(random.nextInt((int) SEGMENT_SIZE / 8) * 8L);
                    key = random.nextLong();
                }
                case 2 -> ptr = RemotePtr.pack(1, random.nextInt(3, 256), random.nextLong(RemotePtr.MAX_OFFSET) & ~7L);
                case 3 -> ptr = RemotePtr.pack(random.nextInt(2, 60000), 0, random.nextInt(1000) * 8L);
                default -> {
                    // straddles the end of the segment
                    int inside = random.nextInt(1, 64);
                    ptr = seg.pointer(SEGMENT_SIZE - inside);
                    length = inside + random.nextInt(1, 64);
                }
            }
            if (kind == 1 && key == seg.remoteKey()) {
                continue;
            }
            int verb = kind == 4 ? 0 : random.nextInt(3);
            CompletableFuture<?> f = switch (verb) {
                case 0 -> ab.write(ptr, key, new byte[length]);
                case 1 -> ab.compareAndSwap(ptr, key, random.nextLong(), random.nextLong());
                default -> ab.fetchAndAdd(ptr, key, random.nextLong());
            };
            long p = ptr;
            int round = i;
            Throwable t = assertThrows(RuntimeException.class, () -> await(f), () -> "verb #" + round + " at "
                    + RemotePtr.toString(p) + " should have been refused");
            assertInstanceOf(io.membus.core.error.VerbException.class, t);
        }
        assertEquals(before, checksum(seg), "no refused verb touched a byte");
    }

    @Test
    void deadlinesFireWhenVerbsAreDroppedAndTheConnectionRecoversWhenHealed() {
        Transport a = node(1);
        Transport b = node(2, Duration.ofMillis(300));
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Connection ba = connect(b, a);
        long ptr = seg.pointer(0);

        b.faults().drop(1);
        DsmTimeoutException timeout = assertFails(DsmTimeoutException.class, ba.fetchAndAdd(ptr, seg.remoteKey(), 1));
        assertEquals(1, timeout.nodeId());
        assertEquals(Duration.ofMillis(300), timeout.timeout());
        assertTrue(timeout.getMessage().startsWith("timeout: operation=fetchAndAdd, node=1, timeout=300ms"),
                timeout.getMessage());
        assertEquals(0, seg.readLong(0), "a dropped verb is never executed");

        b.faults().heal(1);
        b.faults().delay(1, Duration.ofMillis(20));
        List<CompletableFuture<Long>> delayed = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            delayed.add(ba.fetchAndAdd(ptr, seg.remoteKey(), 1));
        }
        b.faults().clear();
        CompletableFuture<Long> after = ba.fetchAndAdd(ptr, seg.remoteKey(), 1);
        for (int i = 0; i < delayed.size(); i++) {
            assertEquals((long) i, await(delayed.get(i)), "delayed verbs keep their order");
        }
        assertEquals(20L, await(after), "a verb issued after held ones waits behind them");
    }

    @Test
    void staleIncarnationIsRefused() {
        Transport a = node(1);
        Transport b = node(2);
        a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        PeerInfo old = new PeerInfo(1, a.incarnation() - 1, a.localAddress());
        StaleIncarnationException e = assertThrows(StaleIncarnationException.class,
                () -> RemoteMemory.await(b.connect(old), Duration.ofSeconds(30)));
        assertEquals(1, e.nodeId());
        assertEquals(a.incarnation() - 1, e.expected());
        assertEquals(a.incarnation(), e.actual());
    }

    @Test
    void aClosedNodeFailsFastWithNodeUnavailable() {
        Transport a = node(1);
        Transport b = node(2);
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Connection ba = connect(b, a);
        long key = seg.remoteKey();
        long ptr = seg.pointer(0);
        await(ba.fetchAndAdd(ptr, key, 1));
        a.close();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try {
                await(ba.read(ptr, key, 8));
            } catch (NodeUnavailableException | UnknownSegmentException e) {
                break; // failed fast, with a typed error
            } catch (io.membus.core.error.DsmException e) {
                if (e.code() == io.membus.core.error.ErrorCode.UNKNOWN_SEGMENT) {
                    break;
                }
                throw e;
            }
            if (System.nanoTime() > deadline) {
                fail("verbs on a closed node still succeed after 10s");
            }
        }
        NodeUnavailableException e = assertThrows(NodeUnavailableException.class,
                () -> RemoteMemory.await(b.connect(new PeerInfo(1, a.incarnation(), a.localAddress())),
                        Duration.ofSeconds(30)));
        assertEquals(1, e.nodeId());
    }

    @Test
    void fencingCutsANodeOffBothWays() {
        Transport a = node(1);
        Transport b = node(2);
        Segment segA = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Segment segB = b.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Connection ab = connect(a, b);
        Connection ba = connect(b, a);
        await(ab.fetchAndAdd(segB.pointer(0), segB.remoteKey(), 1));
        await(ba.fetchAndAdd(segA.pointer(0), segA.remoteKey(), 1));

        a.fence(2, "downed by the test");
        assertTrue(a.isFenced(2));
        NodeUnavailableException e = assertFails(NodeUnavailableException.class,
                ab.fetchAndAdd(segB.pointer(0), segB.remoteKey(), 1));
        assertEquals(2, e.nodeId());
        assertThrows(NodeUnavailableException.class, () -> RemoteMemory.await(a.connect(b.self()), Duration.ofSeconds(30)));
        if (targetRefusesFencedInitiators()) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (true) {
                CompletableFuture<Long> f = ba.fetchAndAdd(segA.pointer(0), segA.remoteKey(), 1);
                try {
                    await(f);
                } catch (NodeUnavailableException refused) {
                    break;
                } catch (io.membus.core.error.DsmException other) {
                    fail("fenced initiator should get NodeUnavailableException, got " + other);
                }
                if (System.nanoTime() > deadline) {
                    fail("a fenced initiator's verbs still succeed after 10s");
                }
            }
            long frozen = segA.readLong(0);
            assertFails(NodeUnavailableException.class, ba.fetchAndAdd(segA.pointer(0), segA.remoteKey(), 1));
            assertEquals(frozen, segA.readLong(0), "a fenced node's verb is not executed");
        }
    }

    @Test
    void nodesInSeparateProcessesReachTheExactFetchAndAddTotal() throws Exception {
        if (!multiProcess()) {
            return; // this transport reaches only nodes of one JVM; the in-JVM tests cover it
        }
        Transport owner = node(1);
        Segment seg = owner.export(SegmentSpec.of(0, SEGMENT_SIZE));
        int children = 2;
        int iterations = 3000;
        long ptr = seg.pointer(128);
        AtomicLong local = new AtomicLong();
        try (TestJvm jvm = new TestJvm()) {
            for (int i = 0; i < children; i++) {
                int id = 10 + i;
                List<String> args = new ArrayList<>(List.of(transportName(), Integer.toString(id),
                        Integer.toString(owner.nodeId()), Long.toString(owner.incarnation()), owner.localAddress(),
                        Long.toString(ptr), Long.toString(seg.remoteKey()), Integer.toString(iterations)));
                nodeProperties(id).forEach((k, v) -> args.add(k + "=" + v));
                jvm.start(ContractChild.class, args);
            }
            for (int n = 0; n < iterations; n++) {
                ownWordFetchAndAdd(owner, ptr, seg.remoteKey(), 1);
                local.incrementAndGet();
            }
            for (int i = 0; i < children; i++) {
                int code = jvm.await(i, 90);
                assertEquals(0, code, "child " + i + " failed:\n" + jvm.output(i));
                assertTrue(jvm.output(i).contains("DONE " + iterations), jvm.output(i));
            }
        }
        assertEquals(children * (long) iterations + local.get(), seg.readLong(128),
                "fetch-and-add total across processes");
    }

    /**
     * A node adding to a word of its own the way the memory model allows: with a CPU
     * atomic where the transport says those are atomic with peers' verbs, and through
     * a loopback connection otherwise (an RDMA NIC without {@code IBV_ATOMIC_GLOB}).
     */
    private long ownWordFetchAndAdd(Transport owner, long ptr, long key, long delta) {
        if (owner.localAtomicsCoherent()) {
            return owner.table().fetchAndAdd(ptr, key, delta);
        }
        return await(connect(owner, owner).fetchAndAdd(ptr, key, delta));
    }
}
