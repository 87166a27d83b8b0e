package io.membus.core.error;

import io.membus.core.RemotePtr;

/**
 * A verb's length is negative, or larger than one verb may carry.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class BadLengthException extends VerbException {
    private static final long serialVersionUID = 1L;

    public BadLengthException(long ptr, int length, long maxLength) {
        super(ErrorCode.BAD_LENGTH, ptr, length, maxLength,
                "bad length: ptr=" + RemotePtr.toString(ptr) + ", length=" + length + ", maxLength=" + maxLength
                        + "; split larger transfers into verbs of at most maxLength bytes");
    }

    public long maxLength() {
        return detail();
    }
}
