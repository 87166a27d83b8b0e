package io.membus.cluster;

import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.Transport;
import io.membus.core.capability.ReplicationSupport;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.ddata.DistributedData;
import org.apache.pekko.cluster.ddata.LWWMap;
import org.apache.pekko.cluster.ddata.Replicator;
import org.apache.pekko.pattern.Patterns;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;


/**
 * What a {@link DsmNode}'s start checks and writes in the cluster before it touches memory
 * (docs/cluster.md): that no live member holds its node id, that every memory node has the
 * same {@code membus.replication.backups} (a cluster fact, compared before and after
 * publishing this node's), that its transport can keep copies, which of its segment indexes
 * a replica group still serves elsewhere (a restart: not exported again), and its first
 * directory entry. Majority reads and writes that time out are asked again within the
 * start's deadline ({@link #untilStarted}).
 *
 * <p><b>Note:</b> used by the starting thread only (one start per node); what it reads
 * (membership, Distributed Data) is Pekko's and thread-safe. {@code pause} fails at once when
 * the node was downed meanwhile.
 */
final class StartChecks {
    private static final Logger LOG = LoggerFactory.getLogger(DsmNode.class); // the node's lines, as before
    private final NodeConfig config;
    private final ActorSystem system;
    private final Cluster cluster;
    private final ClusterFacts facts;
    private final ClusterClaims claims;
    private final ClusterMacs macs;
    /** Waits a little between polls; throws once the node was downed. */
    private final Runnable pause;

    StartChecks(NodeConfig config, ActorSystem system, Cluster cluster, ClusterFacts facts, ClusterClaims claims,
                ClusterMacs macs, Runnable pause) {
        this.config = config;
        this.system = system;
        this.cluster = cluster;
        this.facts = facts;
        this.claims = claims;
        this.macs = macs;
        this.pause = pause;
    }

    /** Nanoseconds left until {@code deadline} (a {@link System#nanoTime()}), negative once past. */
    static long left(long deadline) {
        return deadline - System.nanoTime();
    }

    /** Refuses to start when a live member holds this node id; waits for an unreachable holder to be downed. */
    void claimNodeId(long deadline) {
        while (true) {
            Member holder = null;
            boolean reachable = false;
            var state = cluster.state();
            for (Member m : state.getMembers()) {
                if (ClusterAgent.nodeIdOf(m) == config.nodeId() && !m.uniqueAddress().equals(cluster.selfUniqueAddress())
                        && m.status() != MemberStatus.down() && m.status() != MemberStatus.removed()
                        && m.status() != MemberStatus.exiting()) {
                    holder = m;
                    reachable = !state.getUnreachable().contains(m);
                }
            }
            if (holder == null) {
                return;
            }
            if (reachable || left(deadline) <= 0) {
                throw new DsmConfigException("membus.node-id", config.nodeId(), "an id no live member holds: node "
                        + config.nodeId() + " is member " + holder.address() + " (" + holder.status()
                        + (reachable ? "" : ", unreachable but not yet downed") + "); give this node another"
                        + " membus.node-id, or stop that member first");
            }
            pause.run();
        }
    }

    /** Writes this node's first entry (with the claims published so far) to a majority; a miss is logged. */
    void publish(NodeEntry entry) {
        Duration t = config.operationTimeout();
        try {
            claims.start(entry).get(t.toMillis() * 2 + 500, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            LOG.warn("node {}: the directory entry reached no majority within {} ms ({}); it spreads by gossip",
                    entry.nodeId(), t.toMillis(), e.getCause() == null ? e : e.getCause().getMessage());
        } catch (Exception e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt(); // the wait for the majority's acks ends; the caller learns of it
            }
            LOG.warn("node {}: publishing the directory entry did not complete: {}; it spreads by gossip",
                    entry.nodeId(), e.toString());
        }
    }

    /** The cluster fact under which memory nodes compare {@code membus.replication.backups} at join. */
    static final String BACKUPS_FACT = "replication-backups";

    /**
     * {@code membus.replication.backups} must be equal on every memory node: compared with
     * the members' before and after publishing this node's (reads and writes go to a
     * majority, so of two nodes joining at once with different values, the one whose
     * second read begins after the other's publication completed is refused). A refused
     * node takes its fact back.
     *
     * @throws DsmConfigException naming the key, this node's value and the member's
     */
    void agreeOnBackups(long deadline) {
        int mine = config.replication().backups();
        compareBackups(config.nodeId(), mine, untilStarted(deadline, () -> facts.readMemoryNodes(BACKUPS_FACT)));
        untilStarted(deadline, () -> {
            facts.publish(BACKUPS_FACT, Integer.toString(mine));
            return null;
        });
        try {
            compareBackups(config.nodeId(), mine, untilStarted(deadline, () -> facts.readMemoryNodes(BACKUPS_FACT)));
        } catch (RuntimeException e) {
            try {
                facts.remove(BACKUPS_FACT);
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    /**
     * Runs a majority read or write of the cluster facts, asked again while it fails
     * unavailable (no majority answered in time: a loaded machine) and the start's deadline
     * leaves room for another try; the last failure is thrown.
     */
    <T> T untilStarted(long deadline, java.util.function.Supplier<T> call) {
        while (true) {
            try {
                return call.get();
            } catch (io.membus.core.error.NodeUnavailableException e) {
                if (left(deadline) <= config.operationTimeout().toNanos() * 3) {
                    throw e;
                }
                LOG.debug("node {}: cluster facts: {}; asking again", config.nodeId(), e.toString());
                pause.run();
            }
        }
    }

    /**
     * Refuses this node's {@code backups} when a memory node's differs.
     *
     * @param members the other memory nodes' published values, by node id
     */
    static void compareBackups(int nodeId, int mine, Map<Integer, String> members) {
        for (Map.Entry<Integer, String> m : members.entrySet()) {
            if (!m.getValue().equals(Integer.toString(mine))) {
                throw new DsmConfigException("membus.replication.backups", mine, "the value every memory node has: node "
                        + m.getKey() + " has membus.replication.backups = " + m.getValue() + " and node " + nodeId
                        + " has " + mine + "; it must be equal on every memory node (set the same value on all of"
                        + " them; a client node ignores it)");
            }
        }
    }

    /**
     * Refuses {@code membus.replication.backups > 0} on a memory node whose transport
     * cannot keep copies ({@link io.membus.core.capability.ReplicationSupport#NONE}:
     * rdma, whose NIC executes changes with no CPU that could forward them).
     */
    static void refuseUnreplicatable(NodeConfig config, Transport transport) {
        int backups = config.replication().backups(); // 0 on a client: it holds no copies
        if (backups > 0 && transport.capabilities().replication()
                == io.membus.core.capability.ReplicationSupport.NONE) {
            throw new DsmConfigException("membus.replication.backups", backups, "0 on transport " + transport.name()
                    + " (replication over " + transport.name() + " is not built: a NIC cannot forward changes;"
                    + " see docs/replication.md)");
        }
    }

    /**
     * The segment indexes {@code s} of this node for which a replica group {@code (self, s)}
     * lives on among the members (served or being promoted by another node: this node was
     * restarted), read from a majority; this node does not export them again
     * (docs/replication.md §7) and logs that it rejoins as a copy holder. Computed by
     * {@link io.membus.core.directory.GroupViews} like every view.
     */
    java.util.Set<Integer> groupsOfThisNodeElsewhere() {
        Duration t = config.operationTimeout();
        Object got;
        try {
            got = Patterns.ask(DistributedData.get(system).replicator(), new Replicator.Get<>(ClusterAgent.NODES,
                    new Replicator.ReadMajority(t)), t.multipliedBy(2)).toCompletableFuture()
                    .get(t.toMillis() * 2 + 500, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw DsmException.internal("interrupted while reading the directory's groups: node=" + config.nodeId(), e);
        } catch (Exception e) {
            throw new NodeUnavailableException(config.nodeId(), "the directory's replica groups could not be read from"
                    + " a majority before exporting (" + e + "); a majority of the cluster must be reachable", e);
        }
        if (got instanceof Replicator.NotFound<?>) {
            return java.util.Set.of();
        }
        if (!(got instanceof Replicator.GetSuccess<?> success)) {
            throw new NodeUnavailableException(config.nodeId(), "the directory's replica groups could not be read from"
                    + " a majority before exporting (" + got.getClass().getSimpleName() + " within " + t.toMillis()
                    + "ms); a majority of the cluster must be reachable");
        }
        @SuppressWarnings("unchecked")
        Map<String, NodeEntry> all = ((LWWMap<String, NodeEntry>) success.dataValue()).getEntries();
        List<NodeEntry> authentic = all.values().stream().filter(macs::valid).toList();
        Map<Integer, NodeEntry> live = ClusterAgent.liveEntries(cluster.state().getMembers(), authentic);
        java.util.Collection<io.membus.core.directory.ReplicaGroupView> views =
                ClusterDirectory.groupsOf(live, Map.of()).values();
        java.util.Set<Integer> held = heldElsewhere(config.nodeId(), views);
        if (!held.isEmpty()) {
            List<String> segments = new ArrayList<>();
            List<String> primaries = new ArrayList<>();
            views.stream().filter(v -> io.membus.core.replication.GroupId.node(v.group()) == config.nodeId())
                    .sorted(java.util.Comparator.comparingInt(io.membus.core.directory.ReplicaGroupView::group))
                    .forEach(v -> {
                        segments.add(io.membus.core.replication.GroupId.toString(v.group()));
                        primaries.add(v.primary() == 0 ? v.state().toString().toLowerCase(java.util.Locale.ROOT)
                                : "node " + v.primary());
                    });
            LOG.info("replication: node {} rejoined as copy holder of segment {} (their primaries: {}); it does not"
                    + " export them again", config.nodeId(), String.join(", ", segments), String.join(", ", primaries));
        }
        return held;
    }

    /** The indexes of {@code views}' groups that belong to {@code node} (any state): not to be exported again. */
    static java.util.Set<Integer> heldElsewhere(int node, java.util.Collection<io.membus.core.directory.ReplicaGroupView> views) {
        java.util.Set<Integer> held = new java.util.TreeSet<>();
        for (io.membus.core.directory.ReplicaGroupView v : views) {
            if (io.membus.core.replication.GroupId.node(v.group()) == node) {
                held.add(io.membus.core.replication.GroupId.index(v.group()));
            }
        }
        return held;
    }
}
