package io.membus.core.replication;

import io.membus.core.RemotePtr;

/**
 * The identity of a replica group: the logical segment {@code (node, index)} its
 * copies hold, packed as {@code node << 8 | index} in an {@code int}. A pointer names
 * its group by its node and segment fields, so a pointer stays valid when another node
 * comes to serve the group.
 *
 * <p><b>Note:</b> static helpers only; thread-safe.
 */
public final class GroupId {
    private GroupId() {
    }

    /** The group of logical segment {@code index} of node {@code node}. */
    public static int of(int node, int index) {
        RemotePtr.pack(node, index, 0); // validates both
        return node << 8 | index;
    }

    /** The group of the segment {@code ptr} points into. */
    public static int ofPointer(long ptr) {
        return RemotePtr.nodeId(ptr) << 8 | RemotePtr.segmentIndex(ptr);
    }

    /** The node whose logical segment this is (the one that exported it first). */
    public static int node(int group) {
        return group >>> 8;
    }

    /** The segment index of the logical segment. */
    public static int index(int group) {
        return group & 0xFF;
    }

    /** {@code node/index}, as logs, errors and {@code membus status} print a group. */
    public static String toString(int group) {
        return node(group) + "/" + index(group);
    }
}
