package io.membus.core.error;

import io.membus.core.RemotePtr;

/**
 * A verb would touch bytes outside its segment. Nothing was read or written.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class OutOfBoundsException extends VerbException {
    private static final long serialVersionUID = 1L;

    public OutOfBoundsException(long ptr, int length, long capacity) {
        super(ErrorCode.OUT_OF_BOUNDS, ptr, length, capacity,
                "out of bounds: ptr=" + RemotePtr.toString(ptr) + ", node=" + RemotePtr.nodeId(ptr)
                        + ", segment=" + RemotePtr.segmentIndex(ptr) + ", offset=" + RemotePtr.offset(ptr)
                        + ", length=" + length + ", capacity=" + capacity
                        + "; the pointer or length is wrong: offset+length must not exceed the segment's capacity");
    }

    /** Bytes in the segment's data area. */
    public long capacity() {
        return detail();
    }
}
