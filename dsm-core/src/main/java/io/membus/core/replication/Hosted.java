package io.membus.core.replication;

import io.membus.core.Segment;
import io.membus.core.capability.ReplicationSupport;

/**
 * One replica group held by this node, as its {@link io.membus.core.transport.SegmentTable}
 * sees it: the local memory of the group (an own exported segment, a copy of another
 * node's logical segment, or a promoted copy) and what this node is for the group now:
 * its serving {@link ReplicaGroup} (primary) or its {@link CopyReplica} (copy), or both
 * unset while it changes role.
 *
 * <p><b>Note:</b> thread-safe: the roles are volatile fields, published by the
 * {@link Replicator} (a promotion sets {@link #primary()} before it clears nothing: a copy
 * becomes primary by adopting a ballot first, so no verb is served by both roles).
 */
public final class Hosted {
    private final int group;
    private final Segment memory;
    /** Served here with no copies and no sequencing: an adopted shm file (docs/replication.md §8). */
    private final boolean adopted;
    private volatile ReplicaGroup primary;
    private volatile CopyReplica copy;

    public Hosted(int group, Segment memory) {
        this(group, memory, false);
    }

    private Hosted(int group, Segment memory, boolean adopted) {
        this.group = group;
        this.memory = memory;
        this.adopted = adopted;
    }

    /**
     * A group this node serves by <em>adoption</em> ({@link ReplicationSupport#ADOPTION}, shm):
     * {@code memory} is the dead owner's file, mapped here, and verbs on it run on it directly,
     * as on an own segment: no {@link ReplicaGroup}, no copies, no {@link AckGate} (every
     * process that maps the file changes it with the CPU's own atomics, so a lock or a
     * sequence of this process would order nothing). It is never a copy.
     */
    public static Hosted adopted(int group, Segment memory) {
        return new Hosted(group, memory, true);
    }

    /** Whether this node serves the group by adoption ({@link #adopted(int, Segment)}). */
    public boolean adopted() {
        return adopted;
    }

    public int group() {
        return group;
    }

    /** The memory of the group on this node; its descriptor names the logical segment {@code (n, s)}. */
    public Segment memory() {
        return memory;
    }

    /** The group this node serves as primary, or {@code null}. */
    public ReplicaGroup primary() {
        return primary;
    }

    /** The copy this node holds, or {@code null}. */
    public CopyReplica copy() {
        return copy;
    }

    void primary(ReplicaGroup g) {
        this.primary = g;
    }

    void copy(CopyReplica c) {
        this.copy = c;
    }

    @Override
    public String toString() {
        return "Hosted{segment=" + GroupId.toString(group) + (adopted ? ", adopted" : ", primary=" + (primary != null)
                + ", copy=" + (copy != null)) + "}";
    }
}
