package io.membus.core.directory;

import io.membus.core.SegmentDescriptor;
import io.membus.core.replication.ClaimPublisher;
import io.membus.core.replication.GroupClaim;
import io.membus.core.replication.GroupId;
import io.membus.core.directory.PeerInfo;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A {@link SegmentDirectory} and {@link NameRegistry} held in memory and changed
 * by explicit calls: for tests and for clusters inside one process, where every
 * node can share one instance.
 *
 * <p>It is also a {@link ClaimPublisher}: every node of the process publishes its replica
 * group claims here, and the group views ({@link #group}, {@link #groups}) are computed
 * from the live members' claims by {@link GroupViews#compute}, the computation the
 * cluster's directory uses too; a change of a view fires
 * {@link DirectoryListener#groupChanged}. A publication is visible to every lookup
 * when its future completes (at once).
 *
 * <p><b>Note:</b> thread-safe; listeners are called on the thread that made the
 * change, after the change is visible to lookups. View computations are serialised (one
 * at a time, {@code groupChanged} fired under that lock), so listeners see the views of a
 * group in order; member and segment events are fired outside it, as before.
 */
public final class StaticDirectory implements SegmentDirectory, NameRegistry, ClaimPublisher {
    private final Map<Integer, PeerInfo> members = new ConcurrentHashMap<>();
    private final Map<Integer, List<GroupClaim>> claims = new ConcurrentHashMap<>();
    private volatile Map<Integer, ReplicaGroupView> views = Map.of();
    /** Serialises view computations and their events. */
    private final Object viewLock = new Object();
    private final Map<Long, SegmentDescriptor> segments = new ConcurrentHashMap<>();
    private final Map<String, Long> names = new ConcurrentHashMap<>();
    private final List<DirectoryListener> listeners = new CopyOnWriteArrayList<>();

    private static long key(int nodeId, int index) {
        return ((long) nodeId << 8) | index;
    }

    public void addMember(PeerInfo member) {
        members.put(member.nodeId(), member);
        listeners.forEach(l -> l.memberUp(member));
        synchronized (viewLock) {
            recompute();
        }
    }

    /** Removes a member and its segments. */
    public void removeMember(int nodeId, String reason) {
        removeMemberAndSegments(nodeId, reason);
        synchronized (viewLock) {
            claims.remove(nodeId);
            recompute();
        }
    }

    private void removeMemberAndSegments(int nodeId, String reason) {
        PeerInfo member = members.remove(nodeId);
        List<SegmentDescriptor> removed = new ArrayList<>();
        segments.values().removeIf(d -> {
            if (d.nodeId() == nodeId) {
                removed.add(d);
                return true;
            }
            return false;
        });
        removed.forEach(d -> listeners.forEach(l -> l.segmentRemoved(d)));
        if (member != null) {
            listeners.forEach(l -> l.memberRemoved(member, reason));
        }
    }

    public void addSegment(SegmentDescriptor segment) {
        segments.put(key(segment.nodeId(), segment.index()), segment);
        listeners.forEach(l -> l.segmentAdded(segment));
    }

    public void removeSegment(int nodeId, int index) {
        SegmentDescriptor d = segments.remove(key(nodeId, index));
        if (d != null) {
            listeners.forEach(l -> l.segmentRemoved(d));
        }
    }

    @Override
    public Optional<PeerInfo> member(int nodeId) {
        return Optional.ofNullable(members.get(nodeId));
    }

    @Override
    public Collection<PeerInfo> members() {
        return List.copyOf(members.values());
    }

    /**
     * The segment's descriptor: the exporting node's while it is live, else the logical
     * descriptor of its replica group while the group is served or being promoted.
     */
    @Override
    public Optional<SegmentDescriptor> segment(int nodeId, int index) {
        SegmentDescriptor d = segments.get(key(nodeId, index));
        if (d == null && !views.isEmpty()) {
            ReplicaGroupView v = views.get(GroupId.of(nodeId, index));
            if (v != null && v.state() != ReplicaGroupView.State.LOST) {
                d = v.logical();
            }
        }
        return Optional.ofNullable(d);
    }

    @Override
    public Optional<ReplicaGroupView> group(int nodeId, int index) {
        return Optional.ofNullable(views.get(GroupId.of(nodeId, index)));
    }

    @Override
    public Collection<ReplicaGroupView> groups() {
        return List.copyOf(views.values());
    }

    /** Replaces every claim of {@code nodeId}; the views are recomputed and their changes fired before it returns. */
    @Override
    public CompletableFuture<Void> publish(int nodeId, Collection<GroupClaim> nodeClaims) {
        synchronized (viewLock) {
            if (nodeClaims.isEmpty()) {
                claims.remove(nodeId);
            } else {
                claims.put(nodeId, List.copyOf(nodeClaims));
            }
            recompute();
        }
        return CompletableFuture.completedFuture(null);
    }

    /** The claims node {@code nodeId} published last (for tests). */
    public List<GroupClaim> claims(int nodeId) {
        return claims.getOrDefault(nodeId, List.of());
    }

    /** Recomputes the views and fires their changes (under viewLock). */
    private void recompute() {
        Map<Integer, ReplicaGroupView> before = views;
        Map<Integer, ReplicaGroupView> after = Map.copyOf(GroupViews.compute(Map.copyOf(members), Map.copyOf(claims),
                before));
        views = after;
        for (Map.Entry<Integer, ReplicaGroupView> e : after.entrySet()) {
            ReplicaGroupView b = before.get(e.getKey());
            if (!e.getValue().equals(b)) {
                listeners.forEach(l -> l.groupChanged(b, e.getValue()));
            }
        }
        for (Map.Entry<Integer, ReplicaGroupView> e : before.entrySet()) {
            if (!after.containsKey(e.getKey())) {
                listeners.forEach(l -> l.groupChanged(e.getValue(), null));
            }
        }
    }

    @Override
    public Collection<SegmentDescriptor> segments() {
        return List.copyOf(segments.values());
    }

    @Override
    public void addListener(DirectoryListener listener) {
        listeners.add(listener);
    }

    @Override
    public void removeListener(DirectoryListener listener) {
        listeners.remove(listener);
    }

    @Override
    public Optional<Long> lookup(String name) {
        return Optional.ofNullable(names.get(name));
    }

    @Override
    public long bind(String name, long ptr) {
        Long previous = names.putIfAbsent(name, ptr);
        return previous == null ? ptr : previous;
    }

    @Override
    public boolean unbind(String name) {
        return names.remove(name) != null;
    }

    @Override
    public boolean unbind(String name, long expectedPtr) {
        return names.remove(name, expectedPtr);
    }

    @Override
    public Map<String, Long> bindings() {
        return Map.copyOf(names);
    }
}
