package io.membus.alloc;

import io.membus.core.RemotePtr;

/**
 * A block was read or written through a reference whose generation is older than the
 * block's: the block was freed (and maybe handed to a new owner) since the reference
 * was made. Nothing of the block's current contents was returned.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class UseAfterFreeException extends StaleBlockReferenceException {
    private static final long serialVersionUID = 1L;

    public UseAfterFreeException(long ptr, long refGeneration, long blockGeneration, String op) {
        super("use after free: op=" + op + ", block=" + RemotePtr.toString(ptr) + ", refGeneration=" + refGeneration
                + ", blockGeneration=" + blockGeneration
                + "; the block was freed since this reference was allocated: drop the reference and allocate a new block",
                ptr, refGeneration, blockGeneration);
    }
}
