package io.membus.core;

import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.replication.AckGate;
import io.membus.core.transport.BlockingVerbs;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportThreads;
import io.membus.core.transport.Verbs;
import io.membus.core.transport.VerbWait;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * {@link RemoteMemory}'s blocking verbs. On a memory-semantics path (this node's own
 * segments, or a direct connection with no fault rule and nothing held) or a tcp blocking
 * lane a verb runs on the caller's thread ({@link #direct}) with the same checks and no
 * future, lambda or boxing; every other path posts the verb through {@link RemoteMemory}'s
 * async forms and waits, by the operation's deadline plus
 * {@link OperationDeadline#VERB_GRACE}.
 *
 * <p><b>Note:</b> thread-safe. The caches (the connection last used per node, peers'
 * segment descriptors) are arrays of references to immutable or thread-safe objects,
 * written racily: a lost store only costs a lookup, and every use checks the entry (open,
 * of the member's incarnation; a stale key is refused by the target before any effect and
 * then forgotten). Ordering is {@link Verbs}'s per target; a verb that ran on a table of a
 * replicated group returns only after the group's {@link AckGate} acknowledged it.
 */
final class BlockingPath {
    private static final net.openhft.chronicle.core.UnsafeMemory NATIVE = net.openhft.chronicle.core.UnsafeMemory.MEMORY;
    private static final long BYTE_ARRAY_BASE = net.openhft.chronicle.core.UnsafeMemory.UNSAFE.arrayBaseOffset(
            byte[].class);

    private final RemoteMemory memory;
    private final Transport transport;
    private final SegmentDirectory directory;
    private final GroupRouter router;
    private final ConnectionOpenings openings;
    private final Duration operationTimeout;
    private final long timeoutNanos;
    /** Segment descriptors of peers per node id, for direct verbs ({@link #directKey}). */
    private final AtomicReferenceArray<SegmentDescriptor[]> descriptors =
            new AtomicReferenceArray<>(RemotePtr.MAX_NODE_ID + 1);
    /** The connection last used per node id (a cache: checked open and of the member's incarnation on use). */
    private final AtomicReferenceArray<Connection> connections = new AtomicReferenceArray<>(RemotePtr.MAX_NODE_ID + 1);

    BlockingPath(RemoteMemory memory, GroupRouter router, ConnectionOpenings openings) {
        this.memory = memory;
        this.transport = memory.transport();
        this.directory = memory.directory();
        this.router = router;
        this.openings = openings;
        this.operationTimeout = memory.operationTimeout();
        this.timeoutNanos = operationTimeout.toNanos();
    }

    byte[] read(long ptr, int length) {
        BadLengthException bad = SegmentTable.lengthError(ptr, length); // before the array is allocated
        if (bad != null) {
            throw bad;
        }
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                byte[] dst = new byte[length];
                direct.readInto(ptr, directKey(ptr), dst, 0, length);
                awaitGate(direct, ptr);
                return dst;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr); // refused before any effect: posted below with the directory's key
            }
        }
        return awaitVerb(memory.readAsync(ptr, length));
    }

    void read(long ptr, byte[] dst, int offset, int length) {
        if (offset < 0 || length < 0 || offset > dst.length - length) {
            throw new IllegalArgumentException("destination range out of bounds: offset=" + offset + ", length="
                    + length + ", array=" + dst.length);
        }
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.readInto(ptr, directKey(ptr), dst, offset, length);
                awaitGate(direct, ptr);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        System.arraycopy(awaitVerb(memory.readAsync(ptr, length)), 0, dst, offset, length);
    }

    void readInOrder(long ptrA, byte[] dstA, long ptrB, byte[] dstB) {
        int routeA = router.route(ptrA);
        if (routeA != router.route(ptrB) || routeA == GroupRouter.HELD) {
            read(ptrA, dstA, 0, dstA.length);
            read(ptrB, dstB, 0, dstB.length);
            return;
        }
        BlockingVerbs direct = direct(ptrA);
        if (direct != null) {
            try {
                direct.readInOrder(ptrA, directKey(ptrA), dstA, dstA.length, ptrB, directKey(ptrB), dstB, dstB.length);
                awaitGate(direct, ptrA);
                awaitGate(direct, ptrB);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptrA); // refused before any effect: posted below with the directory's keys
                forgetKey(ptrB);
            }
        }
        long until = OperationDeadline.until(System.nanoTime(), timeoutNanos); // one deadline for the pair
        if (router.replicated()) { // a re-issued first read could land after the second: one after the other
            System.arraycopy(awaitUntil(memory.readAsync(ptrA, dstA.length), until), 0, dstA, 0, dstA.length);
            System.arraycopy(awaitUntil(memory.readAsync(ptrB, dstB.length), until), 0, dstB, 0, dstB.length);
            return;
        }
        CompletableFuture<byte[]> a = memory.readAsync(ptrA, dstA.length); // one connection runs them in issue order
        CompletableFuture<byte[]> b = memory.readAsync(ptrB, dstB.length);
        System.arraycopy(awaitUntil(a, until), 0, dstA, 0, dstA.length);
        System.arraycopy(awaitUntil(b, until), 0, dstB, 0, dstB.length);
    }

    void writeThenReadInOrder(long ptrW, byte[] src, long ptrA, byte[] dstA, long ptrB, byte[] dstB) {
        int routeW = router.route(ptrW);
        int routeA = router.route(ptrA);
        if (routeW == routeA && routeA == router.route(ptrB) && routeA != GroupRouter.HELD) {
            BlockingVerbs direct = direct(ptrW);
            if (direct != null) {
                try {
                    direct.writeThenReadInOrder(ptrW, directKey(ptrW), src, 0, src.length, ptrA, directKey(ptrA), dstA,
                            dstA.length, ptrB, directKey(ptrB), dstB, dstB.length);
                    awaitGate(direct, ptrW);
                    awaitGate(direct, ptrA);
                    awaitGate(direct, ptrB);
                    return;
                } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                    // a stale key or a former primary refuses before any effect; a write that ran before a read was
                    // refused is written again below with the same bytes (harmless): all three with the directory's keys
                    forgetKey(ptrW);
                    forgetKey(ptrA);
                    forgetKey(ptrB);
                }
            }
        }
        long until = OperationDeadline.until(System.nanoTime(), timeoutNanos); // one deadline for the three
        // the write travels beside the reads; the reads keep their order as readInOrder keeps it
        CompletableFuture<Void> w = memory.writeAsync(ptrW, src, 0, src.length);
        RuntimeException readFailure = null;
        try {
            readInOrder(ptrA, dstA, ptrB, dstB);
        } catch (RuntimeException e) {
            readFailure = e;
        }
        awaitUntil(w, until); // the write's failure first
        if (readFailure != null) {
            throw readFailure;
        }
    }

    long writeThenCompareAndSwap(long ptrW, byte[] src, long ptrC, long expected, long update) {
        if (RemotePtr.nodeId(ptrW) == RemotePtr.nodeId(ptrC)
                && RemotePtr.segmentIndex(ptrW) == RemotePtr.segmentIndex(ptrC)) {
            BlockingVerbs direct = direct(ptrW);
            if (direct != null) {
                long key = directKey(ptrW); // one segment, one key: a stale key refuses the write, so the CAS never ran
                try {
                    long found = direct.writeThenCompareAndSwap(ptrW, key, src, 0, src.length, ptrC, key, expected,
                            update);
                    awaitGate(direct, ptrC);
                    return found;
                } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                    forgetKey(ptrW); // refused before any effect: both again below with the directory's key
                }
            }
        }
        write(ptrW, src, 0, src.length);
        return compareAndSwap(ptrC, expected, update);
    }

    void readToAddress(long ptr, long address, int length) {
        checkNative(address, length);
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.readToAddress(ptr, directKey(ptr), address, length);
                awaitGate(direct, ptr);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        byte[] b = awaitVerb(memory.readAsync(ptr, length));
        NATIVE.copyMemory(b, 0, address, length);
    }

    void writeFromAddress(long ptr, long address, int length) {
        checkNative(address, length);
        BadLengthException bad = SegmentTable.lengthError(ptr, length); // before the posted path's copy
        if (bad != null) {
            throw bad;
        }
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.writeFromAddress(ptr, directKey(ptr), address, length);
                awaitGate(direct, ptr);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        byte[] b = new byte[length];
        NATIVE.copyMemory(address, b, BYTE_ARRAY_BASE, length);
        awaitVerb(memory.writeAsync(ptr, b));
    }

    private static void checkNative(long address, int length) {
        if (length < 0 || (address == 0 && length > 0)) {
            throw new IllegalArgumentException("native range invalid: address=" + address + ", length=" + length
                    + "; pass the address of memory you own (a direct buffer's, a native store's)");
        }
    }

    long readLong(long ptr) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                long v = direct.readLong(ptr, directKey(ptr));
                awaitGate(direct, ptr);
                return v;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        return Words.getLong(awaitVerb(memory.readAsync(ptr, Long.BYTES)), 0);
    }

    void write(long ptr, byte[] src, int offset, int length) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
            if (badRange != null) {
                throw badRange;
            }
            try {
                direct.write(ptr, directKey(ptr), src, offset, length);
                awaitGate(direct, ptr);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        awaitVerb(memory.writeAsync(ptr, src, offset, length));
    }

    void writeLong(long ptr, long value) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.writeLong(ptr, directKey(ptr), value);
                awaitGate(direct, ptr);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        byte[] b = new byte[Long.BYTES];
        Words.putLong(b, 0, value);
        awaitVerb(memory.writeAsync(ptr, b));
    }

    long compareAndSwap(long ptr, long expected, long update) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                long v = direct.compareAndSwap(ptr, directKey(ptr), expected, update);
                awaitGate(direct, ptr);
                return v;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        return awaitVerb(memory.compareAndSwapAsync(ptr, expected, update));
    }

    long fetchAndAdd(long ptr, long delta) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                long v = direct.fetchAndAdd(ptr, directKey(ptr), delta);
                awaitGate(direct, ptr);
                return v;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        return awaitVerb(memory.fetchAndAddAsync(ptr, delta));
    }

    /** Whether a blocking verb on {@code ptr} would run on a memory path now ({@link RemoteMemory#runsDirect}). */
    boolean runsDirect(long ptr) {
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
    BlockingVerbs direct(long ptr) {
        if (transport.isClosed()) {
            throw openings.closedException();
        }
        int node = RemotePtr.nodeId(ptr);
        if (router.replicated() && ptr != RemotePtr.NULL) {
            node = router.routeGroup(ptr, node); // the group's primary; a lost group throws here
            if (node == GroupRouter.HELD) {
                return null; // the posted path holds it
            }
        }
        if (node == transport.nodeId()) {
            return ptr != RemotePtr.NULL && transport.localAtomicsCoherent() ? transport.table() : null;
        }
        OperationDeadline.check("verb on " + RemotePtr.toString(ptr), node, operationTimeout); // never sent late
        if (node <= 0 || node >= connections.length() || openings.anyOpening()) {
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
    long directKey(long ptr) {
        int node = RemotePtr.nodeId(ptr);
        int index = RemotePtr.segmentIndex(ptr);
        int target = node;
        if (router.replicated()) { // the cache stays per logical segment (the key is the group's); checked against the primary
            target = router.routeGroup(ptr, node);
            if (target == GroupRouter.HELD || target == transport.nodeId()) {
                return memory.segmentOf(ptr).remoteKey();
            }
        }
        if (node == transport.nodeId()) {
            return memory.segmentOf(ptr).remoteKey();
        }
        SegmentDescriptor[] known = descriptors.get(node);
        if (known == null) {
            known = new SegmentDescriptor[RemotePtr.MAX_SEGMENT_INDEX + 1];
            if (!descriptors.compareAndSet(node, null, known)) {
                known = descriptors.get(node);
            }
        }
        SegmentDescriptor d = known[index];
        Connection c = connections.get(target);
        if (d == null || c == null || d.incarnation() != c.peer().incarnation()) {
            d = memory.segmentOf(ptr);
            known[index] = d; // a racy cache of immutable records: a lost store only costs a lookup
        }
        return d.remoteKey();
    }

    void forgetKey(long ptr) {
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
     * Waits for a blocking verb issued now: until its operation timeout from now (or the
     * thread's {@link OperationDeadline}, if earlier) plus {@link OperationDeadline#VERB_GRACE},
     * the time the transport gets to report the verb's own outcome first.
     */
    private <T> T awaitVerb(CompletableFuture<T> future) {
        return awaitUntil(future, OperationDeadline.until(System.nanoTime(), timeoutNanos));
    }

    <T> T awaitUntil(CompletableFuture<T> future, long until) {
        if (future.isDone()) {
            return VerbWait.await(future, Duration.ZERO);
        }
        long left = Math.max(0, until - System.nanoTime()) + OperationDeadline.VERB_GRACE_NANOS;
        try {
            return VerbWait.await(future, Duration.ofNanos(left));
        } catch (DsmTimeoutException e) {
            DsmTimeoutException notSent = future instanceof RoutedFuture<?> routed ? routed.withdraw() : null;
            throw notSent != null ? notSent : e; // still held (the timer thread was late): it never ran
        }
    }

    /**
     * After a blocking verb ran on a {@link SegmentTable} on this thread (this node's own, or
     * a target's through a direct connection): waits until the group acknowledged it, by the
     * call's deadline ({@link AckGate#await}). Nothing when the table has no gate for it.
     * On a transport thread, where it must not wait, a pending acknowledgement fails the
     * call with {@link DsmTimeoutException} whose {@code mayHaveRun()} is true (the verb ran).
     */
    void awaitGate(BlockingVerbs ran, long ptr) {
        if (!(ran instanceof SegmentTable table)) {
            return; // a tcp lane: the target answered after its copies acked
        }
        AckGate gate = table.gate(ptr);
        if (gate == null) {
            return;
        }
        long need = gate.need();
        if (gate.acked(need)) {
            return;
        }
        if (TransportThreads.isTransportThread()) { // the verb ran: not "not run" (BlockingCallOnTransportThread)
            throw new DsmTimeoutException("verb on " + RemotePtr.toString(ptr) + " ran, but waiting for its replica"
                    + " group's copies to acknowledge it would block transport thread " + Thread.currentThread().getName(),
                    transport.nodeId(), Duration.ZERO, "call the *Async form on a transport thread; its future completes"
                    + " once the copies acknowledged");
        }
        try {
            gate.await(need, OperationDeadline.until(System.nanoTime(), timeoutNanos));
        } catch (NotPrimaryException e) { // the verb ran: its outcome is unknown, never "not sent" (no re-post)
            throw new NodeUnavailableException(e.nodeId(), "the replica group stopped being served here before the"
                    + " verb on " + RemotePtr.toString(ptr) + " was acknowledged by its copies", e);
        }
    }
}
