package io.membus.transport.rdma;

import io.membus.core.Access;
import io.membus.core.RemotePtr;
import io.membus.core.error.AccessDeniedException;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.MisalignedAtomicException;
import io.membus.core.error.OutOfBoundsException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.VerbException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.transport.SegmentTable;

import java.util.Collection;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * A peer's exported segments as this initiator knows them from the handshake
 * (and later refreshes), and the verb checks run against them <em>before</em>
 * anything is posted. The NIC enforces the rkey and the registered range too, but
 * a NIC refusal moves the reliable connection to the error state and fails every
 * verb behind it; checking here refuses a bad verb alone, with the same typed
 * errors and in the same order as {@link SegmentTable#check}.
 *
 * <p><b>Note:</b> thread-safe: entries are published with volatile semantics
 * ({@link AtomicReferenceArray}); a refresh replaces entries one by one.
 */
public final class RemoteCatalog {
    private final int nodeId;
    private final AtomicReferenceArray<CatalogEntry> entries = new AtomicReferenceArray<>(RemotePtr.MAX_SEGMENT_INDEX + 1);

    public RemoteCatalog(int nodeId) {
        this.nodeId = nodeId;
    }

    public int nodeId() {
        return nodeId;
    }

    /** Replaces the whole catalog with {@code latest}. */
    public void replaceAll(Collection<CatalogEntry> latest) {
        CatalogEntry[] next = new CatalogEntry[entries.length()];
        for (CatalogEntry e : latest) {
            next[e.index()] = e;
        }
        for (int i = 0; i < next.length; i++) {
            entries.set(i, next[i]);
        }
    }

    public CatalogEntry get(int index) {
        return index < 0 || index > RemotePtr.MAX_SEGMENT_INDEX ? null : entries.get(index);
    }

    /**
     * Runs every check of a verb and returns the entry it targets.
     *
     * @param required {@link Access} flags the verb needs
     * @param atomic   whether the verb is an 8-byte atomic
     * @throws VerbException the first check that fails
     */
    public CatalogEntry check(long ptr, long remoteKey, int length, int required, boolean atomic) {
        if (ptr == RemotePtr.NULL || RemotePtr.nodeId(ptr) != nodeId) {
            throw new InvalidPointerException(ptr, length, nodeId);
        }
        if (length < 0 || length > SegmentTable.MAX_VERB_LENGTH) {
            throw new BadLengthException(ptr, length, SegmentTable.MAX_VERB_LENGTH);
        }
        CatalogEntry e = entries.get(RemotePtr.segmentIndex(ptr));
        if (e == null) {
            throw new UnknownSegmentException(ptr, length);
        }
        if (e.remoteKey() != remoteKey) {
            throw new WrongRemoteKeyException(ptr, length);
        }
        if (!Access.allows(e.flags(), required)) {
            throw new AccessDeniedException(ptr, length, required, e.flags());
        }
        long offset = RemotePtr.offset(ptr);
        if (offset > e.size() - length) {
            throw new OutOfBoundsException(ptr, length, e.size());
        }
        if (atomic && (offset & 7) != 0) {
            throw new MisalignedAtomicException(ptr);
        }
        return e;
    }
}
