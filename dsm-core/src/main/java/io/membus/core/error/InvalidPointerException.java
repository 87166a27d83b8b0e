package io.membus.core.error;

import io.membus.core.RemotePtr;

/**
 * The pointer cannot name remote memory on this connection: it is null, or it
 * names another node than the one the connection reaches.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class InvalidPointerException extends VerbException {
    private static final long serialVersionUID = 1L;

    /**
     * @param connectionNode the node the connection reaches
     */
    public InvalidPointerException(long ptr, int length, int connectionNode) {
        super(ErrorCode.INVALID_POINTER, ptr, length, connectionNode,
                ptr == RemotePtr.NULL
                        ? "invalid pointer: ptr=null, length=" + length + "; a null pointer names no memory"
                        : "invalid pointer: ptr=" + RemotePtr.toString(ptr) + ", node=" + RemotePtr.nodeId(ptr)
                        + ", connectionNode=" + connectionNode
                        + "; send verbs on the connection to the node the pointer names");
    }

    /**
     * A pointer that names memory, but not what the caller expected there ({@code reason}
     * says what, e.g. "not a coherent object: ...").
     */
    public InvalidPointerException(long ptr, int length, String reason) {
        super(ErrorCode.INVALID_POINTER, ptr, length, 0, "invalid pointer: ptr=" + RemotePtr.toString(ptr) + ", "
                + reason);
    }

    /** The node the connection reaches (0 when the pointer was refused for another reason). */
    public int connectionNode() {
        return (int) detail();
    }
}
