package io.membus.core.replication;

/**
 * One replica group held by a node, as {@link Replicator#status()} reports it.
 *
 * @param group     {@link GroupId}
 * @param role      this node's part: {@link GroupClaim.Role#PRIMARY}, {@code COPY} or {@code JOINING}
 * @param epoch     the {@link Ballot} this node is at for the group
 * @param lastSeq   primary: the latest change's sequence; copy: the sequence applied
 * @param acked     primary: every change up to here is on every in-sync copy; copy: the same as {@code lastSeq}
 * @param inSync    primary: the in-sync copies; empty on a copy
 * @param joining   primary: the copies being built
 * @param joinedBytes primary: per joining copy (same order), the bytes copied so far
 * @param backups   the copies wanted ({@code membus.replication.backups})
 * @param state     readable, e.g. {@code segment 3/1: 0 of 1 backups (re-replicating)}
 *
 * <p><b>Note:</b> immutable value (arrays copied in and out); thread-safe.
 */
public record ReplicaGroupStatus(int group, GroupClaim.Role role, long epoch, long lastSeq, long acked, int[] inSync,
                                 int[] joining, long[] joinedBytes, int backups, String state) {
    public ReplicaGroupStatus {
        inSync = inSync.clone();
        joining = joining.clone();
        joinedBytes = joinedBytes.clone();
    }

    @Override
    public int[] inSync() {
        return inSync.clone();
    }

    @Override
    public int[] joining() {
        return joining.clone();
    }

    @Override
    public long[] joinedBytes() {
        return joinedBytes.clone();
    }

    @Override
    public String toString() {
        return state;
    }
}
