package io.membus.cluster;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.replication.AdoptionReplicator;
import io.membus.core.replication.ClaimPublisher;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.replication.Replicator;
import io.membus.core.transport.Transport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The replication engine a {@link DsmNode} runs, chosen by what its transport can do
 * (docs/replication.md): a {@link Replicator} on a transport that forwards changes (tcp,
 * local), an {@link AdoptionReplicator} on one that adopts a dead node's files (shm), none on
 * a client or with {@code membus.replication.backups = 0}. It starts the engine over the
 * node's exported segments, hands it the segments exported later, and at a stop runs its
 * graceful leave, then closes it.
 *
 * <p><b>Note:</b> thread-safe. The engines are published through volatile fields by
 * {@link #start} (the starting thread); {@link #leave}, {@link #close} and
 * {@link #closeAdoption} may run on the closing thread and on the thread of a downed node.
 */
final class NodeReplication {
    private static final Logger LOG = LoggerFactory.getLogger(DsmNode.class); // the node's lines, as before
    private final NodeConfig config;
    /** The replication engine of a memory node with {@code backups > 0} on a forwarding transport, else null. */
    private volatile Replicator replicator;
    /** The adoption service of a memory node with {@code backups > 0} on a transport that adopts (shm), else null. */
    private volatile AdoptionReplicator adoption;

    NodeReplication(NodeConfig config) {
        this.config = config;
    }

    /**
     * Starts the replication engine on a memory node whose transport forwards changes
     * ({@code membus.replication.backups > 0}; docs/replication.md): every segment this node
     * exported becomes a replica group it serves as primary, copies are placed on the other
     * memory nodes, and this node holds the copies its peers place on it. A client holds no
     * copies and runs none. Its rows feed {@code membus status} ({@code report}).
     */
    void start(Transport transport, RemoteMemory memory, ClusterDirectory directory, ClaimPublisher claims,
               NodeReport report) {
        if (config.isClient() || !config.replication().enabled()) {
            return;
        }
        if (transport.capabilities().replication() == ReplicationSupport.ADOPTION) {
            // shm (docs/replication.md §8): no copies; a survivor adopts a dead node's files and serves them
            AdoptionReplicator a = new AdoptionReplicator(transport, directory, claims, config.replication(),
                    config.operationTimeout());
            a.start();
            for (Segment s : transport.table().all()) {
                a.exported(s);
            }
            this.adoption = a;
            report.heldGroupStatus(() -> report.groupRows(a.status()));
            return;
        }
        if (transport.capabilities().replication() != ReplicationSupport.FORWARDING) {
            return;
        }
        Replicator r = new Replicator(transport, memory, directory, claims, config.replication());
        r.start();
        for (Segment s : transport.table().all()) {
            r.exported(s);
        }
        this.replicator = r;
        report.heldGroupStatus(() -> report.groupRows(r.status()));
    }

    /** A segment exported after {@link #start} (the name table's system segment): served replicated too. */
    void exported(Segment segment) {
        Replicator r = replicator;
        if (r != null) {
            r.exported(segment); // names survive the founder's loss
        }
        AdoptionReplicator a = adoption;
        if (a != null) {
            a.exported(segment); // adopted with the founder's other files
        }
    }

    /**
     * A graceful leave (a clean stop, after the allocator's last verbs, which change this
     * node's groups: they must still be served here): hands the groups over to their copies
     * and the copies back, while this node is a member and can publish its claims
     * (docs/replication.md §17.9): nothing is LOST, no warning. A failure is logged.
     */
    void leave() {
        Replicator r = replicator;
        if (r != null) {
            try {
                r.leave(config.replicationLeaveTimeout());
            } catch (RuntimeException e) {
                LOG.warn("node {}: handing over its replica groups: {}", config.nodeId(), e.toString());
            }
        }
    }

    /**
     * Closes the engines: no new streams or promotions (what was not handed over is promoted
     * once this node left); no new adoptions, no retries of blocked ones (what was adopted
     * closes with the transport).
     */
    void close() {
        Replicator r = replicator;
        if (r != null) {
            r.close();
        }
        closeAdoption();
    }

    /** Closes the adoption service only (a downed node adopts nothing more). */
    void closeAdoption() {
        AdoptionReplicator ad = adoption;
        if (ad != null) {
            ad.close();
        }
    }
}
