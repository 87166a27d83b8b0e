package io.membus.core.error;

import io.membus.core.RemotePtr;

/**
 * A verb named a remote key that is not the segment's. Nothing was read or written.
 * The keys themselves are never printed: a remote key is a capability.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class WrongRemoteKeyException extends VerbException {
    private static final long serialVersionUID = 1L;

    public WrongRemoteKeyException(long ptr, int length) {
        super(ErrorCode.WRONG_REMOTE_KEY, ptr, length, 0,
                "wrong remote key: ptr=" + RemotePtr.toString(ptr) + ", node=" + RemotePtr.nodeId(ptr)
                        + ", segment=" + RemotePtr.segmentIndex(ptr)
                        + "; take the remote key from the segment's current directory entry"
                        + " (the segment may have been re-created)");
    }
}
