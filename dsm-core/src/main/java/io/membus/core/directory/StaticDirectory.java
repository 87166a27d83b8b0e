package io.membus.core.directory;

import io.membus.core.SegmentDescriptor;
import io.membus.core.transport.PeerInfo;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A {@link SegmentDirectory} and {@link NameRegistry} held in memory and changed
 * by explicit calls: for tests and for clusters inside one process, where every
 * node can share one instance.
 *
 * <p><b>Note:</b> thread-safe; listeners are called on the thread that made the
 * change, after the change is visible to lookups.
 */
public final class StaticDirectory implements SegmentDirectory, NameRegistry {
    private final Map<Integer, PeerInfo> members = new ConcurrentHashMap<>();
    private final Map<Long, SegmentDescriptor> segments = new ConcurrentHashMap<>();
    private final Map<String, Long> names = new ConcurrentHashMap<>();
    private final List<DirectoryListener> listeners = new CopyOnWriteArrayList<>();

    private static long key(int nodeId, int index) {
        return ((long) nodeId << 8) | index;
    }

    public void addMember(PeerInfo member) {
        members.put(member.nodeId(), member);
        listeners.forEach(l -> l.memberUp(member));
    }

    /** Removes a member and its segments. */
    public void removeMember(int nodeId, String reason) {
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

    @Override
    public Optional<SegmentDescriptor> segment(int nodeId, int index) {
        return Optional.ofNullable(segments.get(key(nodeId, index)));
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
