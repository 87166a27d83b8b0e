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
    private final int tries;
    private final boolean notSent;

    /** A deadline that fired with the operation in flight: it may have run. */
    public DsmTimeoutException(String operation, int nodeId, Duration timeout) {
        this(operation, nodeId, timeout, "the node is slow, overloaded or unreachable: check it, or raise the operation"
                + " timeout");
    }

    /** As {@link #DsmTimeoutException(String, int, Duration)}, with what to do ({@code advice}). */
    public DsmTimeoutException(String operation, int nodeId, Duration timeout, String advice) {
        this(operation, nodeId, timeout, advice, false);
    }

    private DsmTimeoutException(String operation, int nodeId, Duration timeout, String advice, boolean notSent) {
        super(ErrorCode.TIMEOUT, "timeout: operation=" + operation + ", node=" + nodeId + ", timeout=" + timeout.toMillis()
                + "ms; " + advice + (notSent ? "; outcome=not-sent (it did not run: safe to retry)" : ""));
        this.nodeId = nodeId;
        this.timeout = timeout;
        this.tries = 0;
        this.notSent = notSent;
    }

    private DsmTimeoutException(String message, int nodeId, int tries) {
        super(ErrorCode.TIMEOUT, message);
        this.nodeId = nodeId;
        this.timeout = null;
        this.tries = tries;
        this.notSent = false;
    }

    /** A deadline that passed before the operation was sent: it certainly did not run. */
    public static DsmTimeoutException notSent(String operation, int nodeId, Duration timeout) {
        return new DsmTimeoutException(operation, nodeId, timeout, "the node is slow, overloaded or unreachable: check"
                + " it, or raise the operation timeout", true);
    }

    /**
     * An operation that gave up after {@code tries} attempts that each lost a race (a
     * compare-and-swap that kept failing): bounded by a count, not a duration.
     */
    public static DsmTimeoutException afterTries(String operation, int nodeId, int tries, String advice) {
        return new DsmTimeoutException("timeout: operation=" + operation + ", node=" + nodeId + ", tries=" + tries
                + "; " + advice, nodeId, tries);
    }

    /** A deadline that passed on node {@code nodeId}, reported by it with only a text. */
    static DsmTimeoutException reported(int nodeId, String text) {
        return new DsmTimeoutException("timeout on node " + nodeId + ": " + text, nodeId, 0);
    }

    @Override
    public boolean mayHaveRun() {
        return !notSent;
    }

    public int nodeId() {
        return nodeId;
    }

    /** The deadline that passed; {@code null} when the limit was a number of tries, or a peer reported it. */
    public Duration timeout() {
        return timeout;
    }

    /** The attempts made, for {@link #afterTries}; 0 otherwise. */
    public int tries() {
        return tries;
    }
}
