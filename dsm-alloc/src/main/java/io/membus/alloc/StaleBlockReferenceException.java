package io.membus.alloc;

import io.membus.core.error.ErrorCode;

/**
 * A block was reached through a reference whose generation is not the block's own:
 * the block was freed (and maybe handed to a new owner) since the reference was made.
 * Catch this to handle every stale use at once; {@link UseAfterFreeException} (a read
 * or write) and {@link DoubleFreeException} (a second free) say which.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public abstract class StaleBlockReferenceException extends BlockException {
    private static final long serialVersionUID = 1L;

    private final long refGeneration;
    private final long blockGeneration;

    StaleBlockReferenceException(String message, long ptr, long refGeneration, long blockGeneration) {
        super(ErrorCode.USE_AFTER_FREE, message, ptr);
        this.refGeneration = refGeneration;
        this.blockGeneration = blockGeneration;
    }

    public long refGeneration() {
        return refGeneration;
    }

    public long blockGeneration() {
        return blockGeneration;
    }
}
