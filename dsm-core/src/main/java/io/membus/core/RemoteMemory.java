package io.membus.core;

import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.BlockingCallOnTransportThreadException;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.transport.Batch;
import io.membus.core.transport.BlockingVerbs;
import io.membus.core.transport.Connection;
import io.membus.core.transport.DirectConnection;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportThreads;
import io.membus.core.transport.Verbs;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * The whole cluster's memory as seen from one node: verbs on any remote pointer,
 * with the remote key and the connection found from the pointer through the
 * {@link SegmentDirectory} and the {@link Transport}. What the allocator, the
 * coherence layer and the collections use.
 *
 * <p>Pointers to this node's own segments run on its {@link Transport#table()}
 * directly (same checks, no connection) when the transport's local atomics are
 * coherent with peers' verbs, and through a loopback connection otherwise.
 *
 * <p>Naming: plain names ({@code read}, {@code compareAndSwap}, ...) block; the
 * {@code *Async} forms return a future. A blocking form returns or fails by the
 * operation timeout from the call — or the calling thread's {@link OperationDeadline},
 * if earlier — plus {@link OperationDeadline#MARGIN}, and rethrows the typed
 * {@link DsmException}, whose {@link DsmException#mayHaveRun()} says whether the verb
 * may have run; a verb whose operation deadline passed before it was issued fails at
 * once with {@link io.membus.core.error.DsmTimeoutException#notSent}.
 *
 * <p><b>Note:</b> thread-safe; the ordering and visibility rules are those of
 * {@link Verbs}, per target node.
 */
public final class RemoteMemory {
    private final Transport transport;
    private final SegmentDirectory directory;
    private final Duration syncWait;
    private final ConcurrentHashMap<Integer, Opening> openings = new ConcurrentHashMap<>();
    /** Entries in {@code openings}, raised before one is added: zero lets a verb skip the map. */
    private final AtomicInteger openingCount = new AtomicInteger();
    /** Segment descriptors of peers per node id, for direct verbs ({@link #directKey}). */
    private final java.util.concurrent.atomic.AtomicReferenceArray<SegmentDescriptor[]> descriptors =
            new java.util.concurrent.atomic.AtomicReferenceArray<>(RemotePtr.MAX_NODE_ID + 1);
    /** The connection last used per node id (a cache: checked open and of the member's incarnation on use). */
    private final java.util.concurrent.atomic.AtomicReferenceArray<Connection> connections =
            new java.util.concurrent.atomic.AtomicReferenceArray<>(RemotePtr.MAX_NODE_ID + 1);

    public RemoteMemory(Transport transport, SegmentDirectory directory, Duration operationTimeout) {
        this.transport = transport;
        this.directory = directory;
        this.syncWait = operationTimeout.plusSeconds(1);
        this.operationTimeout = operationTimeout;
        this.timeoutNanos = operationTimeout.toNanos();
    }

    private final Duration operationTimeout;
    private final long timeoutNanos;

    public Transport transport() {
        return transport;
    }

    /** The deadline of each blocking verb, and of an operation made of verbs ({@link OperationDeadline}). */
    public Duration operationTimeout() {
        return operationTimeout;
    }

    public SegmentDirectory directory() {
        return directory;
    }

    public int localNodeId() {
        return transport.nodeId();
    }

    /** The directory entry of the segment {@code ptr} points into. */
    public SegmentDescriptor segmentOf(long ptr) {
        if (ptr == RemotePtr.NULL) {
            throw new InvalidPointerException(ptr, 0, 0);
        }
        if (transport.isClosed()) {
            throw closedException();
        }
        int node = RemotePtr.nodeId(ptr);
        int index = RemotePtr.segmentIndex(ptr);
        if (node == transport.nodeId()) {
            Segment s = transport.table().get(index);
            if (s == null) {
                throw new UnknownSegmentException(ptr, 0);
            }
            return s.descriptor();
        }
        SegmentDescriptor d = directory.segment(node, index).orElse(null); // no capturing lambda: a verb allocates nothing
        if (d == null) {
            throw directory.member(node).isPresent() ? new UnknownSegmentException(ptr, 0)
                    : NodeUnavailableException.notSent(node, "not a live member of the cluster (pointer "
                    + RemotePtr.toString(ptr) + ")");
        }
        return d;
    }

    private <T> CompletableFuture<T> on(long ptr, Function<Verbs, CompletableFuture<T>> verb) {
        int node = RemotePtr.nodeId(ptr);
        if (node == transport.nodeId() && transport.localAtomicsCoherent()) {
            return verb.apply(new LocalVerbs());
        }
        if (ptr == RemotePtr.NULL) {
            return CompletableFuture.failedFuture(new InvalidPointerException(ptr, 0, node));
        }
        return onNode(node, verb::apply, () -> "pointer " + RemotePtr.toString(ptr));
    }

    /**
     * Runs {@code op} on the connection to {@code node} (a loopback connection for
     * this node), found as verbs find theirs: the peer from the directory, the
     * connection from the transport; operations issued while the connection opens
     * wait and are submitted in issue order. A node that is not a live member fails
     * the future with {@link NodeUnavailableException}, a connection that cannot
     * open with its typed cause. What {@link io.membus.core.message.Messaging} uses.
     */
    public <T> CompletableFuture<T> onNode(int node, Function<Connection, CompletableFuture<T>> op) {
        return onNode(node, op, () -> "node " + node);
    }

    private <T> CompletableFuture<T> onNode(int node, Function<Connection, CompletableFuture<T>> verb,
                                            java.util.function.Supplier<String> what) {
        if (transport.isClosed()) {
            return CompletableFuture.failedFuture(closedException());
        }
        PeerInfo peer = node == transport.nodeId() ? transport.self() : directory.member(node).orElse(null);
        if (peer == null) {
            return CompletableFuture.failedFuture(NodeUnavailableException.notSent(node,
                    "not a live member of the cluster (" + what.get() + ")"));
        }
        Opening opening = openingCount.get() == 0 ? null : openings.get(node);
        if (opening == null) {
            CompletableFuture<Connection> c = transport.connect(peer);
            if (c.isDone()) {
                return c.isCompletedExceptionally() ? failedLike(c) : verb.apply(c.join());
            }
            Opening fresh = new Opening(c);
            openingCount.incrementAndGet();
            opening = openings.putIfAbsent(node, fresh);
            if (opening == null) {
                opening = fresh;
                c.whenComplete((connection, error) -> drain(node, fresh));
            } else {
                openingCount.decrementAndGet();
            }
        }
        return opening.submit(verb);
    }

    /** A future failed with the typed cause of {@code failed} (not wrapped in a CompletionException). */
    private static <T> CompletableFuture<T> failedLike(CompletableFuture<?> failed) {
        Throwable cause = failed.handle((v, e) -> e).join();
        return CompletableFuture.failedFuture(cause instanceof CompletionException && cause.getCause() != null
                ? cause.getCause() : cause);
    }

    /** Runs, in issue order, the verbs that waited for a connection to open. */
    private void drain(int node, Opening opening) {
        opening.drain();
        if (openings.remove(node, opening)) {
            openingCount.decrementAndGet();
        }
    }

    /**
     * Verbs issued while a connection to their node is still opening. They wait in
     * issue order and are submitted in that order once it opens: chaining each verb
     * on the connection future instead would run them in an unspecified order
     * ({@code CompletableFuture} dependents complete in reverse), breaking the
     * per-connection issue order of {@link Verbs}.
     */
    private static final class Opening {
        private final CompletableFuture<Connection> connection;
        private final ArrayDeque<Runnable> waiting = new ArrayDeque<>();
        private boolean drained;

        Opening(CompletableFuture<Connection> connection) {
            this.connection = connection;
        }

        <T> CompletableFuture<T> submit(Function<Connection, CompletableFuture<T>> verb) {
            synchronized (this) {
                if (!drained) {
                    CompletableFuture<T> result = new CompletableFuture<>();
                    waiting.add(() -> relay(verb, result));
                    return result;
                }
            }
            // Opened (or failed) and every earlier verb submitted: the future is done.
            return connection.isCompletedExceptionally() ? failedLike(connection) : verb.apply(connection.join());
        }

        synchronized void drain() {
            for (Runnable r; (r = waiting.poll()) != null; ) {
                r.run();
            }
            drained = true;
        }

        private <T> void relay(Function<Connection, CompletableFuture<T>> verb, CompletableFuture<T> result) {
            CompletableFuture<T> issued;
            try {
                issued = connection.isCompletedExceptionally() ? failedLike(connection) : verb.apply(connection.join());
            } catch (RuntimeException e) {
                issued = CompletableFuture.failedFuture(e);
            }
            issued.whenComplete((value, error) -> {
                if (error != null) {
                    result.completeExceptionally(error instanceof CompletionException && error.getCause() != null
                            ? error.getCause() : error);
                } else {
                    result.complete(value);
                }
            });
        }
    }

    private long keyOf(long ptr) {
        return segmentOf(ptr).remoteKey();
    }

    /**
     * A batch of verbs on pointers of any nodes: nothing is posted until
     * {@link RemoteBatch#submit()}, which posts each node's verbs as one {@link Batch}
     * of its connection (one wake-up, one flush per node), in the order they were added.
     */
    public RemoteBatch batch() {
        if (transport.isClosed()) {
            throw closedException();
        }
        return new RemoteBatch();
    }

    /** What a verb issued after this node's transport closed fails with: at once, naming the node. */
    private DsmClosedException closedException() {
        return new DsmClosedException("the remote memory of node " + transport.nodeId() + " (its transport "
                + transport.name() + " is closed: the node or Membus instance that owned it was closed)");
    }

    /**
     * Verbs on pointers of any nodes, posted together by {@link #submit()}: per node, in
     * the order they were added, as one {@link Batch} of that node's connection (this
     * node's own pointers run at submit, on the caller's thread). Each verb's future
     * completes with its result or its typed failure; a pointer with no segment or
     * member fails its own verb's future at once (when it is added), a node whose
     * connection cannot open fails its verbs with that connection's error. Deadlines
     * start at {@code submit()}.
     *
     * <p><b>Note:</b> not thread-safe: one thread fills and submits it, once.
     */
    public final class RemoteBatch {
        private final java.util.Map<Integer, java.util.List<Pending<?>>> byNode = new java.util.LinkedHashMap<>();
        private int size;
        private boolean submitted;

        private RemoteBatch() {
        }

        public CompletableFuture<byte[]> read(long ptr, int length) {
            BadLengthException bad = SegmentTable.lengthError(ptr, length);
            if (bad != null) {
                return CompletableFuture.failedFuture(bad);
            }
            return add(ptr, key -> v -> v.read(ptr, key, length));
        }

        /** Writes {@code src[offset..offset+length)}; the bytes are read at {@link #submit()}. */
        public CompletableFuture<Void> write(long ptr, byte[] src, int offset, int length) {
            return add(ptr, key -> v -> v.write(ptr, key, src, offset, length));
        }

        public CompletableFuture<Long> compareAndSwap(long ptr, long expected, long update) {
            return add(ptr, key -> v -> v.compareAndSwap(ptr, key, expected, update));
        }

        public CompletableFuture<Long> fetchAndAdd(long ptr, long delta) {
            return add(ptr, key -> v -> v.fetchAndAdd(ptr, key, delta));
        }

        /** Verbs added and not yet submitted. */
        public int size() {
            return submitted ? 0 : size;
        }

        private <T> CompletableFuture<T> add(long ptr,
                                             java.util.function.LongFunction<Function<Verbs, CompletableFuture<T>>> op) {
            if (submitted) {
                throw new IllegalStateException("batch already submitted: start a new batch");
            }
            CompletableFuture<T> result = new CompletableFuture<>();
            int node = RemotePtr.nodeId(ptr);
            if (ptr == RemotePtr.NULL) {
                result.completeExceptionally(new InvalidPointerException(ptr, 0, node));
                return result;
            }
            long key;
            try {
                key = keyOf(ptr);
            } catch (DsmException e) {
                result.completeExceptionally(e);
                return result;
            }
            byNode.computeIfAbsent(node, n -> new java.util.ArrayList<>()).add(new Pending<>(op.apply(key), result));
            size++;
            return result;
        }

        /** Posts every verb added, one batch per node. */
        public void submit() {
            if (submitted) {
                throw new IllegalStateException("batch already submitted: start a new batch");
            }
            submitted = true;
            byNode.forEach((node, verbs) -> {
                if (node == transport.nodeId() && transport.localAtomicsCoherent()) {
                    LocalVerbs local = new LocalVerbs();
                    verbs.forEach(p -> p.post(local));
                    return;
                }
                onNode(node, connection -> {
                    Batch b = connection.batch();
                    verbs.forEach(p -> p.post(b));
                    b.submit();
                    return CompletableFuture.completedFuture(null);
                }, () -> "node " + node).whenComplete((v, e) -> {
                    if (e != null) { // the connection did not open: none of these verbs was posted
                        Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
                        verbs.forEach(p -> p.result.completeExceptionally(cause));
                    }
                });
            });
            byNode.clear();
        }
    }

    /** One verb of a {@link RemoteBatch}: how to post it, and the future its caller holds. */
    private record Pending<T>(Function<Verbs, CompletableFuture<T>> op, CompletableFuture<T> result) {
        void post(Verbs on) {
            CompletableFuture<T> posted;
            try {
                posted = op.apply(on);
            } catch (RuntimeException e) {
                result.completeExceptionally(e);
                return;
            }
            posted.whenComplete((value, error) -> {
                if (error != null) {
                    result.completeExceptionally(error instanceof CompletionException && error.getCause() != null
                            ? error.getCause() : error);
                } else {
                    result.complete(value);
                }
            });
        }
    }

    public CompletableFuture<byte[]> readAsync(long ptr, int length) {
        BadLengthException bad = SegmentTable.lengthError(ptr, length); // before anything is allocated
        if (bad != null) {
            return CompletableFuture.failedFuture(bad);
        }
        try {
            long key = keyOf(ptr);
            return on(ptr, v -> v.read(ptr, key, length));
        } catch (DsmException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    public CompletableFuture<Void> writeAsync(long ptr, byte[] src, int offset, int length) {
        try {
            long key = keyOf(ptr);
            return on(ptr, v -> v.write(ptr, key, src, offset, length));
        } catch (DsmException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    public CompletableFuture<Void> writeAsync(long ptr, byte[] src) {
        return writeAsync(ptr, src, 0, src.length);
    }

    public CompletableFuture<Long> compareAndSwapAsync(long ptr, long expected, long update) {
        try {
            long key = keyOf(ptr);
            return on(ptr, v -> v.compareAndSwap(ptr, key, expected, update));
        } catch (DsmException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    public CompletableFuture<Long> fetchAndAddAsync(long ptr, long delta) {
        try {
            long key = keyOf(ptr);
            return on(ptr, v -> v.fetchAndAdd(ptr, key, delta));
        } catch (DsmException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    // ------------------------------------------------------------------ blocking verbs
    // On a memory-semantics path (this node's own segments, or a direct connection with no
    // fault rule and nothing held) a blocking verb runs on the caller's thread with the
    // same checks and no future, lambda or boxing; every other path posts the verb and waits.

    public byte[] read(long ptr, int length) {
        BadLengthException bad = SegmentTable.lengthError(ptr, length); // before the array is allocated
        if (bad != null) {
            throw bad;
        }
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                byte[] dst = new byte[length];
                direct.readInto(ptr, directKey(ptr), dst, 0, length);
                return dst;
            } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                forgetKey(ptr); // refused before any effect: posted below with the directory's key
            }
        }
        return awaitVerb(readAsync(ptr, length));
    }

    /**
     * Reads {@code length} bytes at {@code ptr} into {@code dst[offset..]}: no allocation
     * on a memory-semantics path (the posted path copies the verb's result).
     */
    public void read(long ptr, byte[] dst, int offset, int length) {
        if (offset < 0 || length < 0 || offset > dst.length - length) {
            throw new IllegalArgumentException("destination range out of bounds: offset=" + offset + ", length="
                    + length + ", array=" + dst.length);
        }
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.readInto(ptr, directKey(ptr), dst, offset, length);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                forgetKey(ptr);
            }
        }
        System.arraycopy(awaitVerb(readAsync(ptr, length)), 0, dst, offset, length);
    }

    /**
     * Reads {@code dstA.length} bytes at {@code ptrA} into {@code dstA}, then
     * {@code dstB.length} bytes at {@code ptrB} into {@code dstB}: the second read runs
     * after the first has read, so it sees every write the first saw (and maybe later
     * ones) — what a reader needs that checks a word and then the data it guards. When
     * both pointers are on one node, the pair costs one round trip on a network path (one
     * tcp lane call, or two verbs posted in issue order on one connection); on a memory
     * path the two reads run one after the other. Pointers on two nodes are read one
     * after the other.
     *
     * @throws io.membus.core.error.DsmException the first failure (the first read's when both fail)
     */
    public void readInOrder(long ptrA, byte[] dstA, long ptrB, byte[] dstB) {
        if (RemotePtr.nodeId(ptrA) != RemotePtr.nodeId(ptrB)) {
            read(ptrA, dstA, 0, dstA.length);
            read(ptrB, dstB, 0, dstB.length);
            return;
        }
        BlockingVerbs direct = direct(ptrA);
        if (direct != null) {
            try {
                direct.readInOrder(ptrA, directKey(ptrA), dstA, dstA.length, ptrB, directKey(ptrB), dstB, dstB.length);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                forgetKey(ptrA); // refused before any effect: posted below with the directory's keys
                forgetKey(ptrB);
            }
        }
        long until = OperationDeadline.until(System.nanoTime(), timeoutNanos); // one deadline for the pair
        CompletableFuture<byte[]> a = readAsync(ptrA, dstA.length); // one connection runs them in issue order
        CompletableFuture<byte[]> b = readAsync(ptrB, dstB.length);
        System.arraycopy(awaitUntil(a, until), 0, dstA, 0, dstA.length);
        System.arraycopy(awaitUntil(b, until), 0, dstB, 0, dstB.length);
    }

    /**
     * Writes {@code src} at {@code ptrW} and then, only if the write succeeded,
     * compare-and-swaps the word at {@code ptrC} from {@code expected} to {@code update}:
     * the swap is ordered after the write and never runs without it (fill, then publish).
     * When both pointers are in one segment and a tcp lane is free, the pair costs one
     * round trip (the CAS travels LINKED to its write); otherwise the write completes
     * before the CAS is issued.
     *
     * @return the word the CAS found (equal to {@code expected} when it swapped)
     * @throws io.membus.core.error.DsmException the write's failure (its CAS was not run), or the CAS's
     */
    public long writeThenCompareAndSwap(long ptrW, byte[] src, long ptrC, long expected, long update) {
        if (RemotePtr.nodeId(ptrW) == RemotePtr.nodeId(ptrC)
                && RemotePtr.segmentIndex(ptrW) == RemotePtr.segmentIndex(ptrC)) {
            BlockingVerbs direct = direct(ptrW);
            if (direct != null) {
                long key = directKey(ptrW); // one segment, one key: a stale key refuses the write, so the CAS never ran
                try {
                    return direct.writeThenCompareAndSwap(ptrW, key, src, 0, src.length, ptrC, key, expected, update);
                } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                    forgetKey(ptrW); // refused before any effect: both again below with the directory's key
                }
            }
        }
        write(ptrW, src);
        return compareAndSwap(ptrC, expected, update);
    }

    /**
     * Reads {@code length} bytes at {@code ptr} into native memory at {@code address}
     * (the caller owns {@code length} bytes there: a direct buffer's, a Chronicle native
     * store's). On a memory path the bytes are copied once, segment to destination; over
     * a tcp lane once from the answer; on a posted path through the verb's result.
     */
    public void readToAddress(long ptr, long address, int length) {
        checkNative(address, length);
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.readToAddress(ptr, directKey(ptr), address, length);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                forgetKey(ptr);
            }
        }
        byte[] b = awaitVerb(readAsync(ptr, length));
        NATIVE.copyMemory(b, 0, address, length);
    }

    /** Writes {@code length} bytes of native memory at {@code address} to {@code ptr} (see {@link #readToAddress}). */
    public void writeFromAddress(long ptr, long address, int length) {
        checkNative(address, length);
        BadLengthException bad = SegmentTable.lengthError(ptr, length); // before the posted path's copy
        if (bad != null) {
            throw bad;
        }
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.writeFromAddress(ptr, directKey(ptr), address, length);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                forgetKey(ptr);
            }
        }
        byte[] b = new byte[length];
        NATIVE.copyMemory(address, b, BYTE_ARRAY_BASE, length);
        awaitVerb(writeAsync(ptr, b));
    }

    /**
     * Reads {@code dst.remaining()} bytes at {@code ptr} into {@code dst} at its position,
     * then advances the position. A direct buffer is filled through its address
     * ({@link #readToAddress}), a heap one through its array: no intermediate copy on a
     * memory path or a tcp lane.
     *
     * @throws java.nio.ReadOnlyBufferException when {@code dst} is read-only
     */
    public void read(long ptr, java.nio.ByteBuffer dst) {
        if (dst.isReadOnly()) {
            throw new java.nio.ReadOnlyBufferException();
        }
        int n = dst.remaining();
        if (dst.isDirect()) {
            readToAddress(ptr, net.openhft.chronicle.core.Jvm.address(dst) + dst.position(), n);
        } else {
            read(ptr, dst.array(), dst.arrayOffset() + dst.position(), n);
        }
        dst.position(dst.position() + n);
    }

    /** Writes {@code src.remaining()} bytes of {@code src} from its position to {@code ptr}, then advances the position. */
    public void write(long ptr, java.nio.ByteBuffer src) {
        int n = src.remaining();
        if (src.isDirect()) {
            writeFromAddress(ptr, net.openhft.chronicle.core.Jvm.address(src) + src.position(), n);
        } else if (src.hasArray()) {
            write(ptr, src.array(), src.arrayOffset() + src.position(), n);
        } else { // a read-only heap buffer hides its array
            byte[] b = new byte[n];
            src.duplicate().get(b);
            write(ptr, b, 0, n);
        }
        src.position(src.position() + n);
    }

    private static final net.openhft.chronicle.core.UnsafeMemory NATIVE = net.openhft.chronicle.core.UnsafeMemory.MEMORY;
    private static final long BYTE_ARRAY_BASE = net.openhft.chronicle.core.UnsafeMemory.UNSAFE.arrayBaseOffset(
            byte[].class);

    private static void checkNative(long address, int length) {
        if (length < 0 || (address == 0 && length > 0)) {
            throw new IllegalArgumentException("native range invalid: address=" + address + ", length=" + length
                    + "; pass the address of memory you own (a direct buffer's, a native store's)");
        }
    }

    /** Reads the little-endian word at {@code ptr}. */
    public long readLong(long ptr) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                return direct.readLong(ptr, directKey(ptr));
            } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                forgetKey(ptr);
            }
        }
        return Words.getLong(awaitVerb(readAsync(ptr, Long.BYTES)), 0);
    }

    public void write(long ptr, byte[] src) {
        write(ptr, src, 0, src.length);
    }

    public void write(long ptr, byte[] src, int offset, int length) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
            if (badRange != null) {
                throw badRange;
            }
            try {
                direct.write(ptr, directKey(ptr), src, offset, length);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                forgetKey(ptr);
            }
        }
        awaitVerb(writeAsync(ptr, src, offset, length));
    }

    /** Writes the little-endian word at {@code ptr}. */
    public void writeLong(long ptr, long value) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.writeLong(ptr, directKey(ptr), value);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                forgetKey(ptr);
            }
        }
        byte[] b = new byte[Long.BYTES];
        Words.putLong(b, 0, value);
        awaitVerb(writeAsync(ptr, b));
    }

    public long compareAndSwap(long ptr, long expected, long update) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                return direct.compareAndSwap(ptr, directKey(ptr), expected, update);
            } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                forgetKey(ptr);
            }
        }
        return awaitVerb(compareAndSwapAsync(ptr, expected, update));
    }

    public long fetchAndAdd(long ptr, long delta) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                return direct.fetchAndAdd(ptr, directKey(ptr), delta);
            } catch (WrongRemoteKeyException | UnknownSegmentException e) {
                forgetKey(ptr);
            }
        }
        return awaitVerb(fetchAndAddAsync(ptr, delta));
    }

    /**
     * Whether a blocking verb on {@code ptr} would run on the caller's thread now (a
     * memory path: this node's segments, or a direct connection with no fault rule and
     * nothing held). Callers that would pipeline verbs to save round trips may issue
     * them one by one instead: on such a path there is no round trip to save.
     */
    public boolean runsDirect(long ptr) {
        return direct(ptr) instanceof SegmentTable;
    }

    /**
     * Where a blocking verb on {@code ptr} may run now, on the caller's thread: this
     * node's segments (when its local atomics are coherent with peers' verbs), a live
     * member's through its open direct connection with no fault rule and nothing held
     * (a verb run on a {@link SegmentTable} never waits, so it is allowed on a transport
     * thread too), or the blocking lane of its connection ({@link Connection#blockingNow()});
     * else null: post the verb and wait.
     */
    private BlockingVerbs direct(long ptr) {
        if (transport.isClosed()) {
            throw closedException();
        }
        int node = RemotePtr.nodeId(ptr);
        if (node == transport.nodeId()) {
            return ptr != RemotePtr.NULL && transport.localAtomicsCoherent() ? transport.table() : null;
        }
        OperationDeadline.check("verb on " + RemotePtr.toString(ptr), node, operationTimeout); // never sent late
        if (node <= 0 || node >= connections.length() || openingCount.get() != 0) {
            return null;
        }
        Connection c = connections.get(node);
        if (c == null || !c.isOpen() || c.peer().incarnation() != memberIncarnation(node)) {
            c = connectNow(node);
            if (c == null) {
                return null;
            }
        }
        return c.blockingNow();
    }

    /**
     * The remote key of {@code ptr}'s segment for a direct verb: this node's own from its
     * table; a peer's from a cache of the directory's descriptors (the directory's lookup
     * boxes its key), kept per node and segment while the descriptor's incarnation is the
     * connection's. A key gone stale (the segment was exported again) is refused by the
     * target's check before any effect; the caller then forgets it and posts the verb
     * with the directory's key.
     */
    private long directKey(long ptr) {
        int node = RemotePtr.nodeId(ptr);
        int index = RemotePtr.segmentIndex(ptr);
        if (node == transport.nodeId()) {
            return keyOf(ptr);
        }
        SegmentDescriptor[] known = descriptors.get(node);
        if (known == null) {
            known = new SegmentDescriptor[RemotePtr.MAX_SEGMENT_INDEX + 1];
            if (!descriptors.compareAndSet(node, null, known)) {
                known = descriptors.get(node);
            }
        }
        SegmentDescriptor d = known[index];
        Connection c = connections.get(node);
        if (d == null || c == null || d.incarnation() != c.peer().incarnation()) {
            d = segmentOf(ptr);
            known[index] = d; // a racy cache of immutable records: a lost store only costs a lookup
        }
        return d.remoteKey();
    }

    private void forgetKey(long ptr) {
        SegmentDescriptor[] known = descriptors.get(RemotePtr.nodeId(ptr));
        if (known != null) {
            known[RemotePtr.segmentIndex(ptr)] = null;
        }
    }

    /** The incarnation of live member {@code node}, or -1. */
    private long memberIncarnation(int node) {
        PeerInfo p = directory.member(node).orElse(null);
        return p == null ? -1 : p.incarnation();
    }

    /** The open connection to live member {@code node} when the transport has one ready now (cached), else null. */
    private Connection connectNow(int node) {
        PeerInfo peer = directory.member(node).orElse(null);
        if (peer == null) {
            return null;
        }
        CompletableFuture<Connection> f = transport.connect(peer);
        if (!f.isDone() || f.isCompletedExceptionally()) {
            return null;
        }
        Connection c = f.join();
        connections.set(node, c);
        return c;
    }

    /**
     * Waits for a verb's future (bounded by the operation timeout plus a margin) and
     * returns its value, rethrowing a failure as its typed {@link DsmException}.
     */
    public <T> T await(CompletableFuture<T> future) {
        if (OperationDeadline.active()) {
            long left = Math.max(0, OperationDeadline.remainingNanos(syncWait.toNanos()))
                    + OperationDeadline.VERB_GRACE_NANOS;
            return await(future, Duration.ofNanos(Math.min(left, syncWait.toNanos())));
        }
        return await(future, syncWait);
    }

    /**
     * Waits for a blocking verb issued now: until its operation timeout from now (or the
     * thread's {@link OperationDeadline}, if earlier) plus {@link OperationDeadline#VERB_GRACE},
     * the time the transport gets to report the verb's own outcome first.
     */
    private <T> T awaitVerb(CompletableFuture<T> future) {
        return awaitUntil(future, OperationDeadline.until(System.nanoTime(), timeoutNanos));
    }

    private <T> T awaitUntil(CompletableFuture<T> future, long until) {
        if (future.isDone()) {
            return await(future, Duration.ZERO);
        }
        long left = Math.max(0, until - System.nanoTime()) + OperationDeadline.VERB_GRACE_NANOS;
        return await(future, Duration.ofNanos(left));
    }

    /**
     * Waits at most {@code wait} for {@code future}. A failure is rethrown as its typed
     * {@link DsmException} with the caller's stack ({@link DsmException#forCaller()}:
     * the exception the transport thread threw is the cause); a wait that outlasts
     * {@code wait} (a transport that did not enforce its own deadline) is a
     * {@link DsmTimeoutException}.
     *
     * <p>The wait is not interruptible: a verb in flight may already have run at its
     * target (a CAS that claimed something), so abandoning it would leave the caller
     * not knowing what happened. An interrupt that arrives during the wait is kept
     * (the thread's interrupt status is set again when this returns or throws), and
     * the wait stays bounded by {@code wait}; interruptible callers check the status
     * where stopping is safe, between verbs.
     *
     * @throws BlockingCallOnTransportThreadException when called on a transport thread,
     *         where waiting could deadlock (unless the future is already complete)
     */
    public static <T> T await(CompletableFuture<T> future, Duration wait) {
        if (!future.isDone() && TransportThreads.isTransportThread()) {
            throw new BlockingCallOnTransportThreadException(Thread.currentThread().getName());
        }
        long deadline = System.nanoTime() + wait.toNanos();
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return future.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (InterruptedException e) {
                    interrupted = true; // get() cleared the status: wait on for the verb, set it again after
                }
            }
        } catch (ExecutionException | CompletionException e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            if (cause instanceof DsmException de) {
                throw de.forCaller();
            }
            if (cause instanceof RuntimeException re) {
                throw re;
            }
            throw DsmException.internal("operation failed: " + cause, cause);
        } catch (TimeoutException e) {
            // the call's deadline passed while the verb was issued: it may still run
            throw new DsmTimeoutException("await (the call's deadline passed with the verb issued)", -1, wait);
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** This node's own segments, run on the caller's thread with the verb checks. */
    private final class LocalVerbs implements Verbs {
        @Override
        public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
            try {
                return CompletableFuture.completedFuture(transport.table().read(ptr, remoteKey, length));
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
        }

        @Override
        public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
            try {
                transport.table().write(ptr, remoteKey, src, offset, length);
                return CompletableFuture.completedFuture(null);
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
        }

        @Override
        public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
            try {
                return CompletableFuture.completedFuture(transport.table().compareAndSwap(ptr, remoteKey, expected, update));
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
        }

        @Override
        public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
            try {
                return CompletableFuture.completedFuture(transport.table().fetchAndAdd(ptr, remoteKey, delta));
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
        }
    }
}
