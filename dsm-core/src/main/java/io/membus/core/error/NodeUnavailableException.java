package io.membus.core.error;

/**
 * A node cannot be reached: it is down, fenced, shut down, partitioned away, or
 * the connection to it was lost while the operation was in flight. A verb that
 * fails this way may or may not have been executed (like a lost RDMA completion);
 * it is never retried blindly.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public class NodeUnavailableException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final int nodeId;

    public NodeUnavailableException(int nodeId, String reason) {
        super(ErrorCode.NODE_UNAVAILABLE, "node unavailable: node=" + nodeId + ", reason=" + reason);
        this.nodeId = nodeId;
    }

    public NodeUnavailableException(int nodeId, String reason, Throwable cause) {
        super(ErrorCode.NODE_UNAVAILABLE, "node unavailable: node=" + nodeId + ", reason=" + reason, cause);
        this.nodeId = nodeId;
    }

    public int nodeId() {
        return nodeId;
    }
}
