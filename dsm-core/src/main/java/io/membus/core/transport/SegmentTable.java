package io.membus.core.transport;

import io.membus.core.Access;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.error.AccessDeniedException;
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
 * <p><b>Note:</b> thread-safe. Segments are published with volatile semantics
 * ({@link AtomicReferenceArray}); verbs run concurrently from any thread.
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

    public SegmentTable(int nodeId) {
        this.nodeId = nodeId;
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
        if (ptr == RemotePtr.NULL || RemotePtr.nodeId(ptr) != nodeId) {
            throw new InvalidPointerException(ptr, length, nodeId);
        }
        if (length < 0 || length > MAX_VERB_LENGTH) {
            throw new BadLengthException(ptr, length, MAX_VERB_LENGTH);
        }
        Segment segment = segments.get(RemotePtr.segmentIndex(ptr));
        if (segment == null || !segment.isOpen()) {
            throw new UnknownSegmentException(ptr, length);
        }
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
        return segment;
    }

    /**
     * The replica group a verb on {@code ptr} must wait for before it answers
     * ({@link io.membus.core.replication.AckGate}), or {@code null} when the pointer's
     * segment is not replicated here. Call it after the verb ran (see {@code AckGate}).
     */
    public io.membus.core.replication.AckGate gate(long ptr) {
        return null;
    }

    public byte[] read(long ptr, long remoteKey, int length) {
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
        Segment s = check(ptr, remoteKey, length, Access.WRITE, false);
        s.writeFromAddress(RemotePtr.offset(ptr), address, length);
    }

    /** Reads the little-endian word at {@code ptr} (any alignment a read allows). */
    @Override
    public long readLong(long ptr, long remoteKey) {
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
        Segment s = check(ptr, remoteKey, Long.BYTES, Access.WRITE, false);
        long offset = RemotePtr.offset(ptr);
        if ((offset & 7) == 0) {
            s.writeLong(offset, value);
            return;
        }
        byte[] b = new byte[Long.BYTES];
        io.membus.core.Words.putLong(b, 0, value);
        s.write(offset, b, 0, Long.BYTES);
    }

    @Override
    public void write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        Segment s = check(ptr, remoteKey, length, Access.WRITE, false);
        s.write(RemotePtr.offset(ptr), src, offset, length);
    }

    @Override
    public long compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        Segment s = check(ptr, remoteKey, Long.BYTES, Access.ATOMIC, true);
        return s.compareAndSwap(RemotePtr.offset(ptr), expected, update);
    }

    @Override
    public long fetchAndAdd(long ptr, long remoteKey, long delta) {
        Segment s = check(ptr, remoteKey, Long.BYTES, Access.ATOMIC, true);
        return s.fetchAndAdd(RemotePtr.offset(ptr), delta);
    }
}
