package io.membus.core.error;

import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupId;

/**
 * A verb reached a node that does not serve the pointer's replica group at the current
 * epoch: a node that holds only a copy of it, or an old primary that a promotion
 * replaced. The verb did not run ({@link #mayHaveRun()} is false). It carries the
 * primary the refusing node knows of ({@link #primaryHint()}, 0 when it knows none), so
 * the initiator can re-route at once instead of waiting for the directory;
 * {@code RemoteMemory} does so itself, and a caller sees this exception only when the
 * route kept failing until the operation's deadline.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class NotPrimaryException extends NodeUnavailableException {
    private static final long serialVersionUID = 1L;

    private final int group;
    private final int primaryHint;
    private final long epoch;

    /**
     * @param refusingNode the node that refused the verb
     * @param group        the replica group ({@link GroupId})
     * @param primaryHint  the node the refusing node believes serves the group, or 0
     * @param epoch        the epoch ({@link Ballot}) the refusing node knows for the group
     */
    public NotPrimaryException(int refusingNode, int group, int primaryHint, long epoch) {
        super(ErrorCode.NOT_PRIMARY, refusingNode, "node " + refusingNode + " does not serve segment "
                + GroupId.toString(group) + " (epoch " + Ballot.toString(epoch) + "); "
                + (primaryHint == 0 ? "its primary is not known there (a promotion may be running)"
                : "its primary is node " + primaryHint) + "; the verb did not run", null, true);
        this.group = group;
        this.primaryHint = primaryHint;
        this.epoch = epoch;
    }

    /** The replica group ({@link GroupId}) the verb addressed. */
    public int group() {
        return group;
    }

    /** The node the refusing node believes is the group's primary; 0 when it knows none. */
    public int primaryHint() {
        return primaryHint;
    }

    /** The epoch ({@link Ballot}) the refusing node knows for the group. */
    public long epoch() {
        return epoch;
    }
}
