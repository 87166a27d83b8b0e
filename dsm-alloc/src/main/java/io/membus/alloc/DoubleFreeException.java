package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A block was freed through a reference whose generation is no longer the block's:
 * it was freed already (and maybe reallocated). Nothing was changed.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class DoubleFreeException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final long ptr;
    private final long refGeneration;
    private final long blockGeneration;

    public DoubleFreeException(long ptr, long refGeneration, long blockGeneration) {
        super(ErrorCode.USE_AFTER_FREE, "double free: block=" + RemotePtr.toString(ptr) + ", refGeneration=" + refGeneration
                + ", blockGeneration=" + blockGeneration
                + "; this reference was freed before: free each block exactly once, through the reference allocate returned");
        this.ptr = ptr;
        this.refGeneration = refGeneration;
        this.blockGeneration = blockGeneration;
    }

    public long ptr() {
        return ptr;
    }

    public long refGeneration() {
        return refGeneration;
    }

    public long blockGeneration() {
        return blockGeneration;
    }
}
