package io.membus.cluster;

import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.replication.AdoptionReplicator;
import io.membus.core.replication.GroupClaim;
import io.membus.core.replication.GroupId;
import io.membus.core.replication.ReplicaGroupStatus;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.transport.Transport;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.function.Supplier;

/**
 * What one {@link DsmNode} says about itself in a status reply ({@code membus status}):
 * the sections the layers above register (by name: the coherent heap's caching, the verbs,
 * the names), and the replica groups' rows: the directory's views, each replaced by the
 * replication engine's own row when this node holds the group.
 *
 * <p><b>Note:</b> thread-safe. The sections are a concurrent sorted map; the engine's rows
 * are a volatile supplier, set once the engine runs. Both are asked on Pekko's blocking
 * dispatcher (the cluster agent's status reply): a supplier must not block long.
 */
final class NodeReport {
    private final NodeConfig config;
    private final ClusterDirectory directory;
    private final Supplier<Transport> transport;
    /** Status sections of the layers above, by name. */
    private final ConcurrentSkipListMap<String, Supplier<Map<String, String>>> sections = new ConcurrentSkipListMap<>();
    /**
     * The replication engine's own rows of the groups this node holds,
     * {@code Replicator.status()} mapped to {@link ClusterMessage.GroupRow} (how far a joining
     * copy is, the note of the last promotion). Until it is set, the status rows come from
     * the directory's views only. Read on Pekko's blocking dispatcher; must not block long.
     */
    private volatile Supplier<List<ClusterMessage.GroupRow>> heldGroupStatus = List::of;

    NodeReport(NodeConfig config, ClusterDirectory directory, Supplier<Transport> transport) {
        this.config = config;
        this.directory = directory;
        this.transport = transport;
    }

    /** Adds (or replaces) section {@code name} ({@link DsmNode#statusSection}). */
    void section(String name, Supplier<Map<String, String>> facts) {
        sections.put(Objects.requireNonNull(name, "name"), Objects.requireNonNull(facts, "facts"));
    }

    /** The sections registered with {@link #section}, asked now; one that fails says so. */
    List<StatusSection> sections() {
        List<StatusSection> out = new ArrayList<>();
        sections.forEach((name, facts) -> {
            try {
                out.add(new StatusSection(name, facts.get()));
            } catch (RuntimeException e) {
                out.add(new StatusSection(name, Map.of("error", String.valueOf(e))));
            }
        });
        return out;
    }

    /** Connects the replication engine's rows of the groups this node holds ({@link #heldGroupStatus}). */
    void heldGroupStatus(Supplier<List<ClusterMessage.GroupRow>> rows) {
        heldGroupStatus = Objects.requireNonNull(rows, "rows");
    }

    /**
     * The replica groups as this node sees them, one row per group ordered by group id:
     * the directory's views, each replaced by the engine's row when this node holds the
     * group ({@link #heldGroupStatus}). Empty with replication off.
     */
    List<ClusterMessage.GroupRow> groupRows() {
        List<ClusterMessage.GroupRow> rows = mergeGroupRows(directory.groups(), heldGroupStatus.get(),
                config.replication().backups());
        Transport t = transport.get();
        return t != null && t.capabilities().replication() == ReplicationSupport.ADOPTION ? adoptionRows(rows) : rows;
    }

    /** The engine's rows of the groups this node serves, as {@code membus status} carries them. */
    List<ClusterMessage.GroupRow> groupRows(List<ReplicaGroupStatus> held) {
        List<ClusterMessage.GroupRow> rows = new ArrayList<>();
        for (ReplicaGroupStatus g : held) {
            if (g.role() != GroupClaim.Role.PRIMARY) {
                continue; // a copy's row is its primary's: the directory's view says it
            }
            int n = GroupId.node(g.group());
            int s = GroupId.index(g.group());
            long size = directory.group(n, s).map(v -> v.logical().size()).orElse(1L);
            List<ClusterMessage.JoiningCopy> joining = new ArrayList<>();
            int[] nodes = g.joining();
            long[] bytes = g.joinedBytes();
            for (int i = 0; i < nodes.length; i++) {
                joining.add(new ClusterMessage.JoiningCopy(nodes[i],
                        (int) Math.min(100, i < bytes.length ? bytes[i] * 100 / Math.max(1, size) : 0)));
            }
            rows.add(new ClusterMessage.GroupRow(g.group(), ReplicaGroupView.State.SERVING,
                    config.nodeId(), g.epoch(), Arrays.stream(g.inSync()).boxed().toList(), joining,
                    g.backups(), g.state()));
        }
        return rows;
    }

    /**
     * The rows on a transport that adopts (shm): a served group wants no copies (one host) and
     * says so, {@link AdoptionReplicator#NOTE}; other states as they are.
     */
    static List<ClusterMessage.GroupRow> adoptionRows(List<ClusterMessage.GroupRow> rows) {
        List<ClusterMessage.GroupRow> out = new ArrayList<>(rows.size());
        for (ClusterMessage.GroupRow r : rows) {
            out.add(r.state() != ReplicaGroupView.State.SERVING ? r
                    : new ClusterMessage.GroupRow(r.group(), r.state(), r.primary(), r.epoch(), r.inSync(),
                    r.joining(), 0, AdoptionReplicator.NOTE));
        }
        return out;
    }

    /** The rows of {@code views}, each replaced by the row of {@code held} of the same group, ordered by group id. */
    static List<ClusterMessage.GroupRow> mergeGroupRows(Collection<ReplicaGroupView> views,
                                                        List<ClusterMessage.GroupRow> held, int backups) {
        TreeMap<Integer, ClusterMessage.GroupRow> rows = new TreeMap<>();
        for (ReplicaGroupView v : views) {
            rows.put(v.group(), ClusterMessage.GroupRow.of(v, backups));
        }
        for (ClusterMessage.GroupRow r : held) {
            rows.put(r.group(), r);
        }
        return List.copyOf(rows.values());
    }
}
