package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.error.ErrorCode;

/**
 * A read or write through a block reference reaches past the block's capacity.
 * Nothing was read or written.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class BlockBoundsException extends BlockException {
    private static final long serialVersionUID = 1L;

    private final long offset;
    private final long length;
    private final long capacity;

    public BlockBoundsException(long ptr, long offset, long length, long capacity) {
        super(ErrorCode.OUT_OF_BOUNDS, "outside the block: block=" + RemotePtr.toString(ptr) + ", offset=" + offset + ", length=" + length
                + ", capacity=" + capacity + "; offset and length must satisfy 0 <= offset, 0 <= length, offset+length <= capacity", ptr);
        this.offset = offset;
        this.length = length;
        this.capacity = capacity;
    }

    public long offset() {
        return offset;
    }

    public long length() {
        return length;
    }

    public long capacity() {
        return capacity;
    }
}
