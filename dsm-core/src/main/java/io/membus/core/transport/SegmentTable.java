package io.membus.core.transport;

import io.membus.core.Access;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.error.AccessDeniedException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.replication.AckGate;
import io.membus.core.replication.CopyReplica;
import io.membus.core.replication.GroupId;
import io.membus.core.replication.Hosted;
import io.membus.core.replication.HostedTable;
import io.membus.core.replication.ReplicaGroup;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.MisalignedAtomicException;
import io.membus.core.error.OutOfBoundsException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.VerbException;
import io.membus.core.error.WrongRemoteKeyException;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The segments one node exports, by index, and the checked execution of verbs on
 * them: the target side of every software transport ({@code local}, {@code shm}
 * on the initiator's mapping of the target's files, and the tcp soft NIC).
 *
 * <p>Every verb is checked, in this order, before any byte is touched: the
 * pointer is not null and names this table's node; the length is within
 * 0..{@link #MAX_VERB_LENGTH}; the segment is exported; the remote key is the
 * segment's; the access flags allow the verb; the bytes lie inside the segment;
 * an atomic's word is 8-byte aligned. The first failing check throws its
 * {@link VerbException}.
 *
 * <h2>Replication</h2>
 * Beside its own segments the table holds the <em>hosted</em> replica groups
 * ({@link Hosted}: own segments that are replicated, copies of other nodes' logical
 * segments, copies promoted here). A pointer of another node passes {@link #check} only
 * when this node serves its group as primary; a group held only as a copy (or served no
 * more) fails {@link NotPrimaryException} before anything is touched. Every change of a
 * replicated segment goes through its {@link ReplicaGroup} (sequenced, applied, forwarded).
 * A group served by adoption ({@link Hosted#adopted}, shm) passes with no group: its verbs
 * run on the adopted memory as on an own segment, and {@link #gate} is null for it.
 *
 * <p><b>The table never waits for the copies.</b> A verb runs (a replicated change is
 * sequenced, applied and forwarded) and returns; its caller answers once
 * {@link #gate(long)} says every in-sync copy has what the verb changed or saw
 * ({@link AckGate}, null when the segment is not replicated here): tcp's verb executor
 * before it writes the answer, {@link DirectConnection} before it completes the future,
 * {@code RemoteMemory} after a blocking verb ran on a table. The {@code *NoWait} names
 * are the same methods, for executors that want to say so.
 *
 * <p><b>Note:</b> thread-safe. Segments are published with volatile semantics
 * ({@link AtomicReferenceArray}), hosted groups through one volatile copy-on-write
 * {@link HostedTable}; verbs run concurrently from any thread.
 */
public final class SegmentTable implements BlockingVerbs {
    /** Largest byte count one read or write verb may carry (16 MiB). */
    public static final int MAX_VERB_LENGTH = 16 << 20;

    /**
     * The failure of a read or write of {@code length} bytes at {@code ptr} whose length is
     * negative or over {@link #MAX_VERB_LENGTH}, or {@code null}: what an initiator checks
     * before it allocates anything for the verb (a result array, a copy).
     */
    public static BadLengthException lengthError(long ptr, int length) {
        return length < 0 || length > MAX_VERB_LENGTH ? new BadLengthException(ptr, length, MAX_VERB_LENGTH) : null;
    }

    private final int nodeId;
    private final AtomicReferenceArray<Segment> segments = new AtomicReferenceArray<>(RemotePtr.MAX_SEGMENT_INDEX + 1);

    private volatile HostedTable hosted = HostedTable.EMPTY;

    public SegmentTable(int nodeId) {
        this.nodeId = nodeId;
    }

    /** Hosts a replica group (replaces the entry of its group). */
    public synchronized void host(Hosted h) {
        hosted = hosted.with(h);
    }

    /** Stops hosting {@code group}; returns its entry, or null. */
    public synchronized Hosted unhost(int group) {
        Hosted h = hosted.get(group);
        hosted = hosted.without(group);
        return h;
    }

    /** The hosted entry of {@code group}, or null. Allocation-free. */
    public Hosted hosted(int group) {
        return hosted.get(group);
    }

    /** Every hosted group (a snapshot). */
    public List<Hosted> hostedGroups() {
        return hosted.all();
    }


    public int nodeId() {
        return nodeId;
    }

    /**
     * Adds a segment.
     *
     * @throws IllegalStateException when the index is taken
     */
    public void add(Segment segment) {
        if (segment.nodeId() != nodeId) {
            throw new IllegalArgumentException("segment of another node: segment=" + segment + ", table node=" + nodeId);
        }
        if (!segments.compareAndSet(segment.index(), null, segment)) {
            throw new IllegalStateException("segment index taken: node=" + nodeId + ", segment=" + segment.index()
                    + "; unexport it first or choose another index");
        }
    }

    /** Removes and returns the segment at {@code index}, or {@code null}. */
    public Segment remove(int index) {
        return segments.getAndSet(index, null);
    }

    /** The segment at {@code index}, or {@code null}. */
    public Segment get(int index) {
        return index < 0 || index > RemotePtr.MAX_SEGMENT_INDEX ? null : segments.get(index);
    }

    /** A snapshot of the segments. */
    public List<Segment> all() {
        List<Segment> list = new ArrayList<>();
        for (int i = 0; i < segments.length(); i++) {
            Segment s = segments.get(i);
            if (s != null) {
                list.add(s);
            }
        }
        return list;
    }

    /**
     * Runs every check of a verb and returns its segment.
     *
     * @param required {@link Access} flags the verb needs
     * @param atomic   whether the verb is an 8-byte atomic
     * @throws VerbException the first check that fails
     */
    public Segment check(long ptr, long remoteKey, int length, int required, boolean atomic) {
        if (ptr == RemotePtr.NULL) {
            throw new InvalidPointerException(ptr, length, nodeId);
        }
        if (RemotePtr.nodeId(ptr) != nodeId) {
            return checkHosted(ptr, remoteKey, length, required, atomic);
        }
        if (length < 0 || length > MAX_VERB_LENGTH) {
            throw new BadLengthException(ptr, length, MAX_VERB_LENGTH);
        }
        Segment segment = segments.get(RemotePtr.segmentIndex(ptr));
        if (segment == null || !segment.isOpen()) {
            throw new UnknownSegmentException(ptr, length);
        }
        checkSegment(segment, ptr, remoteKey, length, required, atomic);
        if (hosted.size() != 0) {
            Hosted h = hosted.get(GroupId.ofPointer(ptr));
            if (h != null && h.memory() == segment) {
                refuseUnlessServed(h, ptr, length);
            }
        }
        return segment;
    }

    /** A pointer of another node: served here only as the primary of its group. */
    private Segment checkHosted(long ptr, long remoteKey, int length, int required, boolean atomic) {
        Hosted h = hosted.size() == 0 ? null : hosted.get(GroupId.ofPointer(ptr));
        if (h == null) {
            throw new InvalidPointerException(ptr, length, nodeId);
        }
        refuseUnlessServed(h, ptr, length);
        if (length < 0 || length > MAX_VERB_LENGTH) {
            throw new BadLengthException(ptr, length, MAX_VERB_LENGTH);
        }
        Segment segment = h.memory();
        if (!segment.isOpen()) {
            throw new UnknownSegmentException(ptr, length);
        }
        checkSegment(segment, ptr, remoteKey, length, required, atomic);
        return segment;
    }

    private void refuseUnlessServed(Hosted h, long ptr, int length) {
        if (h.adopted()) {
            return; // served here by adoption: no group, no copies (its memory is the dead owner's file)
        }
        ReplicaGroup g = h.primary();
        if (g != null) {
            g.checkServing();
            return;
        }
        CopyReplica c = h.copy();
        throw new NotPrimaryException(nodeId, h.group(), c != null ? c.primary() : 0, c != null ? c.epoch() : 0);
    }

    private static void checkSegment(Segment segment, long ptr, long remoteKey, int length, int required,
                                     boolean atomic) {
        if (segment.remoteKey() != remoteKey) {
            throw new WrongRemoteKeyException(ptr, length);
        }
        if (!Access.allows(segment.flags(), required)) {
            throw new AccessDeniedException(ptr, length, required, segment.flags());
        }
        long offset = RemotePtr.offset(ptr);
        if (offset > segment.size() - length) {
            throw new OutOfBoundsException(ptr, length, segment.size());
        }
        if (atomic && (offset & 7) != 0) {
            throw new MisalignedAtomicException(ptr);
        }
    }

    /** The group this node serves {@code ptr}'s segment as primary of, or null (not replicated here). */
    private ReplicaGroup groupOf(long ptr) {
        if (hosted.size() == 0) {
            return null;
        }
        Hosted h = hosted.get(GroupId.ofPointer(ptr));
        return h == null ? null : h.primary();
    }

    /**
     * The replica group a verb on {@code ptr} must wait for before it answers
     * ({@link io.membus.core.replication.AckGate}), or {@code null} when the pointer's
     * segment is not replicated here. Call it after the verb ran (see {@code AckGate}).
     */
    public AckGate gate(long ptr) {
        return groupOf(ptr);
    }

    /**
     * The future of a verb on {@code ptr} that ran on this table with result {@code value}:
     * complete now when the pointer's segment is not replicated here or its group already
     * acknowledged what the verb may have changed or seen ({@link AckGate#need()} read after
     * the verb ran); else completed by {@link AckGate#whenAcked}, with the failure it reports
     * (no deadline of its own: a caller that must bound the wait adds one). What the
     * asynchronous verbs run on a table (this node's own, a direct connection's target) return.
     */
    public <T> java.util.concurrent.CompletableFuture<T> acked(long ptr, T value) {
        AckGate g = gate(ptr);
        if (g == null) {
            return java.util.concurrent.CompletableFuture.completedFuture(value);
        }
        long need = g.need();
        if (g.acked(need)) {
            return java.util.concurrent.CompletableFuture.completedFuture(value);
        }
        java.util.concurrent.CompletableFuture<T> f = new java.util.concurrent.CompletableFuture<>();
        g.whenAcked(need, failure -> {
            if (failure == null) {
                f.complete(value);
            } else {
                f.completeExceptionally(failure);
            }
        });
        return f;
    }

    public byte[] read(long ptr, long remoteKey, int length) {
        return readNoWait(ptr, remoteKey, length);
    }

    /** {@link #read} (the table never waits for the copies: ask {@link #gate} after it). */
    public byte[] readNoWait(long ptr, long remoteKey, int length) {
        Segment s = check(ptr, remoteKey, length, Access.READ, false);
        byte[] dst = new byte[length];
        s.read(RemotePtr.offset(ptr), dst, 0, length);
        return dst;
    }

    /** Reads {@code length} bytes at {@code ptr} into {@code dst[dstOffset..]}: no allocation. */
    @Override
    public void readInto(long ptr, long remoteKey, byte[] dst, int dstOffset, int length) {
        Segment s = check(ptr, remoteKey, length, Access.READ, false);
        s.read(RemotePtr.offset(ptr), dst, dstOffset, length);
    }

    @Override
    public void readToAddress(long ptr, long remoteKey, long address, int length) {
        Segment s = check(ptr, remoteKey, length, Access.READ, false);
        s.readToAddress(RemotePtr.offset(ptr), address, length);
    }

    @Override
    public void writeFromAddress(long ptr, long remoteKey, long address, int length) {
        writeFromAddressNoWait(ptr, remoteKey, address, length);
    }

    /** {@link #writeFromAddress} (the table never waits for the copies: ask {@link #gate} after it). */
    public void writeFromAddressNoWait(long ptr, long remoteKey, long address, int length) {
        Segment s = check(ptr, remoteKey, length, Access.WRITE, false);
        ReplicaGroup g = groupOf(ptr);
        if (g != null) {
            g.writeFromAddress(RemotePtr.offset(ptr), address, length);
        } else {
            s.writeFromAddress(RemotePtr.offset(ptr), address, length);
        }
    }

    /** Reads the little-endian word at {@code ptr} (any alignment a read allows). */
    @Override
    public long readLong(long ptr, long remoteKey) {
        return readLongNoWait(ptr, remoteKey);
    }

    /** {@link #readLong} (the table never waits for the copies: ask {@link #gate} after it). */
    public long readLongNoWait(long ptr, long remoteKey) {
        Segment s = check(ptr, remoteKey, Long.BYTES, Access.READ, false);
        long offset = RemotePtr.offset(ptr);
        if ((offset & 7) == 0) {
            return s.readLong(offset);
        }
        byte[] b = new byte[Long.BYTES];
        s.read(offset, b, 0, Long.BYTES);
        return io.membus.core.Words.getLong(b, 0);
    }

    /** Writes the little-endian word at {@code ptr} (any alignment a write allows). */
    @Override
    public void writeLong(long ptr, long remoteKey, long value) {
        writeLongNoWait(ptr, remoteKey, value);
    }

    /** {@link #writeLong} (the table never waits for the copies: ask {@link #gate} after it). */
    public void writeLongNoWait(long ptr, long remoteKey, long value) {
        Segment s = check(ptr, remoteKey, Long.BYTES, Access.WRITE, false);
        long offset = RemotePtr.offset(ptr);
        ReplicaGroup g = groupOf(ptr);
        if ((offset & 7) == 0) {
            if (g != null) {
                g.writeLong(offset, value);
            } else {
                s.writeLong(offset, value);
            }
            return;
        }
        byte[] b = new byte[Long.BYTES];
        io.membus.core.Words.putLong(b, 0, value);
        if (g != null) {
            g.write(offset, b, 0, Long.BYTES);
        } else {
            s.write(offset, b, 0, Long.BYTES);
        }
    }

    @Override
    public void write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        writeNoWait(ptr, remoteKey, src, offset, length);
    }

    /** {@link #write} (the table never waits for the copies: ask {@link #gate} after it). */
    public void writeNoWait(long ptr, long remoteKey, byte[] src, int offset, int length) {
        Segment s = check(ptr, remoteKey, length, Access.WRITE, false);
        ReplicaGroup g = groupOf(ptr);
        if (g != null) {
            g.write(RemotePtr.offset(ptr), src, offset, length);
        } else {
            s.write(RemotePtr.offset(ptr), src, offset, length);
        }
    }

    @Override
    public long compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        return compareAndSwapNoWait(ptr, remoteKey, expected, update);
    }

    /** {@link #compareAndSwap} (the table never waits for the copies: ask {@link #gate} after it). */
    public long compareAndSwapNoWait(long ptr, long remoteKey, long expected, long update) {
        Segment s = check(ptr, remoteKey, Long.BYTES, Access.ATOMIC, true);
        ReplicaGroup g = groupOf(ptr);
        return g != null ? g.compareAndSwap(RemotePtr.offset(ptr), expected, update)
                : s.compareAndSwap(RemotePtr.offset(ptr), expected, update);
    }

    @Override
    public long fetchAndAdd(long ptr, long remoteKey, long delta) {
        return fetchAndAddNoWait(ptr, remoteKey, delta);
    }

    /** {@link #fetchAndAdd} (the table never waits for the copies: ask {@link #gate} after it). */
    public long fetchAndAddNoWait(long ptr, long remoteKey, long delta) {
        Segment s = check(ptr, remoteKey, Long.BYTES, Access.ATOMIC, true);
        ReplicaGroup g = groupOf(ptr);
        return g != null ? g.fetchAndAdd(RemotePtr.offset(ptr), delta) : s.fetchAndAdd(RemotePtr.offset(ptr), delta);
    }
}
