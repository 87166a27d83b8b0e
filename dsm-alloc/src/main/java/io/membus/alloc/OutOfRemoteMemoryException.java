package io.membus.alloc;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * No heap segment the placement allows has room for the allocation: no free chunk
 * (or run of chunks) and no free block of the size class. The chunk tables are
 * unchanged by the failed attempt. The message carries the usage summary of the
 * heap segments the allocator tried; {@link #usage()} has every segment's row.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class OutOfRemoteMemoryException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final long size;
    private final String placement;
    private final transient HeapUsage usage;

    public OutOfRemoteMemoryException(long size, String placement, HeapUsage usage) {
        super(ErrorCode.OUT_OF_REMOTE_MEMORY, "out of remote memory: size=" + size + ", placement=" + placement
                + ", " + usage.summary()
                + "; free blocks, call GlobalAllocator.trim() on nodes that hold empty chunks, use another placement,"
                + " or export more heap segments");
        this.size = size;
        this.placement = placement;
        this.usage = usage;
    }

    public long size() {
        return size;
    }

    public String placement() {
        return placement;
    }

    /** Usage of the segments tried, read when the allocation failed ({@code null} after deserialization). */
    public HeapUsage usage() {
        return usage;
    }
}
