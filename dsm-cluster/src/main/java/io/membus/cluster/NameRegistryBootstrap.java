package io.membus.cluster;

import io.membus.alloc.GlobalAllocator;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.ddata.DistributedData;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;



/**
 * The name registry's bootstrap (docs/replication.md section 11) at a {@link DsmNode}'s
 * start: it wires the {@code membus-system} register into {@link ClusterNames} on every
 * node; the oldest Up memory member that finds no register (a majority read) founds the
 * registry (the name table in a new system segment of its own, formatted through its verbs,
 * or the arbiter), and writes the register once its directory entry is visible.
 *
 * <p><b>Note:</b> used by the starting thread only: {@link #found} before the node's entry
 * is published, {@link #register()} after; {@code foundedRegistry} is that thread's.
 */
final class NameRegistryBootstrap {
    private static final Logger LOG = LoggerFactory.getLogger(DsmNode.class); // the node's lines, as before
    private final NodeConfig config;
    private final ActorSystem system;
    private final Cluster cluster;
    private final ClusterMacs macs;
    private final ClusterNames names;
    private final RemoteMemory memory;
    /** The node's allocator, asked when the name table grows (a client's is made on first use). */
    private final java.util.function.Supplier<GlobalAllocator> allocator;
    private final NodeReport report;
    /** Waits a little between polls; throws once the node was downed. */
    private final Runnable pause;

    NameRegistryBootstrap(NodeConfig config, ActorSystem system, Cluster cluster, ClusterMacs macs, ClusterNames names,
                          RemoteMemory memory, java.util.function.Supplier<GlobalAllocator> allocator, NodeReport report,
                          Runnable pause) {
        this.config = config;
        this.system = system;
        this.cluster = cluster;
        this.macs = macs;
        this.names = names;
        this.memory = memory;
        this.allocator = allocator;
        this.report = report;
        this.pause = pause;
    }

    /**
     * The name registry's bootstrap, part 1 (docs/replication.md section 11): wires the
     * {@code membus-system} register into {@link ClusterNames}; then, on a memory node that is
     * the oldest Up memory member and finds no register (a majority read), founds the
     * registry: the table ({@code membus.names.table}; by default when replication keeps
     * segments) in a new system segment 255 of this node, formatted here, or the arbiter.
     *
     * @return the system segment to publish in this node's entry, or {@code null}
     */
    SegmentDescriptor found(Transport transport, long deadline) {
        // checked on every node, though only the founder acts on it: a bad value fails every start
        io.membus.cluster.names.NameTableSettings settings =
                io.membus.cluster.names.NameTableSettings.from(config.raw());
        var dd = DistributedData.get(system);
        SystemRoot root = new SystemRoot(dd.replicator(), dd.selfUniqueAddress(), macs, config.operationTimeout());
        io.membus.cluster.names.NameTags tags = (name, ptr) -> {
            ClusterMacs.Tag t = macs.bind(name, ptr);
            return new long[]{t.hi(), t.lo()};
        };
        names.useSystemRoot(root, table -> io.membus.cluster.names.NameTable.open(memory, allocator, table,
                tags, config.operationTimeout()), system.dispatchers().lookup("pekko.actor.default-blocking-io-dispatcher"));
        report.section("names", names::status); // membus status: table or arbiter
        // the read view of membership follows the events: it may not show this member Up yet when the callback ran
        while (!config.isClient() && cluster.selfMember().status() != MemberStatus.up()) {
            if (StartChecks.left(deadline) <= 0) {
                throw new DsmTimeoutException("see this member Up in its own view of the membership", config.nodeId(),
                        config.startTimeout(), "the membership is slow: raise membus.start-timeout");
            }
            pause.run();
        }
        Member oldest = ClusterAgent.arbiter(cluster);
        if (config.isClient() || oldest == null || !oldest.uniqueAddress().equals(cluster.selfUniqueAddress())) {
            return null; // only the oldest Up memory member may found (a majority read only there)
        }
        java.util.Optional<Long> found;
        while (true) {
            try {
                found = RemoteMemory.await(root.read(), config.operationTimeout().multipliedBy(3));
                break;
            } catch (DsmException e) {
                // a majority read that timed out under load is asked again within the start's deadline: a founder that
                // gave up at once left the cluster without a registry (every name call of every node failed; seen in
                // membus stress on a loaded machine once names live in replicated memory by default)
                if (StartChecks.left(deadline) <= config.operationTimeout().toNanos() * 3) {
                    LOG.warn("node {}: the membus-system register could not be read ({}); this node does not found the"
                            + " name registry", config.nodeId(), e.toString());
                    return null;
                }
                LOG.debug("node {}: reading the membus-system register: {}; asking again", config.nodeId(),
                        e.toString());
                pause.run();
            }
        }
        if (found.isPresent()) {
            return null;
        }
        int backups = config.replication().backups();
        if (!settings.useTable(backups, transport.capabilities())) {
            foundedRegistry = RemotePtr.NULL;
            LOG.info("node {} forms the cluster: names go through the arbiter ({}, replication.backups={},"
                    + " transport replication={})", config.nodeId(), settings, backups,
                    transport.capabilities().replication());
            return null;
        }
        int index = io.membus.cluster.names.NameTableSettings.SYSTEM_SEGMENT;
        if (config.segmentCount() > index) {
            throw new DsmConfigException("membus.segments.count", config.segmentCount(), "at most " + index + " on a"
                    + " node that forms a cluster with the name table: segment " + index + " holds it");
        }
        Segment segment = transport.export(new SegmentSpec(index, settings.segmentSize(),
                io.membus.core.Access.ALL, null));
        // through this node's verbs, like every change of segment memory (a replica group never misses one)
        io.membus.cluster.names.NameTable.format(memory, segment.descriptor().pointer(0), settings.capacity());
        foundedRegistry = RemotePtr.pack(config.nodeId(), index, 0);
        LOG.info("node {} forms the cluster: names are a table in replicated memory at {} ({})", config.nodeId(),
                RemotePtr.toString(foundedRegistry), settings);
        return segment.descriptor();
    }

    /** What this node founded: the table's pointer, 0 for the arbiter, -1 when it founded nothing (start thread only). */
    private long foundedRegistry = -1;

    /** The bootstrap, part 2: the founder writes the register once its entry is visible. */
    void register() {
        if (foundedRegistry < 0) {
            return;
        }
        var dd = DistributedData.get(system);
        if (!new SystemRoot(dd.replicator(), dd.selfUniqueAddress(), macs, config.operationTimeout())
                .write(foundedRegistry)) {
            LOG.warn("node {}: the membus-system register reached no majority within {} ms; it spreads by gossip",
                    config.nodeId(), config.operationTimeout().toMillis());
        }
    }
}
