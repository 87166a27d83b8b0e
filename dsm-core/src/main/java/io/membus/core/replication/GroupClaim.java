package io.membus.core.replication;

import java.util.Arrays;

/**
 * What one node says, in its own directory entry, about one replica group it holds: the
 * unit the directory computes group views from ({@link io.membus.core.directory.ReplicaGroupView}).
 * A node writes only its own claims (the property that keeps the directory's
 * last-writer-wins entries safe).
 *
 * @param group     {@link GroupId} of the logical segment
 * @param epoch     the {@link Ballot} this holder is at
 * @param role      {@link Role}
 * @param size      the logical segment's size in bytes (same on every holder)
 * @param flags     its {@link io.membus.core.Access} flags
 * @param remoteKey its remote key: the group's, drawn once at export, kept by every copy and promotion
 * @param inSync    {@link Role#PRIMARY} only: the in-sync copies' node ids, in the order they became in
 *                  sync (the first live one coordinates a promotion); empty otherwise
 * @param since     wall-clock milliseconds of the last change of this claim (for status only)
 *
 * <p><b>Note:</b> immutable value (the array is copied in and out); thread-safe.
 */
public record GroupClaim(int group, long epoch, Role role, long size, int flags, long remoteKey, int[] inSync,
                         long since) {

    /** A holder's part in its group. */
    public enum Role {
        /** Serves the group's verbs and forwards its changes. */
        PRIMARY,
        /** Holds an in-sync copy. */
        COPY,
        /** Receives a copy being built (not in sync yet; never promoted). */
        JOINING
    }

    public GroupClaim {
        inSync = inSync == null ? new int[0] : inSync.clone();
        if (role == null) {
            throw new IllegalArgumentException("role");
        }
    }

    @Override
    public int[] inSync() {
        return inSync.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof GroupClaim c && c.group == group && c.epoch == epoch && c.role == role && c.size == size
                && c.flags == flags && c.remoteKey == remoteKey && Arrays.equals(c.inSync, inSync) && c.since == since;
    }

    @Override
    public int hashCode() {
        return 31 * (31 * group + Long.hashCode(epoch)) + role.hashCode();
    }

    @Override
    public String toString() {
        // never print the remote key: it is a capability
        return "GroupClaim{segment=" + GroupId.toString(group) + ", epoch=" + Ballot.toString(epoch) + ", role=" + role
                + ", size=" + size + ", inSync=" + Arrays.toString(inSync) + "}";
    }
}
