package io.membus.alloc;

import io.membus.core.RemotePtr;

/**
 * A stored pointer ({@link GlobalAllocator#ref(long)}) names a block that is not
 * allocated any more: its chunk was given back, or the block's header shows it was
 * freed (a later generation, or a block of an earlier claim of the chunk). A pointer
 * carries no generation, so {@link #refGeneration()} is -1. Nothing was changed.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class FreedBlockException extends StaleBlockReferenceException {
    private static final long serialVersionUID = 1L;

    public FreedBlockException(long ptr, long blockGeneration, String reason) {
        super("freed block: block=" + RemotePtr.toString(ptr) + ", blockGeneration=" + blockGeneration + ", reason="
                + reason + "; the block this pointer named was freed: drop the pointer (and unbind any name bound to it)",
                ptr, -1, blockGeneration);
    }
}
