package io.membus.alloc;

import io.membus.core.RemotePtr;

/**
 * A block was freed through a reference whose generation is no longer the block's:
 * it was freed already (and maybe reallocated). Nothing was changed.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class DoubleFreeException extends StaleBlockReferenceException {
    private static final long serialVersionUID = 1L;

    public DoubleFreeException(long ptr, long refGeneration, long blockGeneration) {
        super("double free: block=" + RemotePtr.toString(ptr) + ", refGeneration=" + refGeneration
                + ", blockGeneration=" + blockGeneration
                + "; this reference was freed before: free each block exactly once, through the"
                + " reference allocate returned", ptr, refGeneration, blockGeneration);
    }
}
