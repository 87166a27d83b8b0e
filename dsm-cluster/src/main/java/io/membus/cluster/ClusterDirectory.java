package io.membus.cluster;

import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.transport.PeerInfo;
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
 * <p>{@link #member} and {@link #segment} run on every verb's path: they index arrays
 * built when the view changes and return shared {@code Optional}s, allocating nothing.
 *
 * <p><b>Note:</b> thread-safe. Lookups read one immutable snapshot (a volatile read);
 * {@link #apply} is called by the node's cluster agent only (one thread at a time),
 * publishes the new snapshot with a volatile write, then calls listeners, so a lookup
 * made from a listener sees the change it is told about.
 */
public final class ClusterDirectory implements SegmentDirectory {
    private static final Logger LOG = LoggerFactory.getLogger(ClusterDirectory.class);

    private static final Optional<PeerInfo>[] NO_PEERS = peers(0);
    private static final Optional<SegmentDescriptor>[][] NO_SEGMENTS = new Optional[0][];

    /**
     * The live entries, and lookups by node id without allocation or boxing (every verb
     * asks for its peer): built once per {@link #apply} and published by one volatile write.
     */
    private volatile View view = new View(Map.of(), NO_PEERS, NO_SEGMENTS);
    private final List<DirectoryListener> listeners = new CopyOnWriteArrayList<>();

    /** Peers and segments indexed by node id (and segment index); absent slots hold {@code Optional.empty()}. */
    private record View(Map<Integer, NodeEntry> live, Optional<PeerInfo>[] peers,
                        Optional<SegmentDescriptor>[][] segments) {
    }

    @SuppressWarnings("unchecked")
    private static Optional<PeerInfo>[] peers(int n) {
        Optional<PeerInfo>[] a = new Optional[n];
        java.util.Arrays.fill(a, Optional.empty());
        return a;
    }

    @SuppressWarnings("unchecked")
    private static View viewOf(Map<Integer, NodeEntry> entries) {
        int max = -1;
        for (Integer id : entries.keySet()) {
            max = Math.max(max, id);
        }
        Optional<PeerInfo>[] peers = peers(max + 1);
        Optional<SegmentDescriptor>[][] segments = new Optional[max + 1][];
        for (NodeEntry e : entries.values()) {
            peers[e.nodeId()] = Optional.of(e.peer());
            int maxIndex = -1;
            for (SegmentDescriptor d : e.segments()) {
                maxIndex = Math.max(maxIndex, d.index());
            }
            Optional<SegmentDescriptor>[] byIndex = new Optional[maxIndex + 1];
            java.util.Arrays.fill(byIndex, Optional.empty());
            for (SegmentDescriptor d : e.segments()) {
                byIndex[d.index()] = Optional.of(d);
            }
            segments[e.nodeId()] = byIndex;
        }
        return new View(entries, peers, segments);
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
        Map<Integer, NodeEntry> prev = view.live();
        Map<Integer, NodeEntry> copy = Map.copyOf(next);
        view = viewOf(copy);
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

    @Override
    public Collection<SegmentDescriptor> segments() {
        List<SegmentDescriptor> list = new ArrayList<>();
        view.live().values().forEach(e -> list.addAll(e.segments()));
        return list;
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
