package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A block was read or written through a reference whose generation is older than the
 * block's: the block was freed (and maybe handed to a new owner) since the reference
 * was made. Nothing of the block's current contents was returned.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class UseAfterFreeException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final long ptr;
    private final long refGeneration;
    private final long blockGeneration;

    public UseAfterFreeException(long ptr, long refGeneration, long blockGeneration, String op) {
        super(ErrorCode.USE_AFTER_FREE, "use after free: op=" + op + ", block=" + RemotePtr.toString(ptr) + ", refGeneration=" + refGeneration
                + ", blockGeneration=" + blockGeneration
                + "; the block was freed since this reference was allocated: drop the reference and allocate a new block");
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
