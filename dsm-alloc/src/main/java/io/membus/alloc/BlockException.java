package io.membus.alloc;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A failure that concerns one block of the global allocator, named by the remote
 * pointer of its header: the shape that {@link InvalidBlockException},
 * {@link BlockBoundsException} and the {@link StaleBlockReferenceException}s share.
 * Catch it to handle every bad use of a block at once.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public abstract class BlockException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final long ptr;

    protected BlockException(ErrorCode code, String message, long ptr) {
        super(code, message);
        this.ptr = ptr;
    }

    /** Remote pointer of the block's header (or of what was passed as one). */
    public long ptr() {
        return ptr;
    }
}
