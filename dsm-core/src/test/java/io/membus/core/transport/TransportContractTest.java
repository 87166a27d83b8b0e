package io.membus.core.transport;

import io.membus.core.Access;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.Words;
import io.membus.core.capability.TransportCapabilities;
import io.membus.core.directory.PeerInfo;
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
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
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
     * Whether this transport carries two-sided messages. False only for {@code rdma}
     * until its SEND/RECV path exists: the messages part then checks that messages
     * are refused with {@link io.membus.core.error.TransportUnavailableException}.
     */
    protected boolean carriesMessages() {
        return true;
    }

    /**
     * Whether an idle connection with no fault rule offers blocking verbs
     * ({@link Connection#blockingNow()}). False only for {@code rdma}, whose verbs
     * complete on the NIC's completion thread.
     */
    protected boolean offersBlockingVerbs() {
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

    /** Hook for subclasses to remove what a child node killed by a test left behind (its files). */
    protected void afterChildKilled(int nodeId) {
    }

    protected Transport node(int nodeId) {
        return node(nodeId, OP_TIMEOUT);
    }

    protected Transport node(int nodeId, Duration operationTimeout) {
        return node(nodeId, operationTimeout, Map.of());
    }

    /** A node with {@code extra} transport settings (paths under membus.transports) besides the subclass's. */
    protected Transport node(int nodeId, Duration operationTimeout, Map<String, String> extra) {
        TransportConfig config = TransportConfig.builder(nodeId)
                .operationTimeout(operationTimeout)
                .connectTimeout(Duration.ofSeconds(10))
                .properties(nodeProperties(nodeId))
                .properties(extra)
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
        assertFalse(e.mayHaveRun(), "a connection that never opened carried nothing: " + e.getMessage());
        assertTrue(e.getMessage().contains("outcome=not-sent"), e.getMessage());
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
        assertFalse(e.mayHaveRun(), "a verb issued after the fence was never sent: " + e.getMessage());
        long before = segB.readLong(0);
        assertEquals(1, before, "only the verb before the fence ran");
        assertFalse(assertThrows(NodeUnavailableException.class,
                () -> RemoteMemory.await(a.connect(b.self()), Duration.ofSeconds(30))).mayHaveRun());
        if (a.capabilities().fencesInitiators()) { // shm's target takes no part in a verb: it cannot refuse one
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

    /**
     * A word value that tells a torn read: both halves carry the same 32 bits (the writer in the
     * top byte, a counter below), so a value made of halves of two writes has unequal halves.
     */
    private static long tiedWord(int writer, int count) {
        long half = ((long) writer << 24 | (count & 0xffffff)) & 0xffffffffL;
        return half << 32 | half;
    }

    /** Null when {@code v} is a value {@link #tiedWord} makes for writers 1..writers (or the initial 0), else why not. */
    private static String notWritten(long v, int writers) {
        long hi = v >>> 32;
        long lo = v & 0xffffffffL;
        if (hi != lo) {
            return String.format("torn: 0x%016x (high half 0x%08x, low half 0x%08x)", v, hi, lo);
        }
        long writer = hi >>> 24;
        return v == 0 || writer >= 1 && writer <= writers ? null : String.format("never written: 0x%016x", v);
    }

    /**
     * Word atomicity of plain reads and writes (see {@link Verbs}): writers on two nodes write one
     * aligned word (alone, and inside longer transfers whose every aligned word they fill, from
     * array offsets of any alignment) while readers on both nodes read it (alone, inside longer
     * reads, at unaligned starts and into unaligned array offsets); every aligned word a read
     * covers whole must be a value some writer wrote, never half of one and half of another.
     * Blocking verbs are used where the connection offers them (tcp lanes: a target thread per
     * lane, so the target's copies really race), posted verbs otherwise.
     */
    @Test
    void anAlignedWordIsReadAndWrittenWholeWhileWritersAndReadersRace() throws Exception {
        Transport a = node(1);
        Transport b = node(2);
        Transport c = node(3);
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        long key = seg.remoteKey();
        long base = seg.pointer(4096); // words at 4096 (the raced word), 4104, 4112, 4120
        long seed = Seeds.seed("membus.words.seed", getClass().getSimpleName() + ".wordAtomicity");
        List<Connection> conns = List.of(connect(b, a), connect(c, a));
        int writers = 2;
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(2500);
        AtomicLong reads = new AtomicLong();
        AtomicLong bad = new AtomicLong();
        java.util.concurrent.atomic.AtomicReference<String> firstBad = new java.util.concurrent.atomic.AtomicReference<>();
        ExecutorService pool = Executors.newFixedThreadPool(5);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int w = 1; w <= writers; w++) {
                int writer = w;
                Connection conn = conns.get(w - 1);
                SplittableRandom rnd = new SplittableRandom(seed + w);
                done.add(pool.submit(() -> {
                    byte[] buf = new byte[8 + 32];
                    for (int n = 1; System.nanoTime() < until; n++) {
                        long v = tiedWord(writer, n);
                        int shape = rnd.nextInt(3);
                        int off = rnd.nextInt(8); // array offset: any alignment
                        int words = shape == 0 ? 1 : 4;
                        for (int i = 0; i < words; i++) {
                            Words.putLong(buf, off + 8 * i, v);
                        }
                        BlockingVerbs v2 = conn.blockingNow();
                        if (v2 != null && shape != 2) {
                            v2.write(base, key, buf, off, 8 * words);
                        } else {
                            await(conn.write(base, key, buf, off, 8 * words));
                        }
                    }
                    return null;
                }));
            }
            for (int r = 0; r < 2; r++) {
                Connection conn = conns.get(r);
                SplittableRandom rnd = new SplittableRandom(seed + 10 + r);
                done.add(pool.submit(() -> {
                    byte[] dst = new byte[8 + 32];
                    while (System.nanoTime() < until) {
                        int shape = rnd.nextInt(4);
                        int off = rnd.nextInt(8);
                        // shape 0: the word alone; 1: the four words; 2: from byte 4 of the first word, 24 bytes
                        // (words 2 and 3 whole); 3: a posted read of the four words
                        long from = shape == 2 ? base + 4 : base;
                        int length = shape == 0 ? 8 : shape == 2 ? 24 : 32;
                        BlockingVerbs v2 = conn.blockingNow();
                        if (v2 != null && shape != 3) {
                            v2.readInto(from, key, dst, off, length);
                        } else {
                            System.arraycopy(await(conn.read(from, key, length)), 0, dst, off, length);
                        }
                        int firstWhole = shape == 2 ? 4 : 0;
                        for (int at = firstWhole; at + 8 <= length; at += 8) {
                            String why = notWritten(Words.getLong(dst, off + at), writers);
                            if (why != null) {
                                bad.incrementAndGet();
                                firstBad.compareAndSet(null, why + " at word " + (from + at - base) / 8
                                        + " of a " + length + "-byte read (shape " + shape + ")");
                            }
                        }
                        reads.incrementAndGet();
                    }
                    return null;
                }));
            }
            // caught between the two stores of a split copy a few times per second with it, none in 2.5 s without
            done.add(pool.submit(pokeOthersUntil(until)));
            for (Future<?> f : done) {
                f.get(60, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        boolean promised = a.capabilities().wholeWords();
        System.out.println(getClass().getSimpleName() + " word atomicity: " + reads.get() + " reads, " + bad.get()
                + " bad" + (promised ? "" : " (whole words not promised by this transport: not asserted)"));
        assertTrue(reads.get() > 0, "no read ran");
        if (promised) {
            assertEquals(0, bad.get(), "reads that returned a word nobody wrote (seed " + seed + "), first: "
                    + firstBad.get());
        }
    }

    /**
     * {@link TransportCapabilities#plainWritesAtomicWithAtomics()}, where a transport declares it: a
     * writer on one node stores one aligned word with plain writes while another node changes it
     * by compare-and-swap (read, then CAS to its own value); every value a read returns and every
     * CAS witness must be one some writer stored whole. Not declared ({@code rdma}): nothing is
     * promised, and the layers above store such words by CAS ({@code WordVerbs}).
     */
    @Test
    void aPlainWriteLandsWholeAgainstCompareAndSwapWhereTheTransportDeclaresIt() throws Exception {
        Transport a = node(1);
        Transport b = node(2);
        Transport c = node(3);
        if (!a.capabilities().plainWritesAtomicWithAtomics()) {
            System.out.println(getClass().getSimpleName() + ": plain writes against atomics not promised; not raced");
            return;
        }
        Segment seg = a.export(SegmentSpec.of(0, SEGMENT_SIZE));
        long key = seg.remoteKey();
        long word = seg.pointer(2048);
        Connection writerConn = connect(b, a);
        Connection casConn = connect(c, a);
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500);
        AtomicLong checked = new AtomicLong();
        java.util.concurrent.atomic.AtomicReference<String> firstBad = new java.util.concurrent.atomic.AtomicReference<>();
        ExecutorService pool = Executors.newFixedThreadPool(3);
        try {
            List<Future<?>> done = new ArrayList<>();
            done.add(pool.submit(() -> {
                byte[] buf = new byte[16];
                for (int n = 1; System.nanoTime() < until; n++) {
                    int off = n & 7; // array offsets of any alignment
                    Words.putLong(buf, off, tiedWord(1, n));
                    BlockingVerbs v = writerConn.blockingNow();
                    if (v != null && (n & 1) == 0) {
                        v.write(word, key, buf, off, 8);
                    } else {
                        await(writerConn.write(word, key, buf, off, 8));
                    }
                }
                return null;
            }));
            done.add(pool.submit(() -> {
                long seen = 0;
                for (int n = 1; System.nanoTime() < until; n++) {
                    long witness = await(casConn.compareAndSwap(word, key, seen, tiedWord(2, n)));
                    String why = notWritten(witness, 2);
                    if (why == null && (n & 3) == 0) {
                        witness = Words.getLong(await(casConn.read(word, key, 8)), 0);
                        why = notWritten(witness, 2);
                    }
                    if (why != null) {
                        firstBad.compareAndSet(null, why + " (CAS " + n + ")");
                    }
                    seen = witness;
                    checked.incrementAndGet();
                }
                return null;
            }));
            done.add(pool.submit(pokeOthersUntil(until)));
            for (Future<?> f : done) {
                f.get(60, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        System.out.println(getClass().getSimpleName() + " plain writes against CAS: " + checked.get() + " CAS checked");
        assertTrue(checked.get() > 0, "no CAS ran");
        assertNull(firstBad.get(), "a value no writer stored whole");
        assertNull(notWritten(seg.readLong(2048), 2), "the word at the end");
    }

    /**
     * Stops the other threads one at a time at their safepoint polls (Thread.getStackTrace is a handshake
     * with that thread alone), the others running on, until {@code until}: a copy made of two stores is then
     * caught between them far more often than by preemption alone.
     */
    private static java.util.concurrent.Callable<Void> pokeOthersUntil(long until) {
        return () -> {
            Thread self = Thread.currentThread();
            List<Thread> others = new ArrayList<>();
            long refresh = 0;
            while (System.nanoTime() < until) {
                if (System.nanoTime() - refresh > 0) { // new threads (a transport's lanes) join the round
                    others.clear();
                    Thread.getAllStackTraces().keySet().stream().filter(t -> t != self).forEach(others::add);
                    refresh = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(250);
                }
                for (Thread t : others) {
                    t.getStackTrace();
                }
            }
            return null;
        };
    }

    /**
     * A transport promises at least what its kind promises in any configuration
     * ({@link TransportCapabilities#of(String)}, its provider's answer, which launchers decide
     * on before any transport exists), and keeps copies the way its kind says.
     */
    @Test
    void aTransportPromisesAtLeastWhatItsKindPromises() {
        TransportCapabilities kind = TransportCapabilities.of(transportName());
        TransportCapabilities own = node(1).capabilities();
        assertTrue(!kind.wholeWords() || own.wholeWords(), "whole words: kind " + kind + ", transport " + own);
        assertTrue(!kind.plainWritesAtomicWithAtomics() || own.plainWritesAtomicWithAtomics(),
                "plain writes atomic with atomics: kind " + kind + ", transport " + own);
        assertTrue(!kind.fencesInitiators() || own.fencesInitiators(), "fencing: kind " + kind + ", transport " + own);
        assertEquals(kind.replication(), own.replication(), "replication: kind " + kind + ", transport " + own);
    }

    /**
     * {@link TransportCapabilities#segmentFiles()}, where a transport declares it: a file-backed
     * segment whose file is directly in the declared directory is exported, a peer reaches it,
     * and its file stays there when unexported with {@code keepFile}.
     */
    @Test
    void aFileBackedSegmentInTheDeclaredDirectoryIsExportedThere() throws Exception {
        Transport a = node(1);
        Transport b = node(2);
        var files = a.capabilities().segmentFiles();
        if (files.isEmpty()) {
            return; // any directory does: nothing declared to check
        }
        java.nio.file.Path file = files.get().directory().resolve("node-1-persistent-7.seg");
        try {
            Segment seg = a.export(new SegmentSpec(7, SEGMENT_SIZE, Access.ALL, file));
            assertEquals(file, seg.file());
            Connection ba = connect(b, a);
            await(ba.write(seg.pointer(64), seg.remoteKey(), new byte[]{1, 2, 3, 4, 5, 6, 7, 8}, 0, 8));
            assertArrayEquals(new byte[]{1, 2, 3, 4, 5, 6, 7, 8}, await(ba.read(seg.pointer(64), seg.remoteKey(), 8)));
            assertTrue(a.unexport(7, true));
            assertTrue(java.nio.file.Files.isRegularFile(file), "kept: " + file);
        } finally {
            java.nio.file.Files.deleteIfExists(file);
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

    // ------------------------------------------------------------------ messages

    private static final short ECHO = 2;
    private static final short LOG = 3;

    private static byte[] message(long a, long b) {
        byte[] p = new byte[16];
        Words.putLong(p, 0, a);
        Words.putLong(p, 8, b);
        return p;
    }

    /** Waits (bounded, polling) until {@code condition} holds. */
    protected static void eventually(java.util.function.BooleanSupplier condition, Supplier<String> what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("not within 30 s: " + what.get());
            }
            try {
                Thread.sleep(2);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }

    private static io.membus.core.message.ChannelStats statsOf(Transport t, short channel) {
        return t.messages().stats().stream().filter(s -> s.channel() == (channel & 0xffff)).findFirst()
                .orElseThrow(() -> new AssertionError("no counters of channel " + channel + " on node " + t.nodeId()));
    }

    @Test
    void messagesOfOneSenderAreHandledInOrderAndRequestsGetTheirReplies() {
        if (!carriesMessages()) {
            return; // see aTransportWithoutMessagesRefusesThemWithATypedError
        }
        Transport a = node(1);
        Transport b = node(2);
        List<Long> seen = Collections.synchronizedList(new ArrayList<>());
        List<String> wrongSender = Collections.synchronizedList(new ArrayList<>());
        b.messages().register(LOG, "log", (from, payload) -> {
            if (from != 1) {
                wrongSender.add("from=" + from);
            }
            if (payload.length == 0) {
                return null; // an empty reply
            }
            seen.add(Words.getLong(payload, 8));
            return new byte[]{1}; // ignored for one-way messages
        });
        b.messages().register(ECHO, "echo", (from, payload) -> {
            seen.add(Words.getLong(payload, 8));
            return MessageContractChild.reversed(payload);
        });
        Connection ab = connect(a, b);
        int n = 3000;
        List<CompletableFuture<?>> futures = new ArrayList<>();
        for (long i = 0; i < n; i++) {
            byte[] p = message(1, i);
            if (i % 7 == 3) {
                byte[] expected = MessageContractChild.reversed(p);
                long seq = i;
                futures.add(ab.request(ECHO, p).thenAccept(reply ->
                        assertArrayEquals(expected, reply, "reply to request " + seq)));
            } else {
                CompletableFuture<Void> f = ab.send(LOG, p);
                futures.add(f.thenAccept(v -> assertEquals(null, v, "a one-way message has no reply")));
            }
            p[15] = 99; // the caller may reuse its buffer at once
        }
        for (CompletableFuture<?> f : futures) {
            await(f);
        }
        List<Long> expected = new ArrayList<>();
        for (long i = 0; i < n; i++) {
            expected.add(i);
        }
        assertEquals(expected, seen, "messages of one sender are handled in send order");
        assertEquals(List.of(), wrongSender);
        assertArrayEquals(new byte[0], await(ab.request(LOG, new byte[0])), "an empty payload and an empty reply");

        io.membus.core.message.ChannelStats in = statsOf(b, LOG);
        assertEquals("log", in.name());
        assertEquals(n - n / 7 - (n % 7 > 3 ? 1 : 0) + 1, in.messagesIn());
        io.membus.core.message.ChannelStats out = statsOf(a, ECHO);
        assertEquals("channel-" + ECHO, out.name(), "the sender has no handler of its own for the channel");
        assertEquals(statsOf(b, ECHO).messagesIn(), out.messagesOut());
        assertEquals(16 * out.messagesOut(), out.bytesOut());
        assertEquals(0, in.errors() + out.errors());

        // a node messages itself through a loopback connection, under the same contract
        Connection aa = connect(a, a);
        a.messages().register(ECHO, "echo", (from, payload) -> MessageContractChild.reversed(payload));
        assertArrayEquals(new byte[]{3, 2, 1}, await(aa.request(ECHO, new byte[]{1, 2, 3})));
    }

    @Test
    void aMessageToAChannelWithoutHandlerIsAnsweredWithUnknownChannelAndAThrowingHandlerWithItsFailure() {
        if (!carriesMessages()) {
            return; // see aTransportWithoutMessagesRefusesThemWithATypedError
        }
        Transport a = node(1);
        Transport b = node(2);
        b.messages().register(ECHO, "echo", (from, payload) -> {
            if (payload.length == 1 && payload[0] == 13) {
                throw new IllegalStateException("unlucky payload");
            }
            return payload;
        });
        Connection ab = connect(a, b);
        io.membus.core.error.UnknownChannelException unknown = assertFails(
                io.membus.core.error.UnknownChannelException.class, ab.send((short) 77, new byte[]{1}));
        assertEquals(2, unknown.nodeId());
        assertEquals(77, unknown.channel());
        assertTrue(unknown.getMessage().startsWith("unknown channel: node=2, channel=77"), unknown.getMessage());
        assertFails(io.membus.core.error.UnknownChannelException.class, ab.request((short) -2, new byte[]{1}));
        assertEquals(65534, statsOf(b, (short) -2).channel(), "channel ids are unsigned in counters");

        io.membus.core.error.HandlerFailedException failed = assertFails(
                io.membus.core.error.HandlerFailedException.class, ab.request(ECHO, new byte[]{13}));
        assertEquals(2, failed.nodeId());
        assertEquals(ECHO, failed.channel());
        assertEquals("java.lang.IllegalStateException: unlucky payload", failed.failure());
        assertFails(io.membus.core.error.HandlerFailedException.class, ab.send(ECHO, new byte[]{13}));
        // the connection stays, and later messages are handled
        assertArrayEquals(new byte[]{5}, await(ab.request(ECHO, new byte[]{5})));
        assertEquals(2, statsOf(b, ECHO).errors());
        assertEquals(2, statsOf(a, ECHO).errors(), "the sender counts its failed messages");

        b.messages().unregister(ECHO);
        assertFails(io.membus.core.error.UnknownChannelException.class, ab.request(ECHO, new byte[]{5}));
        assertThrows(IllegalStateException.class, () -> {
            b.messages().register(LOG, "one", (f, p) -> p);
            b.messages().register(LOG, "two", (f, p) -> p);
        }, "a channel has one handler");
    }

    @Test
    void aMessageOrReplyLargerThanTheMaximumIsRefusedWithItsTypedError() {
        if (!carriesMessages()) {
            return; // see aTransportWithoutMessagesRefusesThemWithATypedError
        }
        int max = 1000;
        Transport a = node(1, OP_TIMEOUT, Map.of("messages.max-size", Integer.toString(max)));
        Transport b = node(2, OP_TIMEOUT, Map.of("messages.max-size", Integer.toString(max)));
        b.messages().register(ECHO, "echo", (from, payload) -> payload.length == 1 ? new byte[max + 1] : payload);
        AtomicLong handled = new AtomicLong();
        b.messages().register(LOG, "log", (from, payload) -> {
            handled.incrementAndGet();
            return null;
        });
        Connection ab = connect(a, b);
        assertEquals(max, await(ab.request(ECHO, new byte[max])).length, "exactly the maximum passes");
        io.membus.core.error.MessageTooLargeException e = assertFails(
                io.membus.core.error.MessageTooLargeException.class, ab.request(ECHO, new byte[max + 1]));
        assertEquals(2, e.nodeId());
        assertEquals(max + 1, e.size());
        assertEquals(max, e.maxSize());
        assertTrue(e.getMessage().startsWith("message too large: node=2, channel=2, size=1001, maxSize=1000"),
                e.getMessage());
        assertFails(io.membus.core.error.MessageTooLargeException.class, ab.send(LOG, new byte[max + 1]));
        assertEquals(0, handled.get(), "an oversized message is never handled");
        io.membus.core.error.MessageTooLargeException reply = assertFails(
                io.membus.core.error.MessageTooLargeException.class, ab.request(ECHO, new byte[1]));
        assertEquals(max + 1, reply.size(), "an oversized reply is refused too");
        await(ab.send(LOG, new byte[10]));
        assertEquals(1, handled.get(), "the connection stays");
    }

    @Test
    void aSlowHandlerSlowsItsSenderAndTheInboxNeverHoldsMoreThanItsCredits() throws Exception {
        if (!carriesMessages()) {
            return; // see aTransportWithoutMessagesRefusesThemWithATypedError
        }
        int credits = 4;
        Transport b = node(2, OP_TIMEOUT, Map.of("messages.inbox", Integer.toString(credits)));
        Transport a = node(1);
        Transport c = node(3, Duration.ofMillis(400));
        CountDownLatch release = new CountDownLatch(1);
        List<Long> handled = Collections.synchronizedList(new ArrayList<>());
        b.messages().register(LOG, "slow", (from, payload) -> {
            try {
                assertTrue(release.await(60, TimeUnit.SECONDS));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            handled.add(from * 1_000_000L + Words.getLong(payload, 8));
            return null;
        });
        Connection ab = connect(a, b);
        Connection cb = connect(c, b);
        int n = 40;
        List<CompletableFuture<Void>> fromA = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            fromA.add(ab.send(LOG, message(1, i)));
        }
        // c's messages beyond its credits wait at c and pass their 400 ms deadline there: never sent
        List<CompletableFuture<Void>> fromC = new ArrayList<>();
        for (int i = 0; i < credits + 3; i++) {
            fromC.add(cb.send(LOG, message(3, i)));
        }
        for (int i = credits; i < credits + 3; i++) {
            assertFails(DsmTimeoutException.class, fromC.get(i));
        }
        eventually(() -> statsOf(b, LOG).messagesIn() >= 1, () -> "the handler started");
        for (CompletableFuture<Void> f : fromA) {
            assertFalse(f.isDone(), "no message completes while the handler is blocked");
        }
        release.countDown();
        for (int i = 0; i < n; i++) {
            await(fromA.get(i));
        }
        eventually(() -> handled.size() == n + credits, () -> "handled " + handled.size() + " of " + (n + credits));
        List<Long> fromCHandled = new ArrayList<>();
        List<Long> fromAHandled = new ArrayList<>();
        for (long h : handled) {
            (h >= 3_000_000L ? fromCHandled : fromAHandled).add(h % 1_000_000L);
        }
        assertEquals(List.of(0L, 1L, 2L, 3L), fromCHandled, "only the messages that held a credit were sent");
        assertEquals(n, fromAHandled.size());
        for (int i = 0; i < n; i++) {
            assertEquals((long) i, fromAHandled.get(i), "order of a slowed sender");
        }
        assertEquals(n + credits, statsOf(b, LOG).messagesIn(), "nothing else reached the receiver");
        // c's credits came back with the late answers: it sends again
        b.messages().unregister(LOG);
        b.messages().register(LOG, "fast", (from, payload) -> null);
        await(cb.send(LOG, message(3, 99)));
    }

    @Test
    void theInboxOfASenderHoldsAtMostItsCredits() {
        if (!carriesMessages()) {
            return; // see aTransportWithoutMessagesRefusesThemWithATypedError
        }
        int credits = 3;
        Transport b = node(2, OP_TIMEOUT, Map.of("messages.inbox", Integer.toString(credits)));
        Transport a = node(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicLong running = new AtomicLong();
        b.messages().register(LOG, "slow", (from, payload) -> {
            running.incrementAndGet();
            try {
                assertTrue(release.await(60, TimeUnit.SECONDS));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return null;
        });
        Connection ab = connect(a, b);
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            sent.add(ab.send(LOG, message(1, i)));
        }
        eventually(() -> b.messages().waiting() == credits, () -> "inbox fills to its credits: " + b.messages().waiting());
        // the first message's handler may start a moment after the inbox filled
        eventually(() -> running.get() >= 1, () -> "the handler of the first message runs");
        // give the sender every chance to overrun the inbox, then check it did not: the bound is structural
        for (int i = 0; i < 200 && b.messages().waiting() <= credits; i++) {
            Thread.onSpinWait();
            Thread.yield();
        }
        assertEquals(credits, b.messages().waiting(), "messages held by the receiver");
        assertEquals(1, running.get(), "one handler runs per sender");
        release.countDown();
        for (CompletableFuture<Void> f : sent) {
            await(f);
        }
        assertEquals(0, b.messages().waiting());
    }

    @Test
    void aRequestInFlightFailsWithNodeUnavailableWhenItsReceiverCloses() {
        if (!carriesMessages()) {
            return; // see aTransportWithoutMessagesRefusesThemWithATypedError
        }
        Transport a = node(1);
        Transport b = node(2);
        CountDownLatch entered = new CountDownLatch(1);
        b.messages().register(ECHO, "hang", (from, payload) -> {
            entered.countDown();
            try {
                new CountDownLatch(1).await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt(); // the closing node interrupts its handlers
            }
            return payload;
        });
        Connection ab = connect(a, b);
        CompletableFuture<byte[]> hanging = ab.request(ECHO, new byte[]{1});
        CompletableFuture<byte[]> queued = ab.request(ECHO, new byte[]{2});
        try {
            assertTrue(entered.await(30, TimeUnit.SECONDS), "the handler started");
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
        b.close();
        NodeUnavailableException e = assertFails(NodeUnavailableException.class, hanging);
        assertEquals(2, e.nodeId());
        assertFails(NodeUnavailableException.class, queued);
        eventually(() -> {
            try {
                await(ab.send(ECHO, new byte[]{3}));
                return false;
            } catch (NodeUnavailableException gone) {
                return true;
            }
        }, () -> "messages to a closed node fail with NodeUnavailableException");
    }

    @Test
    void messagesToAFencedOrUnknownNodeFailAtOnceBothWays() {
        if (!carriesMessages()) {
            return; // see aTransportWithoutMessagesRefusesThemWithATypedError
        }
        Transport a = node(1);
        Transport b = node(2);
        AtomicLong handledOnA = new AtomicLong();
        a.messages().register(LOG, "log", (from, payload) -> {
            handledOnA.incrementAndGet();
            return null;
        });
        b.messages().register(LOG, "log", (from, payload) -> null);
        Connection ab = connect(a, b);
        Connection ba = connect(b, a);
        await(ab.send(LOG, new byte[1]));
        await(ba.send(LOG, new byte[1]));
        assertEquals(1, handledOnA.get());

        a.fence(2, "downed by the test");
        NodeUnavailableException e = assertFails(NodeUnavailableException.class, ab.send(LOG, new byte[1]));
        assertEquals(2, e.nodeId());
        assertFails(NodeUnavailableException.class, ab.request(LOG, new byte[1]));
        assertThrows(NodeUnavailableException.class, () -> RemoteMemory.await(a.connect(b.self()), Duration.ofSeconds(30)));
        // the fenced node's messages to a are refused by a, never handled (a takes part in every message)
        eventually(() -> {
            try {
                await(ba.send(LOG, new byte[1]));
                return false;
            } catch (NodeUnavailableException refused) {
                return true;
            }
        }, () -> "a fenced sender's messages are refused");
        assertEquals(1, handledOnA.get(), "no message of a fenced node is handled");

        // by node id: a node that is not a member fails at once, as a verb would
        io.membus.core.directory.StaticDirectory dir = new io.membus.core.directory.StaticDirectory();
        dir.addMember(a.self());
        io.membus.core.message.Messaging m = new io.membus.core.message.Messaging(
                new RemoteMemory(a, dir, OP_TIMEOUT));
        NodeUnavailableException unknown = assertThrows(NodeUnavailableException.class,
                () -> m.send(42, LOG, new byte[1]));
        assertEquals(42, unknown.nodeId());
        a.messages().register(ECHO_OR_LOG, "self", (from, payload) -> new byte[]{(byte) from});
        assertArrayEquals(new byte[]{1}, m.request(1, ECHO_OR_LOG, new byte[]{7}), "to itself by node id");
        m.send(1, ECHO_OR_LOG, new byte[]{7});
    }

    @Test
    void blockingVerbsKeepTheVerbContractAndAreWithdrawnWhileAPostedVerbIsUnsettled() {
        Transport a = node(1);
        Transport b = node(2);
        Segment seg = b.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Connection ab = connect(a, b);
        BlockingVerbs v = ab.blockingNow();
        if (!offersBlockingVerbs()) {
            assertNull(v, "this transport offers no blocking verbs");
            return;
        }
        assertNotNull(v, "an idle connection with no fault rule offers blocking verbs");
        long key = seg.remoteKey();
        long word = seg.pointer(64);
        v.writeLong(word, key, 41);
        assertEquals(41, v.readLong(word, key));
        assertEquals(41, v.fetchAndAdd(word, key, 1), "fetchAndAdd returns the old word");
        assertEquals(42, v.compareAndSwap(word, key, 42, 7), "a CAS that succeeds returns the expected word");
        assertEquals(7, v.compareAndSwap(word, key, 42, 9), "a CAS that fails returns the word it found");
        assertEquals(7, Words.getLong(await(ab.read(word, key, 8)), 0), "posted verbs see blocking ones");
        byte[] data = new byte[300];
        new java.util.Random(7).nextBytes(data);
        v.write(seg.pointer(1000), key, data, 5, 200);
        byte[] back = new byte[210];
        v.readInto(seg.pointer(1000), key, back, 10, 200);
        assertArrayEquals(java.util.Arrays.copyOfRange(data, 5, 205), java.util.Arrays.copyOfRange(back, 10, 210));
        java.nio.ByteBuffer direct = java.nio.ByteBuffer.allocateDirect(300);
        long address = net.openhft.chronicle.core.Jvm.address(direct);
        v.readToAddress(seg.pointer(1000), key, address + 50, 200); // native memory: a direct buffer's
        byte[] viaAddress = new byte[200];
        direct.get(50, viaAddress);
        assertArrayEquals(java.util.Arrays.copyOfRange(data, 5, 205), viaAddress);
        direct.put(0, data, 100, 64);
        v.writeFromAddress(seg.pointer(2000), key, address, 64);
        assertArrayEquals(java.util.Arrays.copyOfRange(data, 100, 164), await(ab.read(seg.pointer(2000), key, 64)));

        // two reads in order: the word, then the bytes it guards; and the first refusal, with the path still usable
        byte[] pairA = new byte[8];
        byte[] pairB = new byte[64];
        v.readInOrder(word, key, pairA, 8, seg.pointer(2000), key, pairB, 64);
        assertEquals(7, Words.getLong(pairA, 0));
        assertArrayEquals(java.util.Arrays.copyOfRange(data, 100, 164), pairB);
        assertThrows(WrongRemoteKeyException.class,
                () -> v.readInOrder(word, key + 1, pairA, 8, seg.pointer(2000), key, pairB, 64));
        assertThrows(OutOfBoundsException.class,
                () -> v.readInOrder(word, key, pairA, 8, seg.pointer(SEGMENT_SIZE - 4), key, pairB, 8));
        assertThrows(WrongRemoteKeyException.class, () -> v.readInOrder(word, key + 1, pairA, 8,
                seg.pointer(SEGMENT_SIZE - 4), key, pairB, 8), "both refused: the first read's error");

        // a write and then a CAS that runs only if the write did: fill, then publish
        long flag = seg.pointer(128);
        byte[] fill = java.util.Arrays.copyOfRange(data, 0, 64);
        assertEquals(0, v.writeThenCompareAndSwap(seg.pointer(3000), key, fill, 0, 64, flag, key, 0, 5));
        assertEquals(5, v.readLong(flag, key), "the CAS ran after its write");
        assertArrayEquals(fill, await(ab.read(seg.pointer(3000), key, 64)));
        assertEquals(5, v.writeThenCompareAndSwap(seg.pointer(3000), key, fill, 0, 64, flag, key, 0, 6),
                "a CAS that fails returns the word it found");
        assertThrows(OutOfBoundsException.class, () -> v.writeThenCompareAndSwap(seg.pointer(SEGMENT_SIZE - 4), key,
                fill, 0, 64, flag, key, 5, 9));
        assertEquals(5, v.readLong(flag, key), "the CAS after a refused write did not run");
        assertThrows(WrongRemoteKeyException.class, () -> v.writeThenCompareAndSwap(seg.pointer(3000), key + 1,
                fill, 0, 64, flag, key, 5, 9));
        assertEquals(5, v.readLong(flag, key), "the CAS after a refused write did not run");

        // a write and then two reads in order (a block stored while its publishing window is read): the reads
        // see the write; a refused write is thrown (the reads ran), then a refused read; the path stays usable
        byte[] block = java.util.Arrays.copyOfRange(data, 64, 128);
        byte[] seenWord = new byte[8];
        byte[] seenBlock = new byte[64];
        v.writeThenReadInOrder(seg.pointer(4000), key, block, 0, 64, flag, key, seenWord, 8, seg.pointer(4000), key,
                seenBlock, 64);
        assertEquals(5, Words.getLong(seenWord, 0));
        assertArrayEquals(block, seenBlock, "the second read saw the write before it");
        assertThrows(WrongRemoteKeyException.class, () -> v.writeThenReadInOrder(seg.pointer(4000), key + 1, fill, 0,
                64, flag, key, seenWord, 8, seg.pointer(SEGMENT_SIZE - 4), key, seenBlock, 8),
                "the write's refusal first");
        assertArrayEquals(block, await(ab.read(seg.pointer(4000), key, 64)), "the refused write changed nothing");
        assertThrows(OutOfBoundsException.class, () -> v.writeThenReadInOrder(seg.pointer(4000), key, fill, 0, 64,
                flag, key, seenWord, 8, seg.pointer(SEGMENT_SIZE - 4), key, seenBlock, 8));
        assertArrayEquals(fill, await(ab.read(seg.pointer(4000), key, 64)), "the write ran before the refused read");

        // the errors are the posted verbs' errors, typed, and the blocking verbs go on working after them
        assertThrows(WrongRemoteKeyException.class, () -> v.readLong(word, key + 1));
        assertThrows(OutOfBoundsException.class, () -> v.readInto(seg.pointer(SEGMENT_SIZE - 4), key, back, 0, 8));
        assertThrows(MisalignedAtomicException.class, () -> v.fetchAndAdd(seg.pointer(65), key, 1));
        assertThrows(UnknownSegmentException.class, () -> v.readLong(RemotePtr.pack(2, 9, 0), key));
        assertEquals(7, v.readLong(word, key), "still usable after refused verbs");

        // a posted verb that is not answered yet withdraws the offer: a blocking verb could overtake it
        b.faults().delay(1, Duration.ofMillis(500));
        byte[] ninetyNine = new byte[8];
        Words.putLong(ninetyNine, 0, 99);
        CompletableFuture<Void> held = ab.write(word, key, ninetyNine, 0, 8);
        if (!held.isDone()) { // a target whose rules reach initiators later (shm) may have run it already
            assertNull(ab.blockingNow(), "no blocking verbs while a posted verb is unsettled");
        }
        b.faults().clear();
        await(held);
        eventually(() -> ab.blockingNow() != null, () -> "blocking verbs are offered again once it settled");
        assertEquals(99, ab.blockingNow().readLong(word, key), "the posted write ran before the blocking read");
    }

    @Test
    void readEachReadsEveryPointerOfEachNodeAsOneBurstAndFailsTypedNamingTheBadPointer() {
        Transport a = node(1);
        Transport b = node(2);
        Transport c = node(3);
        SplittableRandom random = Seeds.random("membus.test.seed", "TransportContractTest.readEach");
        Segment[] segs = {a.export(SegmentSpec.of(0, SEGMENT_SIZE)), b.export(SegmentSpec.of(0, SEGMENT_SIZE)),
                c.export(SegmentSpec.of(0, SEGMENT_SIZE))};
        for (Segment s : segs) {
            fillRandom(s, random.nextLong());
        }
        int n = 40;
        long[] ptrs = new long[n];
        long[] keys = new long[n];
        byte[][] dsts = new byte[n][];
        byte[][] expected = new byte[n][];

        // the verb: one connection's blocking path, every read of the burst on node 2
        Connection ab = connect(a, b);
        BlockingVerbs v = ab.blockingNow();
        if (offersBlockingVerbs()) {
            assertNotNull(v, "an idle connection with no fault rule offers blocking verbs");
            for (int i = 0; i < n; i++) {
                int length = 1 + random.nextInt(300);
                long offset = random.nextInt((int) SEGMENT_SIZE - length);
                ptrs[i] = segs[1].pointer(offset);
                keys[i] = segs[1].remoteKey();
                dsts[i] = new byte[length];
                expected[i] = new byte[length];
                segs[1].read(offset, expected[i], 0, length);
            }
            v.readEach(ptrs, keys, dsts, n);
            for (int i = 0; i < n; i++) {
                assertArrayEquals(expected[i], dsts[i], "read " + i);
            }
            byte[] untouched = dsts[n - 1].clone();
            Arrays.fill(dsts[n - 1], (byte) 0x5a);
            byte[] marked = dsts[n - 1].clone();
            v.readEach(ptrs, keys, dsts, n - 1);
            assertArrayEquals(marked, dsts[n - 1], "only the first count pointers are read");
            dsts[n - 1] = untouched;
            long good = ptrs[n / 2];
            ptrs[n / 2] = segs[1].pointer(SEGMENT_SIZE - 4); // out of bounds for its destination (at least 1 byte)
            dsts[n / 2] = new byte[8];
            OutOfBoundsException oob = assertThrows(OutOfBoundsException.class, () -> v.readEach(ptrs, keys, dsts, n));
            assertEquals(ptrs[n / 2], oob.ptr(), "the error names the bad pointer");
            keys[n / 3] = keys[n / 3] + 1;
            assertThrows(WrongRemoteKeyException.class, () -> v.readEach(ptrs, keys, dsts, n),
                    "both refused: the lower index's error");
            keys[n / 3] = segs[1].remoteKey();
            ptrs[n / 2] = good;
            dsts[n / 2] = new byte[expected[n / 2].length];
            v.readEach(ptrs, keys, dsts, n);
            assertArrayEquals(expected[n / 2], dsts[n / 2], "the path is still usable after refused reads");
        }

        // the application call: pointers of three nodes (this one's own among them) interleaved
        io.membus.core.directory.StaticDirectory dir = new io.membus.core.directory.StaticDirectory();
        for (int i = 0; i < 3; i++) {
            dir.addMember(new Transport[] {a, b, c}[i].self());
            dir.addSegment(segs[i].descriptor());
        }
        RemoteMemory memory = new RemoteMemory(a, dir, OP_TIMEOUT);
        for (int i = 0; i < n; i++) {
            Segment s = segs[random.nextInt(3)];
            int length = 1 + random.nextInt(300);
            long offset = random.nextInt((int) SEGMENT_SIZE - length);
            ptrs[i] = s.pointer(offset);
            dsts[i] = new byte[length];
            expected[i] = new byte[length];
            s.read(offset, expected[i], 0, length);
        }
        memory.readEach(ptrs, dsts);
        for (int i = 0; i < n; i++) {
            assertArrayEquals(expected[i], dsts[i], "read " + i + " at " + RemotePtr.toString(ptrs[i]));
        }
        long bad = segs[2].pointer(SEGMENT_SIZE - 4);
        long[] withBad = ptrs.clone();
        withBad[n / 2] = bad;
        dsts[n / 2] = new byte[8];
        OutOfBoundsException oob = assertThrows(OutOfBoundsException.class, () -> memory.readEach(withBad, dsts));
        assertEquals(bad, oob.ptr(), "the error names the bad pointer");
        withBad[n / 2] = RemotePtr.pack(2, 9, 0);
        UnknownSegmentException unknown = assertThrows(UnknownSegmentException.class,
                () -> memory.readEach(withBad, dsts));
        assertEquals(withBad[n / 2], unknown.ptr());
        withBad[n / 2] = RemotePtr.NULL;
        assertThrows(InvalidPointerException.class, () -> memory.readEach(withBad, dsts));
        assertThrows(BadLengthException.class, () -> memory.readEach(new long[] {ptrs[0]},
                new byte[][] {new byte[RemoteMemory.MAX_VERB_LENGTH + 1]}), "refused before anything is sent");
        assertThrows(IllegalArgumentException.class, () -> memory.readEach(ptrs, new byte[n - 1][]));
        memory.readEach(new long[0], new byte[0][]);

        // a deadline: node 2's reads dropped on the way (an initiator's fault rule: posted and awaited)
        Transport d = node(4, Duration.ofMillis(300));
        dir.addMember(d.self());
        RemoteMemory late = new RemoteMemory(d, dir, Duration.ofMillis(300));
        long[] two = {segs[2].pointer(0), segs[1].pointer(64)};
        byte[][] twoDsts = {new byte[8], new byte[8]};
        late.readEach(two, twoDsts);
        d.faults().drop(2);
        assertThrows(DsmTimeoutException.class, () -> late.readEach(two, twoDsts));
        d.faults().heal(2);
        late.readEach(two, twoDsts);
        byte[] word = new byte[8];
        segs[1].read(64, word, 0, 8);
        assertArrayEquals(word, twoDsts[1], "healed: read again");

        d.close();
        assertThrows(io.membus.core.error.DsmClosedException.class, () -> late.readEach(two, twoDsts));
    }

    private static final short ECHO_OR_LOG = 9;

    @Test
    void aTransportWithoutMessagesRefusesThemWithATypedError() {
        if (carriesMessages()) {
            return; // the rest of the messages part covers it
        }
        Transport a = node(1);
        Transport b = node(2);
        b.messages().register(ECHO, "echo", (from, payload) -> payload);
        Connection ab = connect(a, b);
        assertFails(io.membus.core.error.TransportUnavailableException.class, ab.send(ECHO, new byte[1]));
        assertFails(io.membus.core.error.TransportUnavailableException.class, ab.request(ECHO, new byte[1]));
    }

    @Test
    void manySendersToOneReceiverEveryMessageIsHandledOnceInEachSendersOrder() throws Exception {
        if (!carriesMessages()) {
            return; // see aTransportWithoutMessagesRefusesThemWithATypedError
        }
        Transport receiver = node(1);
        List<Transport> senders = List.of(node(2), node(3), node(4));
        int threadsPerSender = 2;
        int perThread = 600;
        java.util.concurrent.ConcurrentHashMap<Long, Long> next = new java.util.concurrent.ConcurrentHashMap<>();
        List<String> problems = Collections.synchronizedList(new ArrayList<>());
        AtomicLong total = new AtomicLong();
        io.membus.core.message.MessageHandler handler = (from, payload) -> {
            long stream = Words.getLong(payload, 0);
            long seq = Words.getLong(payload, 8);
            if (stream / 100 != from) {
                problems.add("stream " + stream + " from node " + from);
            }
            long expected = next.getOrDefault(stream, 0L);
            if (seq != expected) {
                problems.add("stream " + stream + ": seq " + seq + " where " + expected + " was due");
            }
            next.put(stream, seq + 1);
            total.incrementAndGet();
            return payload;
        };
        receiver.messages().register(LOG, "log", handler);
        receiver.messages().register(ECHO, "echo", handler);
        ExecutorService pool = Executors.newFixedThreadPool(senders.size() * threadsPerSender);
        try {
            List<Future<?>> done = new ArrayList<>();
            CountDownLatch start = new CountDownLatch(1);
            for (Transport s : senders) {
                Connection c = connect(s, receiver);
                for (int t = 0; t < threadsPerSender; t++) {
                    long stream = s.nodeId() * 100L + t;
                    done.add(pool.submit(() -> {
                        start.await();
                        List<CompletableFuture<?>> mine = new ArrayList<>();
                        for (int i = 0; i < perThread; i++) {
                            byte[] p = message(stream, i);
                            mine.add(i % 5 == 0 ? c.request(ECHO, p) : c.send(LOG, p));
                            if (mine.size() >= 100) {
                                await(mine.remove(0));
                            }
                        }
                        for (CompletableFuture<?> f : mine) {
                            await(f);
                        }
                        return null;
                    }));
                }
            }
            start.countDown();
            for (Future<?> f : done) {
                f.get(100, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(List.of(), problems);
        assertEquals((long) senders.size() * threadsPerSender * perThread, total.get(), "every message handled once");
        for (Transport s : senders) {
            for (int t = 0; t < threadsPerSender; t++) {
                assertEquals((long) perThread, next.get(s.nodeId() * 100L + t), "stream of node " + s.nodeId());
            }
        }
    }

    @Test
    void messagesFromSeparateProcessesAreAllHandledInOrder() throws Exception {
        if (!multiProcess() || !carriesMessages()) {
            return; // this transport reaches only nodes of one JVM; the in-JVM tests cover it
        }
        Transport owner = node(1);
        java.util.concurrent.ConcurrentHashMap<Integer, Long> next = new java.util.concurrent.ConcurrentHashMap<>();
        List<String> problems = Collections.synchronizedList(new ArrayList<>());
        owner.messages().register(MessageContractChild.CHANNEL, "children", (from, payload) -> {
            long seq = Words.getLong(payload, 8);
            long expected = next.getOrDefault(from, 0L);
            if (seq != expected || Words.getLong(payload, 0) != from) {
                problems.add("node " + from + ": seq " + seq + " where " + expected + " was due");
            }
            next.put(from, seq + 1);
            return MessageContractChild.reversed(payload);
        });
        int children = 2;
        int count = 2000;
        try (TestJvm jvm = new TestJvm()) {
            for (int i = 0; i < children; i++) {
                int id = 10 + i;
                List<String> args = new ArrayList<>(List.of("send", transportName(), Integer.toString(id),
                        Integer.toString(owner.nodeId()), Long.toString(owner.incarnation()), owner.localAddress(),
                        Integer.toString(count)));
                nodeProperties(id).forEach((k, v) -> args.add(k + "=" + v));
                jvm.start(MessageContractChild.class, args);
            }
            for (int i = 0; i < children; i++) {
                int code = jvm.await(i, 90);
                assertEquals(0, code, "child " + i + " failed:\n" + jvm.output(i));
                assertTrue(jvm.output(i).contains("DONE " + count), jvm.output(i));
            }
        }
        assertEquals(List.of(), problems);
        assertEquals(Map.of(10, (long) count, 11, (long) count), Map.copyOf(next));
    }

    @Test
    void aRequestToAProcessKilledWhileItsHandlerRunsFailsWithNodeUnavailable() throws Exception {
        if (!multiProcess() || !carriesMessages()) {
            return;
        }
        Transport a = node(1);
        int childId = 20;
        try (TestJvm jvm = new TestJvm()) {
            List<String> args = new ArrayList<>(List.of("hang", transportName(), Integer.toString(childId),
                    "-", "-", "-", "-"));
            nodeProperties(childId).forEach((k, v) -> args.add(k + "=" + v));
            Process child = jvm.start(MessageContractChild.class, args);
            eventually(() -> jvm.output(0).contains("READY ") || !child.isAlive(), () -> "child ready");
            String ready = jvm.output(0).lines().filter(l -> l.startsWith("READY ")).findFirst()
                    .orElseThrow(() -> new AssertionError("child failed:\n" + jvm.output(0)));
            String[] f = ready.split(" ", 3);
            Connection c = RemoteMemory.await(a.connect(new PeerInfo(childId, Long.parseLong(f[1]), f[2])),
                    Duration.ofSeconds(30));
            CompletableFuture<byte[]> hanging = c.request(MessageContractChild.CHANNEL, new byte[]{1});
            eventually(() -> jvm.output(0).contains("HANDLING"), () -> "the child's handler runs");
            child.destroyForcibly();
            assertTrue(child.waitFor(30, TimeUnit.SECONDS));
            NodeUnavailableException e = assertFails(NodeUnavailableException.class, hanging);
            assertEquals(childId, e.nodeId());
        } finally {
            afterChildKilled(childId);
        }
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
