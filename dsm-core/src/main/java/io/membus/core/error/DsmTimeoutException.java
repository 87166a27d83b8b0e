package io.membus.core.error;

import java.time.Duration;

/**
 * An operation passed its deadline. A verb that timed out may or may not have
 * been executed by its target; it is never retried blindly.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class DsmTimeoutException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final int nodeId;
    private final Duration timeout;

    public DsmTimeoutException(String operation, int nodeId, Duration timeout) {
        super(ErrorCode.TIMEOUT, "timeout: operation=" + operation + ", node=" + nodeId + ", timeout=" + timeout.toMillis()
                + "ms; the node is slow, overloaded or unreachable: check it, or raise the operation timeout");
        this.nodeId = nodeId;
        this.timeout = timeout;
    }

    public int nodeId() {
        return nodeId;
    }

    public Duration timeout() {
        return timeout;
    }
}
