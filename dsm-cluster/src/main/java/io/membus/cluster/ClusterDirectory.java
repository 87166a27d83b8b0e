package io.membus.cluster;

import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.GroupViews;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupClaim;
import io.membus.core.replication.GroupId;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.directory.PeerInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The replicated {@link SegmentDirectory}: the directory entries of Distributed Data
 * joined with Pekko membership. Only entries whose member (address and uid, i.e. this
 * incarnation) is a live member of the cluster are visible, so a downed or restarted
 * node's old entry disappears the moment membership says so, whatever Distributed
 * Data still holds.
 *
 * <p><b>Replica groups.</b> The live entries' {@link GroupClaim}s make the group views,
 * computed by {@link GroupViews#compute} (the one computation every directory shares)
 * from the live members, their claims and the views before; {@link #group} and
 * {@link #groups} answer from them, and {@link DirectoryListener#groupChanged} is called
 * for every view that changed. {@link #segment} answers a replicated group's logical
 * descriptor while the group is {@code SERVING} or {@code PROMOTING}, also after the node
 * that exported it died, so pointers into it stay resolvable; a {@code LOST} group's
 * segment is answered only if a live entry still exports it (routing asks {@link #group}
 * first and refuses the verb).
 *
 * <p>{@link #member}, {@link #segment} and {@link #group} run on every verb's path: they
 * index arrays built when the view changes and return shared {@code Optional}s, allocating
 * nothing.
 *
 * <p><b>Note:</b> thread-safe. Lookups read one immutable snapshot (a volatile read);
 * {@link #apply} is called by the node's cluster agent only (one thread at a time),
 * publishes the new snapshot with a volatile write, then calls listeners, so a lookup
 * made from a listener sees the change it is told about (also {@code groupChanged}: the
 * view it is given is the one {@link #group} answers).
 */
public final class ClusterDirectory implements SegmentDirectory {
    private static final Logger LOG = LoggerFactory.getLogger(ClusterDirectory.class);

    private static final Optional<PeerInfo>[] NO_PEERS = peers(0);
    private static final Optional<SegmentDescriptor>[][] NO_SEGMENTS = new Optional[0][];
    private static final Optional<ReplicaGroupView>[][] NO_GROUPS = new Optional[0][];

    /**
     * The live entries, the group views, and lookups by node id without allocation or
     * boxing (every verb asks for its peer, segment and group): built once per
     * {@link #apply} and published by one volatile write.
     */
    private volatile View view = new View(Map.of(), NO_PEERS, NO_SEGMENTS, Map.of(), NO_GROUPS, List.of());
    private final List<DirectoryListener> listeners = new CopyOnWriteArrayList<>();
    /** Node ids with the memory-node role, or null while not told (written before {@link #view}, read after it). */
    private volatile java.util.Set<Integer> memoryRoles;

    /**
     * Peers, segments and groups indexed by node id (and segment index); absent slots hold
     * {@code Optional.empty()} (or {@code null} rows for node ids with nothing).
     */
    private record View(Map<Integer, NodeEntry> live, Optional<PeerInfo>[] peers,
                        Optional<SegmentDescriptor>[][] segments, Map<Integer, ReplicaGroupView> groups,
                        Optional<ReplicaGroupView>[][] groupLookup, List<SegmentDescriptor> allSegments) {
    }

    @SuppressWarnings("unchecked")
    private static Optional<PeerInfo>[] peers(int n) {
        Optional<PeerInfo>[] a = new Optional[n];
        java.util.Arrays.fill(a, Optional.empty());
        return a;
    }

    @SuppressWarnings("unchecked")
    private static <T> Optional<T>[] row(Optional<T>[] row, int index) {
        if (row != null && row.length > index) {
            return row;
        }
        Optional<T>[] grown = new Optional[Math.max(index + 1, row == null ? 0 : row.length)];
        java.util.Arrays.fill(grown, Optional.empty());
        if (row != null) {
            System.arraycopy(row, 0, grown, 0, row.length);
        }
        return grown;
    }

    /** The group views of {@code entries}' claims ({@link GroupViews}), given the views before. */
    static Map<Integer, ReplicaGroupView> groupsOf(Map<Integer, NodeEntry> entries,
                                                   Map<Integer, ReplicaGroupView> previous) {
        return groupsOf(entries, previous, io.membus.core.capability.ReplicationSupport.FORWARDING);
    }

    /**
     * How this cluster's transport keeps groups (set by the node once its transport is made):
     * on {@code shm} ({@code ADOPTION}) a group whose holders are gone awaits its adopter
     * instead of being lost ({@link GroupViews#compute(Map, Map, Map, io.membus.core.capability.ReplicationSupport)}).
     */
    void replicationMode(io.membus.core.capability.ReplicationSupport mode) {
        this.mode = java.util.Objects.requireNonNull(mode, "mode");
    }

    private volatile io.membus.core.capability.ReplicationSupport mode =
            io.membus.core.capability.ReplicationSupport.FORWARDING;

    static Map<Integer, ReplicaGroupView> groupsOf(Map<Integer, NodeEntry> entries,
                                                   Map<Integer, ReplicaGroupView> previous,
                                                   io.membus.core.capability.ReplicationSupport mode) {
        Map<Integer, PeerInfo> members = new HashMap<>();
        Map<Integer, List<GroupClaim>> claims = new HashMap<>();
        for (NodeEntry e : entries.values()) {
            members.put(e.nodeId(), e.peer());
            if (!e.claims().isEmpty()) {
                claims.put(e.nodeId(), e.claims());
            }
        }
        if (claims.isEmpty() && previous.isEmpty()) {
            return Map.of(); // replication off: nothing to compute
        }
        return Map.copyOf(GroupViews.compute(members, claims, previous, mode));
    }

    @SuppressWarnings("unchecked")
    private static View viewOf(Map<Integer, NodeEntry> entries, Map<Integer, ReplicaGroupView> groups) {
        int max = -1;
        for (Integer id : entries.keySet()) {
            max = Math.max(max, id);
        }
        for (Integer g : groups.keySet()) {
            max = Math.max(max, GroupId.node(g));
        }
        Optional<PeerInfo>[] peers = peers(max + 1);
        Optional<SegmentDescriptor>[][] segments = new Optional[max + 1][];
        Optional<ReplicaGroupView>[][] groupLookup = groups.isEmpty() ? NO_GROUPS : new Optional[max + 1][];
        // a serving or promoting group answers for its logical segment first, also after its node died
        for (ReplicaGroupView v : groups.values()) {
            int node = GroupId.node(v.group());
            int index = GroupId.index(v.group());
            groupLookup[node] = row(groupLookup[node], index);
            groupLookup[node][index] = Optional.of(v);
            if (v.state() != ReplicaGroupView.State.LOST) {
                segments[node] = row(segments[node], index);
                segments[node][index] = Optional.of(v.logical());
            }
        }
        for (NodeEntry e : entries.values()) {
            peers[e.nodeId()] = Optional.of(e.peer());
            int maxIndex = -1;
            for (SegmentDescriptor d : e.segments()) {
                maxIndex = Math.max(maxIndex, d.index());
            }
            Optional<SegmentDescriptor>[] byIndex = maxIndex >= 0 ? row(segments[e.nodeId()], maxIndex)
                    : segments[e.nodeId()] != null ? segments[e.nodeId()] : new Optional[0];
            for (SegmentDescriptor d : e.segments()) {
                if (byIndex[d.index()].isEmpty()) {
                    byIndex[d.index()] = Optional.of(d);
                }
            }
            segments[e.nodeId()] = byIndex;
        }
        List<SegmentDescriptor> all = new ArrayList<>();
        for (Optional<SegmentDescriptor>[] byIndex : segments) {
            if (byIndex != null) {
                for (Optional<SegmentDescriptor> d : byIndex) {
                    d.ifPresent(all::add);
                }
            }
        }
        return new View(entries, peers, segments, groups, groupLookup, List.copyOf(all));
    }

    /** The live entries by node id (a snapshot). */
    public Map<Integer, NodeEntry> entries() {
        return view.live();
    }

    /**
     * Publishes the next view and tells listeners what changed.
     *
     * @param next    live entries by node id
     * @param reasons why a node that is no longer in {@code next} left (by node id), if known
     */
    void apply(Map<Integer, NodeEntry> next, Map<Integer, String> reasons) {
        apply(next, reasons, false);
    }

    /**
     * As {@link #apply(Map, Map)}; while {@code selfGoing} (this node is leaving, or was
     * downed: Pekko then reports every other member as removed on its way out) the group
     * views are kept as they were and no {@code groupChanged} is told: the members did not
     * die, this node stops looking, and it must not announce their groups lost.
     */
    void apply(Map<Integer, NodeEntry> next, Map<Integer, String> reasons, boolean selfGoing) {
        apply(next, reasons, selfGoing, null);
    }

    /**
     * As {@link #apply(Map, Map, boolean)}, with the node ids membership gives the
     * memory-node role ({@code membus-node}); {@code null}: not known, {@link #memoryNodes()}
     * falls back to the members that export a segment.
     */
    void apply(Map<Integer, NodeEntry> next, Map<Integer, String> reasons, boolean selfGoing,
               java.util.Set<Integer> memoryRole) {
        apply(next, reasons, selfGoing, memoryRole, java.util.Set.of());
    }

    /**
     * As {@link #apply(Map, Map, boolean, java.util.Set)}, with the node ids that left the
     * cluster gracefully (their removal followed their own leave, not a downing): a group
     * whose every holder is among them, or lost while this node is {@link #leaving()}, is
     * LOST by a clean stop, said at INFO; any other loss is a fault, said at WARN.
     */
    void apply(Map<Integer, NodeEntry> next, Map<Integer, String> reasons, boolean selfGoing,
               java.util.Set<Integer> memoryRole, java.util.Set<Integer> leftGracefully) {
        memoryRoles = memoryRole == null ? null : java.util.Set.copyOf(memoryRole);
        View before = view;
        Map<Integer, NodeEntry> prev = before.live();
        Map<Integer, NodeEntry> copy = Map.copyOf(next);
        Map<Integer, ReplicaGroupView> groups = selfGoing ? before.groups() : groupsOf(copy, before.groups(), mode);
        view = viewOf(copy, groups);
        for (Map.Entry<Integer, NodeEntry> e : prev.entrySet()) {
            NodeEntry now = copy.get(e.getKey());
            NodeEntry was = e.getValue();
            if (now == null || now.incarnation() != was.incarnation() || now.memberUid() != was.memberUid()) {
                was.segments().forEach(d -> tell(l -> l.segmentRemoved(d)));
                String reason = now == null ? reasons.getOrDefault(e.getKey(), "left the cluster")
                        : "restarted as incarnation " + now.incarnation();
                tell(l -> l.memberRemoved(was.peer(), reason));
            } else {
                for (SegmentDescriptor d : was.segments()) {
                    if (!now.segments().contains(d)) {
                        tell(l -> l.segmentRemoved(d));
                    }
                }
            }
        }
        for (Map.Entry<Integer, NodeEntry> e : copy.entrySet()) {
            NodeEntry was = prev.get(e.getKey());
            NodeEntry now = e.getValue();
            boolean fresh = was == null || now.incarnation() != was.incarnation() || now.memberUid() != was.memberUid();
            if (fresh) {
                tell(l -> l.memberUp(now.peer()));
            }
            for (SegmentDescriptor d : now.segments()) {
                if (fresh || !was.segments().contains(d)) {
                    tell(l -> l.segmentAdded(d));
                }
            }
        }
        if (!groups.isEmpty() || !before.groups().isEmpty()) {
            java.util.TreeSet<Integer> ids = new java.util.TreeSet<>(groups.keySet());
            ids.addAll(before.groups().keySet());
            for (int id : ids) {
                ReplicaGroupView was = before.groups().get(id);
                ReplicaGroupView now = groups.get(id);
                if (!java.util.Objects.equals(was, now)) {
                    logGroup(was, now, leaving || (was != null && leftGracefully.containsAll(holders(was))));
                    tell(l -> l.groupChanged(was, now));
                }
            }
        }
    }

    /**
     * This node stops cleanly (its owner closes it): a group lost from here on went with the
     * whole cluster's clean stop, not with a fault (said at INFO, see {@link #logGroup}).
     */
    void leaving() {
        leaving = true;
    }

    private volatile boolean leaving;

    /** The nodes that held {@code v} as it was: its primary (while serving) and its in-sync copies. */
    private static java.util.Set<Integer> holders(ReplicaGroupView v) {
        java.util.Set<Integer> nodes = new java.util.HashSet<>();
        if (v.state() == ReplicaGroupView.State.SERVING) {
            nodes.add(v.primary());
        }
        for (int n : v.inSync()) {
            nodes.add(n);
        }
        return nodes;
    }

    /**
     * A group's change: lost, WARN, unless {@code clean} (every holder left gracefully, or
     * this node leaves: a clean stop of the cluster, INFO); INFO when a known group changes
     * state or epoch (a promotion); DEBUG otherwise (a group first seen, a copy joining: every
     * start sees every group once).
     */
    private static void logGroup(ReplicaGroupView was, ReplicaGroupView now, boolean clean) {
        if (now != null && now.state() == ReplicaGroupView.State.LOST
                && (was == null || was.state() != ReplicaGroupView.State.LOST)) {
            if (clean) {
                LOG.info("replication: segment {} is LOST (epoch {}): its primary and every in-sync copy left the"
                        + " cluster gracefully (a clean stop: its data went with them)", GroupId.toString(now.group()),
                        Ballot.toString(now.epoch()));
            } else {
                LOG.warn("replication: segment {} is LOST (epoch {}): its primary and every in-sync copy left the"
                        + " cluster", GroupId.toString(now.group()), Ballot.toString(now.epoch()));
            }
        } else if (now != null && was != null && (was.state() != now.state() || was.epoch() != now.epoch())) {
            LOG.info("replication: {} (was {} at epoch {})", now, was.state(), Ballot.toString(was.epoch()));
        } else if (LOG.isDebugEnabled()) {
            LOG.debug("replication: {}", now != null ? now : "segment " + GroupId.toString(was.group())
                    + " is no longer known");
        }
    }

    private void tell(java.util.function.Consumer<DirectoryListener> call) {
        for (DirectoryListener l : listeners) {
            try {
                call.accept(l);
            } catch (RuntimeException e) {
                LOG.error("directory listener {} failed; it keeps being called", l, e);
            }
        }
    }

    /**
     * The live members with the memory-node role, as membership says (a memory node that
     * exports no segment yet, e.g. one restarted while every index of its id is served by
     * a promoted copy, still counts; a client never does); before the agent told the roles,
     * the members that export a segment.
     */
    @Override
    public java.util.Set<Integer> memoryNodes() {
        java.util.Set<Integer> roles = memoryRoles;
        if (roles == null) {
            return SegmentDirectory.super.memoryNodes();
        }
        java.util.Set<Integer> nodes = new java.util.TreeSet<>();
        for (int n : roles) {
            if (member(n).isPresent()) {
                nodes.add(n);
            }
        }
        return nodes;
    }

    @Override
    public Optional<PeerInfo> member(int nodeId) {
        Optional<PeerInfo>[] peers = view.peers();
        return nodeId >= 0 && nodeId < peers.length ? peers[nodeId] : Optional.empty();
    }

    @Override
    public Collection<PeerInfo> members() {
        List<PeerInfo> list = new ArrayList<>();
        view.live().values().forEach(e -> list.add(e.peer()));
        return list;
    }

    @Override
    public Optional<SegmentDescriptor> segment(int nodeId, int index) {
        Optional<SegmentDescriptor>[][] segments = view.segments();
        if (nodeId < 0 || nodeId >= segments.length || segments[nodeId] == null) {
            return Optional.empty();
        }
        Optional<SegmentDescriptor>[] byIndex = segments[nodeId];
        return index >= 0 && index < byIndex.length ? byIndex[index] : Optional.empty();
    }

    /**
     * Every segment a verb can reach: the live members' segments and the logical segments
     * of replica groups that are {@code SERVING} or {@code PROMOTING} (also of a node that
     * died), each once.
     */
    @Override
    public Collection<SegmentDescriptor> segments() {
        return view.allSegments();
    }

    /** Allocation-free: a shared {@code Optional} from the arrays of the current view. */
    @Override
    public Optional<ReplicaGroupView> group(int nodeId, int index) {
        Optional<ReplicaGroupView>[][] groups = view.groupLookup();
        if (nodeId < 0 || nodeId >= groups.length || groups[nodeId] == null) {
            return Optional.empty();
        }
        Optional<ReplicaGroupView>[] byIndex = groups[nodeId];
        return index >= 0 && index < byIndex.length ? byIndex[index] : Optional.empty();
    }

    /** Every replica group known (in any state), in no particular order. */
    @Override
    public Collection<ReplicaGroupView> groups() {
        return view.groups().values();
    }

    @Override
    public void addListener(DirectoryListener listener) {
        listeners.add(listener);
    }

    @Override
    public void removeListener(DirectoryListener listener) {
        listeners.remove(listener);
    }

    static Map<Integer, String> noReasons() {
        return new HashMap<>();
    }
}
