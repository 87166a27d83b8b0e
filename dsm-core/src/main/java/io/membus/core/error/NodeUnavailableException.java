package io.membus.core.error;

/**
 * A node cannot be reached: it is down, fenced, shut down, partitioned away, or
 * the connection to it was lost while the operation was in flight.
 * {@link #mayHaveRun()} tells the two apart: an operation refused before it was sent
 * ({@link #notSent}: no live member, cannot connect, fenced, connection already closed)
 * certainly did not run and may be retried; one that was in flight when the connection
 * was lost may or may not have run (like a lost RDMA completion) and is never retried
 * blindly. The message ends with which of the two it is.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public class NodeUnavailableException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final int nodeId;
    private final boolean notSent;

    /** An operation whose outcome is unknown (it was in flight). */
    public NodeUnavailableException(int nodeId, String reason) {
        this(nodeId, reason, null, false);
    }

    /** An operation whose outcome is unknown (it was in flight). */
    public NodeUnavailableException(int nodeId, String reason, Throwable cause) {
        this(nodeId, reason, cause, false);
    }

    /** For {@link NodeFencedException}: a failure whose reason is a fact, not text. */
    protected NodeUnavailableException(int nodeId, String reason, Throwable cause, boolean notSent) {
        this(ErrorCode.NODE_UNAVAILABLE, nodeId, reason, cause, notSent);
    }

    /** For subclasses of another code that are still "this node cannot serve it" ({@link NotPrimaryException}). */
    protected NodeUnavailableException(ErrorCode code, int nodeId, String reason, Throwable cause, boolean notSent) {
        super(code, "node unavailable: node=" + nodeId + ", reason=" + reason
                + (notSent ? ", outcome=not-sent (it did not run: safe to retry)"
                : ", outcome=unknown (it may have run: read back before retrying)"), cause);
        this.nodeId = nodeId;
        this.notSent = notSent;
    }

    /** An operation refused before it was sent: it certainly did not run. */
    public static NodeUnavailableException notSent(int nodeId, String reason) {
        return new NodeUnavailableException(nodeId, reason, null, true);
    }

    /** An operation refused before it was sent: it certainly did not run. */
    public static NodeUnavailableException notSent(int nodeId, String reason, Throwable cause) {
        return new NodeUnavailableException(nodeId, reason, cause, true);
    }

    @Override
    public boolean mayHaveRun() {
        return !notSent;
    }

    public int nodeId() {
        return nodeId;
    }

    /**
     * Whether the node refused this node because it fenced it (or this node fenced
     * it): a fence lasts until the membership lifts it, so reconnecting cannot help.
     * A fact carried by the type ({@link NodeFencedException}) and on the wire, never
     * read from the message's text.
     */
    public boolean fenced() {
        return false;
    }
}
