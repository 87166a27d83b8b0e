package io.membus.core.error;

import io.membus.core.RemotePtr;

/**
 * The pointer names a segment its node does not export (never did, or closed it).
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class UnknownSegmentException extends VerbException {
    private static final long serialVersionUID = 1L;

    /** The segment is gone for {@code reason} (e.g. it was closed: unexported, or its node shut down). */
    public UnknownSegmentException(long ptr, int length, String reason) {
        super(ErrorCode.UNKNOWN_SEGMENT, ptr, length, 0,
                "unknown segment: ptr=" + RemotePtr.toString(ptr) + ", node=" + RemotePtr.nodeId(ptr)
                        + ", segment=" + RemotePtr.segmentIndex(ptr) + "; " + reason);
    }

    public UnknownSegmentException(long ptr, int length) {
        super(ErrorCode.UNKNOWN_SEGMENT, ptr, length, 0,
                "unknown segment: ptr=" + RemotePtr.toString(ptr) + ", node=" + RemotePtr.nodeId(ptr)
                        + ", segment=" + RemotePtr.segmentIndex(ptr)
                        + "; the node exports no such segment: check the pointer, or the directory for its segments");
    }
}
