package io.membus.core.error;

import java.time.Duration;

/**
 * An operation passed its deadline. A verb that timed out on the wire may or may
 * not have been executed by its target ({@link #mayHaveRun()} true: it is never
 * retried blindly); one whose deadline passed before it was sent ({@link #notSent})
 * certainly did not run. The message ends with which of the two it is.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class DsmTimeoutException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final int nodeId;
    private final Duration timeout;
    private final boolean notSent;

    /** A deadline that fired with the operation in flight: it may have run. */
    public DsmTimeoutException(String operation, int nodeId, Duration timeout) {
        this(operation, nodeId, timeout, false);
    }

    private DsmTimeoutException(String operation, int nodeId, Duration timeout, boolean notSent) {
        super(ErrorCode.TIMEOUT, "timeout: operation=" + operation + ", node=" + nodeId + ", timeout=" + timeout.toMillis()
                + "ms; the node is slow, overloaded or unreachable: check it, or raise the operation timeout"
                + (notSent ? "; outcome=not-sent (it did not run: safe to retry)" : ""));
        this.nodeId = nodeId;
        this.timeout = timeout;
        this.notSent = notSent;
    }

    /** A deadline that passed before the operation was sent: it certainly did not run. */
    public static DsmTimeoutException notSent(String operation, int nodeId, Duration timeout) {
        return new DsmTimeoutException(operation, nodeId, timeout, true);
    }

    @Override
    public boolean mayHaveRun() {
        return !notSent;
    }

    public int nodeId() {
        return nodeId;
    }

    public Duration timeout() {
        return timeout;
    }
}
