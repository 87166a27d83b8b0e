package io.membus.core.directory;

import io.membus.core.SegmentDescriptor;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupId;

import java.util.Arrays;

/**
 * A replica group as the directory sees it now, computed from the live members'
 * {@link io.membus.core.replication.GroupClaim}s: the primary claim with the highest
 * epoch among live members serves; its in-sync list, filtered by liveness, is the
 * in-sync set.
 *
 * @param group              {@link GroupId}
 * @param epoch              the serving (or last known) {@link Ballot}
 * @param state              {@link State}
 * @param primary            the serving node's id; 0 unless {@link State#SERVING}
 * @param primaryIncarnation the serving node's incarnation; 0 unless serving
 * @param inSync             live in-sync copies, in the primary's order (a promotion's coordinator is the first)
 * @param joining            live nodes receiving a new copy
 * @param logical            the logical segment: node and index of the group, its size, flags and remote key
 *
 * <p><b>Note:</b> immutable value (arrays copied in and out); thread-safe.
 */
public record ReplicaGroupView(int group, long epoch, State state, int primary, long primaryIncarnation,
                               int[] inSync, int[] joining, SegmentDescriptor logical) {

    /** Where the group stands. */
    public enum State {
        /** A live primary serves it. */
        SERVING,
        /** Its primary is gone and live in-sync copies remain: a promotion is under way; verbs wait. */
        PROMOTING,
        /** Its primary and every in-sync copy are gone: verbs fail {@link io.membus.core.error.SegmentLostException}. */
        LOST
    }

    public ReplicaGroupView {
        inSync = inSync == null ? new int[0] : inSync.clone();
        joining = joining == null ? new int[0] : joining.clone();
    }

    @Override
    public int[] inSync() {
        return inSync.clone();
    }

    @Override
    public int[] joining() {
        return joining.clone();
    }

    /** Number of live in-sync copies (without allocating). */
    public int inSyncCount() {
        return inSync.length;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ReplicaGroupView v && v.group == group && v.epoch == epoch && v.state == state
                && v.primary == primary && v.primaryIncarnation == primaryIncarnation && Arrays.equals(v.inSync, inSync)
                && Arrays.equals(v.joining, joining) && java.util.Objects.equals(v.logical, logical);
    }

    @Override
    public int hashCode() {
        return 31 * (31 * group + Long.hashCode(epoch)) + primary;
    }

    @Override
    public String toString() {
        return "segment " + GroupId.toString(group) + " " + state + " epoch " + Ballot.toString(epoch)
                + (state == State.SERVING ? " primary node " + primary : "") + " in-sync " + Arrays.toString(inSync)
                + (joining.length > 0 ? " joining " + Arrays.toString(joining) : "");
    }
}
