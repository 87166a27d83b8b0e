package io.membus.core.error;

/**
 * A node is unavailable because one side fenced the other: the target fenced this
 * initiator (after the membership downed it), or this node fenced the target. A
 * fence lasts until the membership lifts it (a new incarnation joins), so a
 * connection that meets it is closed for good instead of reconnecting. The reason
 * is this type (and a flag on the wire: tcp's ERROR frame, a message failure's
 * detail), never the message's text.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class NodeFencedException extends NodeUnavailableException {
    private static final long serialVersionUID = 1L;

    /** The value of a message failure's detail (see {@code MessageFailures}) that says "fenced". */
    public static final long MESSAGE_DETAIL = 1;

    private NodeFencedException(int nodeId, String reason, boolean notSent) {
        super(nodeId, reason, null, notSent);
    }

    /** An operation refused before it was sent, because of a fence: it certainly did not run. */
    public static NodeFencedException notSent(int nodeId, String reason) {
        return new NodeFencedException(nodeId, reason, true);
    }

    /** An operation whose outcome is unknown, refused because of a fence. */
    public static NodeFencedException unknownOutcome(int nodeId, String reason) {
        return new NodeFencedException(nodeId, reason, false);
    }

    @Override
    public boolean fenced() {
        return true;
    }
}
