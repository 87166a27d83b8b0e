package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.error.ErrorCode;

/**
 * A pointer or reference does not name a block of a heap segment: it is outside every
 * chunk, not at a block boundary, or the bytes there are not a block header of the
 * kind and class the reference says. Nothing was changed.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class InvalidBlockException extends BlockException {
    private static final long serialVersionUID = 1L;

    public InvalidBlockException(long ptr, String reason) {
        super(ErrorCode.INVALID_POINTER, "invalid block: block=" + RemotePtr.toString(ptr) + ", reason=" + reason
                + "; pass only references returned by GlobalAllocator.allocate (or rebuilt with BlockRef.of from stored words)", ptr);
    }
}
