package io.membus.core.error;

import io.membus.core.replication.GroupId;

/**
 * Every holder of a replica group died before its copies were rebuilt (its primary and
 * all its in-sync copies), so its memory is gone: the group is lost, and every verb to
 * it fails with this exception, not sent ({@link #mayHaveRun()} is false). Other groups
 * are unaffected. The data comes back only if its primary restarts with a file-backed
 * segment at the group's last epoch (see docs/replication.md, "Restarts").
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class SegmentLostException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final int group;

    /**
     * @param group  the lost group ({@link GroupId})
     * @param detail what was lost and when, e.g. {@code lost=[node 3 (primary), node 2 (copy)], backups=1}
     */
    public SegmentLostException(int group, String detail) {
        super(ErrorCode.SEGMENT_LOST, "segment lost: segment=" + GroupId.toString(group) + ", " + detail
                + "; its data is gone unless its primary restarts with its file-backed segment at the group's last epoch");
        this.group = group;
    }

    /** The lost group ({@link GroupId}). */
    public int group() {
        return group;
    }

    @Override
    public boolean mayHaveRun() {
        return false;
    }
}
