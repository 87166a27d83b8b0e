package io.membus.core.error;

import io.membus.core.Access;
import io.membus.core.RemotePtr;

/**
 * The segment's access flags do not allow the verb (a write to a read-only
 * segment, an atomic on a segment without atomics). Nothing was read or written.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class AccessDeniedException extends VerbException {
    private static final long serialVersionUID = 1L;

    private final int required;
    private final int segmentFlags;

    public AccessDeniedException(long ptr, int length, int required, int segmentFlags) {
        super(ErrorCode.ACCESS_DENIED, ptr, length, ((long) required << 8) | segmentFlags,
                "access denied: ptr=" + RemotePtr.toString(ptr) + ", node=" + RemotePtr.nodeId(ptr)
                        + ", segment=" + RemotePtr.segmentIndex(ptr) + ", required=" + Access.toString(required)
                        + ", flags=" + Access.toString(segmentFlags)
                        + "; the segment was exported without this right: export it with the flags the verb needs");
        this.required = required;
        this.segmentFlags = segmentFlags;
    }

    public int required() {
        return required;
    }

    public int segmentFlags() {
        return segmentFlags;
    }
}
