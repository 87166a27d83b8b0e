package io.membus.core;

import io.membus.core.capability.TransportCapabilities;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.BlockingCallOnTransportThreadException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.SegmentLostException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.replication.AckGate;
import io.membus.core.transport.Batch;
import io.membus.core.transport.Connection;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.Transport;
import io.membus.core.transport.VerbWait;
import io.membus.core.transport.Verbs;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
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
 * <p><b>Routing</b> (replication, docs/replication.md §2.3): a pointer names the logical
 * segment {@code (n, s)}; a verb goes to the node that serves that segment's replica
 * group now ({@link SegmentDirectory#group}), carrying the logical pointer and the group's
 * remote key. No group known: the pointer's own node, exactly as without replication (no
 * lookup at all until the directory has shown a group). {@code SERVING}: its primary.
 * {@code PROMOTING}: the verb is held, costing no thread, in issue order per group, until
 * the directory shows a primary ({@link DirectoryListener#groupChanged}) or the verb's
 * deadline passes (then {@link DsmTimeoutException#notSent}, "promotion in progress").
 * {@code LOST}: {@link SegmentLostException} at once. A verb answered
 * {@link NotPrimaryException} did not run: it is re-issued to the refusing node's hint when
 * that is a live member, else held as for {@code PROMOTING}, within its deadline. A verb
 * run on this node's own table (this node serves the group) completes only once the
 * group's {@link AckGate} says every in-sync copy has it. Verbs released from a hold or
 * re-issued keep their original deadline: their futures fail with
 * {@link DsmTimeoutException} by it.
 *
 * <p><b>Classes behind it</b> (one job each, package-private): {@link GroupRouter} routes a
 * verb to the node serving its replica group and re-issues refused ones, {@link GroupHold}
 * holds verbs while a group promotes, {@link ConnectionOpenings} finds connections and
 * queues verbs behind one still opening, {@link BlockingPath} runs the blocking verbs on
 * the caller's thread where a path allows it, {@link LocalVerbs} runs verbs on this node's
 * own table, {@link NodeBatches} groups a {@link RemoteBatch}'s verbs by node and posts them
 * ({@link BatchedVerb} is one of them); the bounded typed
 * wait is {@link VerbWait} (beside the transport SPI).
 *
 * <p><b>Note:</b> thread-safe; the ordering and visibility rules are those of
 * {@link Verbs}, per target node, and with replication per replica group: verbs of one
 * group issued by one thread go to one primary at a time, and held verbs are released
 * in issue order (a verb refused by a node that stopped being primary is re-issued after
 * the refusal arrived, so verbs issued after it on the same connection, refused too,
 * follow it). The group state is read from the directory on each verb (its lookups see
 * every change whose listener ran); the holds are guarded by their own monitors, and no
 * monitor is held while a verb is issued or a future completed.
 */
public final class RemoteMemory {
    /** Largest byte count one read or write may carry (16 MiB): the application's name for the transports' limit. */
    public static final int MAX_VERB_LENGTH = SegmentTable.MAX_VERB_LENGTH;

    private final Transport transport;
    private final SegmentDirectory directory;
    private final Duration operationTimeout;
    private final long timeoutNanos;
    private final Duration syncWait;
    private final ConnectionOpenings openings;
    private final LocalVerbs local;
    private final GroupRouter router;
    private final BlockingPath blocking;
    private final ReadBursts bursts;

    /**
     * Registers a listener on {@code directory} (for the replica groups' changes, which
     * release held verbs); it stays registered for the directory's life.
     */
    public RemoteMemory(Transport transport, SegmentDirectory directory, Duration operationTimeout) {
        this.transport = transport;
        this.directory = directory;
        this.operationTimeout = operationTimeout;
        this.timeoutNanos = operationTimeout.toNanos();
        this.syncWait = operationTimeout.plusSeconds(1);
        this.openings = new ConnectionOpenings(transport, directory);
        this.local = new LocalVerbs(transport);
        this.router = new GroupRouter(transport, directory, openings, local, operationTimeout);
        this.blocking = new BlockingPath(this, router, openings);
        this.bursts = new ReadBursts(this, router, blocking);
    }

    /**
     * The node's transport, whose type is the transport SPI ({@code io.membus.core.transport}):
     * for a node's assembly, the transports and this layer's own helpers. Application code
     * uses this class's verbs and the application API beside it (docs/design.md, "Application
     * API and transport SPI").
     */
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

    /** This node's exported segment {@code index}, or {@code null} when it exports none by that index. */
    public Segment localSegment(int index) {
        return transport.table().get(index);
    }

    /** The segments this node exports. */
    public List<Segment> localSegments() {
        return transport.table().all();
    }

    /** Whether this node fenced {@code node} (the membership downed it): its verbs are refused here. */
    public boolean isFenced(int node) {
        return transport.isFenced(node);
    }

    /** What this node's transport promises beyond the verbs' contract: decide on these, never on its name. */
    public TransportCapabilities capabilities() {
        return transport.capabilities();
    }

    /**
     * The directory entry of the segment {@code ptr} points into. For a replicated segment
     * it is the group's logical descriptor ({@link ReplicaGroupView#logical()}: node and
     * index of the pointer, the group's size, flags and remote key) while the group is
     * served or promoting, even after the pointer's node died.
     *
     * @throws SegmentLostException when the segment's replica group is lost
     */
    public SegmentDescriptor segmentOf(long ptr) {
        if (ptr == RemotePtr.NULL) {
            throw new InvalidPointerException(ptr, 0, 0);
        }
        if (transport.isClosed()) {
            throw openings.closedException();
        }
        int node = RemotePtr.nodeId(ptr);
        int index = RemotePtr.segmentIndex(ptr);
        if (router.replicated()) {
            ReplicaGroupView v = directory.group(node, index).orElse(null);
            if (v != null && v.logical() != null) {
                if (v.state() == ReplicaGroupView.State.LOST) {
                    throw GroupRouter.lost(v);
                }
                return v.logical();
            }
        }
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

    private long keyOf(long ptr) {
        return segmentOf(ptr).remoteKey();
    }

    /** Issues {@code verb} on {@code ptr}: routed by its replica group, or on its node (this node's own table). */
    private <T> CompletableFuture<T> on(long ptr, Function<Verbs, CompletableFuture<T>> verb) {
        if (router.replicated()) {
            return router.routed(ptr, verb, OperationDeadline.until(System.nanoTime(), timeoutNanos), 0);
        }
        int node = RemotePtr.nodeId(ptr);
        if (node == transport.nodeId() && transport.localAtomicsCoherent()) {
            return verb.apply(local);
        }
        if (ptr == RemotePtr.NULL) {
            return CompletableFuture.failedFuture(new InvalidPointerException(ptr, 0, node));
        }
        return openings.onNode(node, verb::apply, () -> "pointer " + RemotePtr.toString(ptr));
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
        return openings.onNode(node, op, () -> "node " + node);
    }

    // ------------------------------------------------------------------ asynchronous verbs

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
            if (router.replicated()) { // a held or re-issued write runs later: the caller may reuse src once this returns
                IllegalArgumentException bad = Verbs.sourceRangeError(src, offset, length);
                if (bad != null) {
                    return CompletableFuture.failedFuture(bad);
                }
                byte[] copy = java.util.Arrays.copyOfRange(src, offset, offset + length);
                return on(ptr, v -> v.write(ptr, key, copy, 0, length));
            }
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

    // ------------------------------------------------------------------ blocking verbs (BlockingPath)

    public byte[] read(long ptr, int length) {
        return blocking.read(ptr, length);
    }

    /**
     * Reads {@code length} bytes at {@code ptr} into {@code dst[offset..]}: no allocation
     * on a memory-semantics path (the posted path copies the verb's result).
     */
    public void read(long ptr, byte[] dst, int offset, int length) {
        blocking.read(ptr, dst, offset, length);
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
     * <p>With replication the pair needs one connection to the node serving both pointers'
     * groups: when they route to two nodes (or one of them is held while its group
     * promotes) the second read is issued after the first completed (two round trips,
     * the same order). On a posted path to a replicated group, too, the second read waits
     * for the first: a first read refused by a node that stopped being primary is re-issued,
     * and must not land after the second.
     *
     * @throws io.membus.core.error.DsmException the first failure (the first read's when both fail)
     */
    public void readInOrder(long ptrA, byte[] dstA, long ptrB, byte[] dstB) {
        blocking.readInOrder(ptrA, dstA, ptrB, dstB);
    }

    /**
     * Reads {@code dsts[i].length} bytes at {@code ptrs[i]} into {@code dsts[i]} for every
     * {@code i}: the reads are grouped by the node serving them (with replication, the
     * pointer's group's primary, as {@link #read} routes), each node's run as one burst on
     * the calling thread where the path offers it — a tcp lane sends a node's reads in one
     * write and this thread reads the answers (one round trip per 455 reads), a memory path
     * reads them one after the other — and every other node's posted as one batch and awaited.
     * One deadline (the operation timeout, or the thread's {@link OperationDeadline}) covers the call.
     *
     * <p>Each read sees every write that completed before this call began. Reads of one node
     * run in array order (a later one sees every write an earlier one saw) except when one is
     * re-issued after its primary changed (replication); reads of two nodes are not ordered.
     *
     * @throws io.membus.core.error.DsmException a failed read's typed error (naming its pointer):
     *         the lowest index's of the first node in array order; other destinations are then unspecified
     * @throws IllegalArgumentException when the arrays differ in length or a destination is null
     */
    public void readEach(long[] ptrs, byte[][] dsts) {
        bursts.readEach(ptrs, dsts);
    }

    /**
     * Writes {@code src} at {@code ptrW} and then, only if the write succeeded,
     * compare-and-swaps the word at {@code ptrC} from {@code expected} to {@code update}:
     * the swap is ordered after the write and never runs without it (fill, then publish).
     * When both pointers are in one segment and a tcp lane is free, the pair costs one
     * round trip (the CAS travels LINKED to its write); otherwise the write completes
     * before the CAS is issued. With replication both pointers of one segment are in one
     * replica group, so they route to one primary; pointers of two segments (two groups,
     * maybe two primaries) always take the second form: the write, then the CAS.
     *
     * @return the word the CAS found (equal to {@code expected} when it swapped)
     * @throws io.membus.core.error.DsmException the write's failure (its CAS was not run), or the CAS's
     */
    public long writeThenCompareAndSwap(long ptrW, byte[] src, long ptrC, long expected, long update) {
        return blocking.writeThenCompareAndSwap(ptrW, src, ptrC, expected, update);
    }

    /**
     * Writes {@code src} at {@code ptrW}, then reads {@code dstA.length} bytes at
     * {@code ptrA} into {@code dstA} and, after that read, {@code dstB.length} bytes at
     * {@code ptrB} into {@code dstB} (ordered as {@link #readInOrder}). When the three
     * pointers route to one node the three cost one round trip on a network path (one tcp
     * lane call; or three verbs posted in issue order on one connection without
     * replication); otherwise the write is posted and the reads run as
     * {@link #readInOrder}, beside it. It returns once all three completed. For a writer
     * that stores a block (a new map entry) while it looks up where to publish it: the
     * write completes before the call returns, so a CAS issued afterwards publishes
     * written bytes.
     *
     * @throws io.membus.core.error.DsmException the write's failure (it may have run), else the first
     *         read's, else the second's
     */
    public void writeThenReadInOrder(long ptrW, byte[] src, long ptrA, byte[] dstA, long ptrB, byte[] dstB) {
        blocking.writeThenReadInOrder(ptrW, src, ptrA, dstA, ptrB, dstB);
    }

    /**
     * Reads {@code length} bytes at {@code ptr} into native memory at {@code address}
     * (the caller owns {@code length} bytes there: a direct buffer's, a Chronicle native
     * store's). On a memory path the bytes are copied once, segment to destination; over
     * a tcp lane once from the answer; on a posted path through the verb's result.
     */
    public void readToAddress(long ptr, long address, int length) {
        blocking.readToAddress(ptr, address, length);
    }

    /** Writes {@code length} bytes of native memory at {@code address} to {@code ptr} (see {@link #readToAddress}). */
    public void writeFromAddress(long ptr, long address, int length) {
        blocking.writeFromAddress(ptr, address, length);
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

    /** Reads the little-endian word at {@code ptr}. */
    public long readLong(long ptr) {
        return blocking.readLong(ptr);
    }

    public void write(long ptr, byte[] src) {
        write(ptr, src, 0, src.length);
    }

    public void write(long ptr, byte[] src, int offset, int length) {
        blocking.write(ptr, src, offset, length);
    }

    /** Writes the little-endian word at {@code ptr}. */
    public void writeLong(long ptr, long value) {
        blocking.writeLong(ptr, value);
    }

    public long compareAndSwap(long ptr, long expected, long update) {
        return blocking.compareAndSwap(ptr, expected, update);
    }

    public long fetchAndAdd(long ptr, long delta) {
        return blocking.fetchAndAdd(ptr, delta);
    }

    /**
     * Whether a blocking verb on {@code ptr} would run on the caller's thread now (a
     * memory path: this node's segments, or a direct connection with no fault rule and
     * nothing held). Callers that would pipeline verbs to save round trips may issue
     * them one by one instead: on such a path there is no round trip to save.
     */
    public boolean runsDirect(long ptr) {
        return blocking.runsDirect(ptr);
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
     * {@link VerbWait#await}, kept here for its many callers.
     *
     * <p>     * Waits at most {@code wait} for {@code future}. A failure is rethrown as its typed
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
        return VerbWait.await(future, wait);
    }

    // ------------------------------------------------------------------ batches

    /**
     * A batch of verbs on pointers of any nodes: nothing is posted until
     * {@link RemoteBatch#submit()}, which posts each node's verbs as one {@link Batch}
     * of its connection (one wake-up, one flush per node), in the order they were added.
     */
    public RemoteBatch batch() {
        if (transport.isClosed()) {
            throw openings.closedException();
        }
        return new RemoteBatch(new NodeBatches(this, transport, router, openings, local, timeoutNanos));
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
     * <p>With replication "node" is the node serving the pointer's replica group when the
     * verb is added (its primary); a verb of a lost group fails when added; a verb of a
     * promoting group is held on its own at submit (in the order added, per group) and a
     * verb answered {@link NotPrimaryException} is re-issued on its own: the batch's
     * one-flush-per-node holds for the verbs of served groups.
     *
     * <p><b>Note:</b> not thread-safe: one thread fills and submits it, once.
     */
    public static final class RemoteBatch {
        private final NodeBatches verbs;

        private RemoteBatch(NodeBatches verbs) {
            this.verbs = verbs;
        }

        public CompletableFuture<byte[]> read(long ptr, int length) {
            BadLengthException bad = SegmentTable.lengthError(ptr, length);
            if (bad != null) {
                return CompletableFuture.failedFuture(bad);
            }
            return verbs.add(ptr, key -> v -> v.read(ptr, key, length));
        }

        /** Writes {@code src[offset..offset+length)}; the bytes are read at {@link #submit()}. */
        public CompletableFuture<Void> write(long ptr, byte[] src, int offset, int length) {
            if (verbs.replicated()) {
                BatchedVerb.Snapshot snapshot = verbs.snapshot(src, offset, length);
                return verbs.add(ptr, key -> v -> v.write(ptr, key, snapshot.src, snapshot.offset, length));
            }
            return verbs.add(ptr, key -> v -> v.write(ptr, key, src, offset, length));
        }

        public CompletableFuture<Long> compareAndSwap(long ptr, long expected, long update) {
            return verbs.add(ptr, key -> v -> v.compareAndSwap(ptr, key, expected, update));
        }

        public CompletableFuture<Long> fetchAndAdd(long ptr, long delta) {
            return verbs.add(ptr, key -> v -> v.fetchAndAdd(ptr, key, delta));
        }

        /** Verbs added and not yet submitted. */
        public int size() {
            return verbs.size();
        }

        /** Posts every verb added, one batch per node ({@link NodeBatches#submit}). */
        public void submit() {
            verbs.submit();
        }
    }
}
