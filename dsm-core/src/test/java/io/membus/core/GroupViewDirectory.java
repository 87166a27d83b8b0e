package io.membus.core;

import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.replication.GroupId;
import io.membus.core.directory.PeerInfo;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A {@link SegmentDirectory} for routing tests: members and segments from a
 * {@link StaticDirectory}, replica-group views set by hand ({@link #put}, {@link #remove}),
 * each change told to the listeners ({@link DirectoryListener#groupChanged}) after it is
 * visible to lookups, as a real directory does. Until {@code StaticDirectory} publishes
 * claims ({@code ClaimPublisher}), this is how a test puts a group in any state.
 *
 * <p><b>Note:</b> thread-safe; listeners run on the thread that made the change.
 */
final class GroupViewDirectory implements SegmentDirectory {
    private final StaticDirectory members = new StaticDirectory();
    private final Map<Integer, Optional<ReplicaGroupView>> views = new ConcurrentHashMap<>();
    private final List<DirectoryListener> listeners = new CopyOnWriteArrayList<>();

    /** Members and segments: added there, seen here. */
    StaticDirectory base() {
        return members;
    }

    /** Sets the view of its group and tells the listeners. */
    void put(ReplicaGroupView view) {
        Optional<ReplicaGroupView> before = views.put(view.group(), Optional.of(view));
        listeners.forEach(l -> l.groupChanged(before == null ? null : before.orElse(null), view));
    }

    /** Forgets the group (unexported) and tells the listeners. */
    void remove(int group) {
        Optional<ReplicaGroupView> before = views.remove(group);
        if (before != null) {
            listeners.forEach(l -> l.groupChanged(before.orElse(null), null));
        }
    }

    /** A view of {@code logical}'s group in {@code state}, served by {@code primary} (0 unless serving). */
    static ReplicaGroupView view(SegmentDescriptor logical, ReplicaGroupView.State state, int primary, long epoch,
                                 int... inSync) {
        int group = GroupId.of(logical.nodeId(), logical.index());
        return new ReplicaGroupView(group, epoch, state, primary, 0, inSync, new int[0], logical);
    }

    @Override
    public Optional<PeerInfo> member(int nodeId) {
        return members.member(nodeId);
    }

    @Override
    public Collection<PeerInfo> members() {
        return members.members();
    }

    @Override
    public Optional<SegmentDescriptor> segment(int nodeId, int index) {
        return members.segment(nodeId, index);
    }

    @Override
    public Collection<SegmentDescriptor> segments() {
        return members.segments();
    }

    @Override
    public Optional<ReplicaGroupView> group(int nodeId, int index) {
        Optional<ReplicaGroupView> v = views.get(GroupId.of(nodeId, index));
        return v == null ? Optional.empty() : v;
    }

    @Override
    public Collection<ReplicaGroupView> groups() {
        return views.values().stream().map(Optional::get).toList();
    }

    @Override
    public void addListener(DirectoryListener listener) {
        listeners.add(listener);
        members.addListener(listener);
    }

    @Override
    public void removeListener(DirectoryListener listener) {
        listeners.remove(listener);
        members.removeListener(listener);
    }
}
