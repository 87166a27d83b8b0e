package io.membus.cluster;

import java.time.Duration;
import java.util.SortedSet;

/**
 * A node's state at one moment ({@link DsmNode#status()}): data for a console or a
 * monitor to lay out (the {@code membus} command line prints it as one line).
 *
 * @param nodeId        this node's id
 * @param downReason    why the node was downed (it no longer serves), or {@code null} while it runs
 * @param members       node ids in the replicated directory (live members with their segments)
 * @param unreachable   members the failure detector marks unreachable
 * @param segments      segments the live members export
 * @param exportedBytes bytes of those segments
 * @param names         names bound in the registry
 * @param transport     the transport's name, or {@code null} before it is created
 * @param incarnation   this node's incarnation
 * @param uptime        time since the node started
 * @param groups        replica groups the directory knows (0 with replication off)
 * @param groupsShort   of those, the ones not served, short of copies or not all in sync (what
 *                      {@code membus status} lists without {@code --groups})
 *
 * <p><b>Note:</b> immutable value; thread-safe: every field is final (the set is an
 * unmodifiable copy), so any publication makes it fully visible; no other memory ordering.
 */
public record NodeStatus(int nodeId, String downReason, SortedSet<Integer> members, int unreachable, int segments,
                         long exportedBytes, int names, String transport, long incarnation, Duration uptime,
                         int groups, int groupsShort) {
    public NodeStatus {
        members = java.util.Collections.unmodifiableSortedSet(new java.util.TreeSet<>(members));
    }

    /** A status without replica groups (replication off). */
    public NodeStatus(int nodeId, String downReason, SortedSet<Integer> members, int unreachable, int segments,
                      long exportedBytes, int names, String transport, long incarnation, Duration uptime) {
        this(nodeId, downReason, members, unreachable, segments, exportedBytes, names, transport, incarnation, uptime,
                0, 0);
    }

    public boolean isDown() {
        return downReason != null;
    }
}
