package io.membus.core.error;

import io.membus.core.RemotePtr;

/**
 * An atomic verb's target is not 8-byte aligned. Nothing was changed.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class MisalignedAtomicException extends VerbException {
    private static final long serialVersionUID = 1L;

    public MisalignedAtomicException(long ptr) {
        super(ErrorCode.MISALIGNED_ATOMIC, ptr, Long.BYTES, 0,
                "misaligned atomic: ptr=" + RemotePtr.toString(ptr) + ", offset=" + RemotePtr.offset(ptr)
                        + ", alignment=8; atomics act on 8-byte words at offsets that are multiples of 8");
    }
}
