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

    private static final java.util.regex.Pattern SERVES = java.util.regex.Pattern.compile(
            "does not serve segment (\\d+)/(\\d+) \\(epoch (-|(\\d+)\\.(\\d+))\\)");
    private static final java.util.regex.Pattern HINT = java.util.regex.Pattern.compile("its primary is node (\\d+)");

    /**
     * Rebuilds the refusal a peer reported with only its text (a transport's error frame):
     * the group, epoch and hint are read back from the text this class writes, so the
     * initiator can re-route as on a local refusal. A text that does not have them gives
     * group 0, no hint and no epoch (re-routing then waits for the directory).
     */
    public static NotPrimaryException decoded(int refusingNode, String text) {
        int group = 0;
        long epoch = Ballot.NONE;
        int hint = 0;
        if (text != null) {
            java.util.regex.Matcher m = SERVES.matcher(text);
            if (m.find()) {
                try {
                    group = GroupId.of(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)));
                    if (m.group(4) != null) {
                        epoch = Ballot.of(Long.parseLong(m.group(4)), Integer.parseInt(m.group(5)));
                    }
                } catch (RuntimeException e) {
                    group = 0; // not a text of this class: the facts stay unknown
                    epoch = Ballot.NONE;
                }
            }
            java.util.regex.Matcher h = HINT.matcher(text);
            if (h.find()) {
                hint = Integer.parseInt(h.group(1));
            }
        }
        return new NotPrimaryException(refusingNode, group, hint, epoch, text);
    }

    /** A refusal decoded from a peer's text, which the message keeps. */
    private NotPrimaryException(int refusingNode, int group, int primaryHint, long epoch, String peerText) {
        super(ErrorCode.NOT_PRIMARY, refusingNode, "node " + refusingNode + " answered: " + peerText, null, true);
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
