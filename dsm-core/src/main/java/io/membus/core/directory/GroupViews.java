package io.membus.core.directory;

import io.membus.core.SegmentDescriptor;
import io.membus.core.replication.GroupClaim;
import io.membus.core.replication.GroupId;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.directory.PeerInfo;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The one computation of replica-group views from the live members' claims, shared by
 * every {@link SegmentDirectory} (the cluster's and {@link StaticDirectory}), so they
 * cannot disagree on what a set of claims means:
 *
 * <ul>
 *   <li>the {@link GroupClaim.Role#PRIMARY} claim with the highest epoch among live
 *       members serves ({@link ReplicaGroupView.State#SERVING}); its in-sync list,
 *       filtered by liveness, is the in-sync set;</li>
 *   <li>no live primary but a live copy whose node is in the last known in-sync list (or,
 *       with no list known, any live {@code COPY}):
 *       {@link ReplicaGroupView.State#PROMOTING}, at the highest epoch any live holder
 *       claims;</li>
 *   <li>a group in {@code previous} with no live primary and no live in-sync copy:
 *       {@link ReplicaGroupView.State#LOST} (kept: a lost group stays lost in this view) —
 *       except on a transport that keeps groups by {@linkplain
 *       io.membus.core.capability.ReplicationSupport#ADOPTION adoption} ({@code shm}), where
 *       the dead primary's files outlive it and a survivor is about to adopt them: there the
 *       group is {@link ReplicaGroupView.State#PROMOTING} (verbs wait for the adopter, within
 *       their deadlines) and never lost;</li>
 *   <li>live {@code JOINING} claims are listed as joining; a group known only from them
 *       (no primary, no copy, no view before) has no view yet: its primary's claim has not
 *       reached this directory, and a group never seen served is not lost;</li>
 * </ul>
 *
 * <p><b>Note:</b> a pure function; thread-safe.
 */
public final class GroupViews {
    private GroupViews() {
    }

    /**
     * @param members  live members by node id
     * @param claims   every live member's claims, by node id (entries of non-members are ignored)
     * @param previous the views computed before (to keep in-sync lists across a primary's death and lost groups)
     * @return the views by group id
     */
    public static Map<Integer, ReplicaGroupView> compute(Map<Integer, PeerInfo> members,
                                                         Map<Integer, ? extends Collection<GroupClaim>> claims,
                                                         Map<Integer, ReplicaGroupView> previous) {
        return compute(members, claims, previous, ReplicationSupport.FORWARDING);
    }

    /**
     * As {@link #compute(Map, Map, Map)}, for a cluster whose transport keeps groups by
     * {@code mode}: with {@link ReplicationSupport#ADOPTION} a group without live holders is
     * awaiting its adopter ({@link ReplicaGroupView.State#PROMOTING}), not lost.
     */
    public static Map<Integer, ReplicaGroupView> compute(Map<Integer, PeerInfo> members,
                                                         Map<Integer, ? extends Collection<GroupClaim>> claims,
                                                         Map<Integer, ReplicaGroupView> previous,
                                                         ReplicationSupport mode) {
        boolean adoption = mode == ReplicationSupport.ADOPTION;
        Map<Integer, List<Holder>> byGroup = new HashMap<>();
        for (Map.Entry<Integer, ? extends Collection<GroupClaim>> e : claims.entrySet()) {
            PeerInfo member = members.get(e.getKey());
            if (member == null) {
                continue;
            }
            for (GroupClaim c : e.getValue()) {
                byGroup.computeIfAbsent(c.group(), g -> new ArrayList<>()).add(new Holder(member, c));
            }
        }
        Map<Integer, ReplicaGroupView> views = new HashMap<>();
        for (Map.Entry<Integer, List<Holder>> e : byGroup.entrySet()) {
            ReplicaGroupView v = view(e.getKey(), e.getValue(), members, previous.get(e.getKey()), adoption);
            if (v != null) {
                views.put(e.getKey(), v);
            }
        }
        for (ReplicaGroupView before : previous.values()) {
            if (!views.containsKey(before.group())) {
                views.put(before.group(), new ReplicaGroupView(before.group(), before.epoch(),
                        adoption ? ReplicaGroupView.State.PROMOTING : ReplicaGroupView.State.LOST, 0, 0, new int[0],
                        new int[0], before.logical()));
            }
        }
        return views;
    }

    private static ReplicaGroupView view(int group, List<Holder> holders, Map<Integer, PeerInfo> members,
                                         ReplicaGroupView before, boolean adoption) {
        Holder primary = null;
        long highest = 0;
        for (Holder h : holders) {
            highest = Math.max(highest, h.claim.epoch());
            if (h.claim.role() == GroupClaim.Role.PRIMARY && (primary == null || h.claim.epoch() > primary.claim.epoch())) {
                primary = h;
            }
        }
        List<Integer> joining = new ArrayList<>();
        for (Holder h : holders) {
            if (h.claim.role() == GroupClaim.Role.JOINING) {
                joining.add(h.member.nodeId());
            }
        }
        GroupClaim any = primary != null ? primary.claim : holders.get(0).claim;
        SegmentDescriptor logical = new SegmentDescriptor(GroupId.node(group),
                primary != null ? primary.member.incarnation() : 0, GroupId.index(group), any.size(), any.flags(),
                any.remoteKey());
        if (primary != null) {
            return new ReplicaGroupView(group, primary.claim.epoch(), ReplicaGroupView.State.SERVING,
                    primary.member.nodeId(), primary.member.incarnation(), live(primary.claim.inSync(), members),
                    ints(joining), logical);
        }
        int[] lastInSync = before != null ? before.inSync() : null;
        List<Integer> copies = new ArrayList<>();
        for (Holder h : holders) {
            if (h.claim.role() == GroupClaim.Role.COPY
                    && (lastInSync == null || contains(lastInSync, h.member.nodeId()))) {
                copies.add(h.member.nodeId());
            }
        }
        if (lastInSync != null) { // keep the primary's order: the first live one coordinates
            List<Integer> ordered = new ArrayList<>();
            for (int n : lastInSync) {
                if (copies.contains(n)) {
                    ordered.add(n);
                }
            }
            copies = ordered;
        }
        if (copies.isEmpty() && before == null && !adoption) {
            // only joining copies, and this view never saw the group: its primary's claim has not arrived yet (a copy
            // stream is faster than membership's gossip). Never served here, so not lost: no view yet
            return null;
        }
        ReplicaGroupView.State state = copies.isEmpty() && !adoption ? ReplicaGroupView.State.LOST
                : ReplicaGroupView.State.PROMOTING;
        return new ReplicaGroupView(group, highest, state, 0, 0, ints(copies), ints(joining), logical);
    }

    private static int[] live(int[] nodes, Map<Integer, PeerInfo> members) {
        return java.util.Arrays.stream(nodes).filter(members::containsKey).toArray();
    }

    private static boolean contains(int[] nodes, int node) {
        for (int n : nodes) {
            if (n == node) {
                return true;
            }
        }
        return false;
    }

    private static int[] ints(List<Integer> list) {
        return list.stream().mapToInt(Integer::intValue).toArray();
    }

    private record Holder(PeerInfo member, GroupClaim claim) {
    }
}
