package io.membus.alloc;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * An allocation asked for a size that is not positive or larger than the largest
 * object a heap segment can hold.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class AllocationSizeException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final long size;
    private final long max;

    public AllocationSizeException(long size, long max) {
        super(ErrorCode.BAD_LENGTH, "allocation size not allowed: size=" + size + ", allowed=1.." + max
                + "; split the object, or configure larger heap segments");
        this.size = size;
        this.max = max;
    }

    public long size() {
        return size;
    }

    public long max() {
        return max;
    }
}
