package io.membus.cluster;

import com.typesafe.config.Config;
import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapUsage;
import io.membus.core.JvmFlags;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.NameRegistry;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportCapabilities;
import io.membus.core.replication.ReplicaGroupStatus;
import io.membus.core.replication.ReplicationSupport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.AddressFromURIString;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.ddata.DistributedData;
import org.apache.pekko.cluster.ddata.LWWMap;
import org.apache.pekko.cluster.ddata.Replicator;
import org.apache.pekko.pattern.Patterns;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * One Membus node, assembled from its config: it joins the Pekko cluster, claims its
 * compact node id, starts its transport (chosen by name through {@code ServiceLoader}),
 * exports its segments, publishes them in the replicated directory, and from then on
 * follows membership — fencing members that are downed, and stopping itself (and
 * saying why, {@link #downReason()}) when it is downed.
 *
 * <pre>
 *   try (DsmNode node = DsmNode.start(Path.of("node.conf"))) {
 *       node.awaitMembers(3, Duration.ofSeconds(30));
 *       RemoteMemory mem = node.remoteMemory();
 *       long ptr = node.directory().segment(2, 0).orElseThrow().pointer(64);
 *       mem.fetchAndAdd(ptr, 1);
 *   }
 * </pre>
 *
 * <p>Start order: Pekko first, then the node-id claim, then the transport, so a node
 * whose id is taken never touches the memory (or the shm files) of the node that
 * holds it. Each start is a new incarnation (a wall-clock based number that grows),
 * with new remote keys; file-backed segments keep their bytes.
 *
 * <p><b>Note:</b> thread-safe. Everything {@link #start} sets up (transport, remote
 * memory, allocator) is published through volatile fields before {@code start} returns,
 * so any thread that receives the node sees it whole (a client's allocator is made on first
 * use, under the node's lock, and published by the same volatile field); {@link #downReason()} is a volatile
 * read of what the cluster agent's thread wrote. {@link #close()} may be called from any
 * thread, any number of times: the first call leaves the cluster gracefully (bounded),
 * then closes the transport and its segments; the others return once that is done.
 */
public final class DsmNode implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DsmNode.class);

    private final NodeConfig config;
    /** Status sections of the layers above, by name. */
    private final java.util.concurrent.ConcurrentSkipListMap<String, java.util.function.Supplier<Map<String, String>>>
            statusSections = new java.util.concurrent.ConcurrentSkipListMap<>();
    private final long incarnation;
    private final ActorSystem system;
    /** Artery's TLS engines when membership is authenticated by the cluster secret; else {@code null}. */
    private final MembershipTls.Provider membershipTls;
    private final Cluster cluster;
    private final ClusterDirectory directory = new ClusterDirectory();
    private final AtomicReference<Map<String, Long>> nameSnapshot = new AtomicReference<>(Map.of());
    private final AtomicReference<Transport> transportRef = new AtomicReference<>();
    private final java.util.concurrent.atomic.AtomicBoolean transportClosed = new java.util.concurrent.atomic.AtomicBoolean();
    private final ClusterNames names;
    private final ClusterFacts facts;
    /** Tags of the directory entry and name bindings, under the cluster secret. */
    private final ClusterMacs macs;
    /** This node's replica-group claims in its directory entry: the cluster's {@link ClaimPublisher}. */
    private final ClusterClaims claims;
    private volatile RemoteMemory memory;
    private volatile io.membus.core.message.Messaging messaging;
    private volatile GlobalAllocator allocator;
    /** The replication engine of a memory node with {@code backups > 0} on a forwarding transport, else null. */
    private volatile io.membus.core.replication.Replicator replicator;
    /** The adoption service of a memory node with {@code backups > 0} on a transport that adopts (shm), else null. */
    private volatile io.membus.core.replication.AdoptionReplicator adoption;
    private volatile String downReason;
    private volatile boolean closing;
    /** Set by the first {@link #close()}; later calls wait for it ({@link #closed}). */
    private final java.util.concurrent.atomic.AtomicBoolean closeStarted = new java.util.concurrent.atomic.AtomicBoolean();
    private final java.util.concurrent.CountDownLatch closed = new java.util.concurrent.CountDownLatch(1);
    private final long startedNanos = System.nanoTime();
    private final io.micrometer.core.instrument.composite.CompositeMeterRegistry meters =
            new io.micrometer.core.instrument.composite.CompositeMeterRegistry();
    private volatile io.membus.core.metrics.VerbMetrics verbMetrics;
    private volatile PrometheusEndpoint prometheus;
    private final NodeMeters.MembershipCounts membership = new NodeMeters.MembershipCounts();

    private DsmNode(NodeConfig config) {
        this.config = config;
        this.macs = new ClusterMacs(config.clusterSecret());
        this.incarnation = System.currentTimeMillis() * 1000 + (System.nanoTime() & 0x3ff);
        this.membershipTls = config.membership() == NodeConfig.Membership.SECRET_TLS
                ? MembershipTls.provider(config.clusterSecret(), config.clusterName() + "/node-" + config.nodeId()) : null;
        this.system = PekkoSettings.system(config.clusterName(), pekkoConfig(config), membershipTls);
        switch (config.membership()) {
            case SECRET_TLS -> LOG.info("membership of node {} (Pekko Artery on {}:{}): mutual TLS with credentials made"
                    + " from the cluster secret ({})", config.nodeId(), config.host(), config.port(),
                    config.clusterSecret().source());
            case TLS_STORES -> LOG.info("membership of node {} (Pekko Artery on {}:{}): mutual TLS with the certificates"
                    + " of membus.tls", config.nodeId(), config.host(), config.port());
            case OFF -> LOG.warn("membership traffic of node {} (Pekko Artery on {}:{}) is neither encrypted nor"
                    + " authenticated (membus.security.authenticate = off): anyone who reaches that port can join"
                    + " the cluster, be counted in its majority and down members (docs/security.md)",
                    config.nodeId(), config.host(), config.port());
            default -> throw new IllegalStateException("unknown membership mode " + config.membership());
        }
        try {
            this.cluster = Cluster.get(system);
            ActorRef replicator = DistributedData.get(system).replicator();
            this.names = new ClusterNames(system, replicator, nameSnapshot, config.operationTimeout(), macs);
            this.facts = new ClusterFacts(cluster, replicator, DistributedData.get(system).selfUniqueAddress(),
                    config.nodeId(), config.operationTimeout());
            this.claims = new ClusterClaims(config.nodeId(), replicator, DistributedData.get(system).selfUniqueAddress(),
                    macs, config.operationTimeout());
            system.actorOf(ClusterAgent.props(config.nodeId(), directory, nameSnapshot, transportRef, this::selfDowned,
                    config.operationTimeout(), this::heapUsage, this::statusSections, this::groupRows, macs),
                    ClusterAgent.NAME);
            system.actorOf(NodeMeters.Membership.props(membership), "membus-membership-meters");
        } catch (RuntimeException | Error e) {
            // the actor system runs (threads, the Artery port): a failed start leaves nothing behind
            terminate(system, Duration.ofSeconds(5));
            throw e;
        }
    }

    private static void terminate(ActorSystem system, Duration wait) {
        system.terminate();
        try {
            system.getWhenTerminated().toCompletableFuture().get(wait.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) {
            LOG.warn("actor system {} did not terminate within {} ms: {}", system.name(), wait.toMillis(), e.toString());
        }
    }

    /** Starts a node from {@code application.conf} and system properties (over the defaults). */
    public static DsmNode start() {
        return start(NodeConfig.load());
    }

    /** Starts a node from the {@code membus} section of {@code config} (over the defaults). */
    public static DsmNode start(Config config) {
        return start(NodeConfig.from(config));
    }

    /** Starts a node from a HOCON file. */
    public static DsmNode start(Path configFile) {
        return start(NodeConfig.load(configFile));
    }

    /**
     * Starts a node: joins the cluster, claims the node id, starts the transport,
     * exports and publishes the segments. Waits at most {@code membus.start-timeout}.
     *
     * @throws DsmConfigException when the JVM lacks the flags of {@link JvmFlags#required()}, the node id is held
     *                            by a live member, or the
     *                            transport's settings are bad
     * @throws DsmTimeoutException when the cluster could not be joined in time
     */
    public static DsmNode start(NodeConfig config) {
        JvmFlags.require(); // before Chronicle is touched: a start without the flags fails naming them
        DsmNode node;
        try {
            node = new DsmNode(config);
        } catch (Exception e) { // Pekko's start may throw an undeclared (checked) InterruptedException
            if (e instanceof DsmException d) {
                throw d;
            }
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt(); // the caller's: kept, not swallowed
                throw DsmException.internal("interrupted while the actor system of node "
                        + config.nodeId() + " was starting; the start was abandoned", e);
            }
            throw new DsmConfigException("membus.port", config.host() + ":" + config.port(),
                    "an address this node can listen on (free port, local interface): the cluster membership could"
                            + " not start: " + e.getMessage(), e);
        }
        try {
            node.join();
            return node;
        } catch (RuntimeException | Error e) {
            // half started: the actor system, maybe the transport and its segments; release them all
            node.closeStarted.set(true);
            node.closing = true;
            try {
                node.shutdown(Duration.ofSeconds(5));
            } catch (RuntimeException | Error s) {
                e.addSuppressed(s);
            } finally {
                node.closed.countDown();
            }
            throw e;
        }
    }

    /** Pekko settings of a node ({@link PekkoSettings#of}). */
    static Config pekkoConfig(NodeConfig c) {
        return PekkoSettings.of(c);
    }

    private void join() {
        long deadline = System.nanoTime() + config.startTimeout().toNanos();
        CompletableFuture<Void> up = new CompletableFuture<>();
        cluster.registerOnMemberUp(() -> up.complete(null));
        cluster.registerOnMemberRemoved(() -> selfDowned("this node was removed from the cluster"));
        List<Address> seeds = new ArrayList<>();
        for (String s : config.seedNodes()) {
            seeds.add(AddressFromURIString.parse("pekko://" + config.clusterName() + "@"
                    + io.membus.core.config.HostPort.parse("membus.seed-nodes", s))); // an IPv6 host in brackets
        }
        if (seeds.isEmpty()) {
            cluster.join(cluster.selfAddress());
        } else {
            cluster.joinSeedNodes(seeds);
        }
        try {
            up.get(left(deadline), TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            String refused = membershipTls == null ? null : membershipTls.lastRefusal();
            if (refused != null) {
                throw new AuthenticationException("seed-nodes=" + config.seedNodes(), "could not join the cluster:"
                        + " node=" + config.nodeId() + ", waited=" + config.startTimeout().toMillis() + "ms, " + refused
                        + " (membus.secret, or the content of membus.secret-file; docs/security.md)");
            }
            throw new DsmTimeoutException("join the cluster (could not join the cluster: seed-nodes="
                    + config.seedNodes() + ", cluster-name=" + config.clusterName() + ")", config.nodeId(),
                    config.startTimeout(), "check that a seed node runs, is reachable from " + config.host()
                    + ", uses the same cluster-name and the same cluster secret (membus.start-timeout bounds the wait)");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the caller's: kept, not swallowed
            throw DsmException.internal("interrupted while joining the cluster: node="
                    + config.nodeId() + "; the start was abandoned and nothing of it is left running", e);
        } catch (Exception e) {
            throw DsmException.internal("joining the cluster failed: " + e, e);
        }
        claimNodeId(deadline);
        if (!config.isClient()) {
            agreeOnBackups(deadline); // before the transport: a refused node never touches memory
        }

        TransportConfig tc = TransportConfig.builder(config.nodeId()).incarnation(incarnation)
                .operationTimeout(config.operationTimeout()).connectTimeout(config.connectTimeout())
                .transports(config.transports()).build();
        Transport transport;
        try {
            transport = Transports.create(config.transport(), tc);
        } catch (DsmConfigException e) {
            // name the key the user wrote: membus.secret, not the membus.transports.tcp.secret it became
            throw config.reportedAsUserKey(e);
        }
        transportRef.set(transport);
        directory.replicationMode(transport.capabilities().replication()); // shm: a dead node's groups await adoption
        refuseUnreplicatable(config, transport);
        installMetrics(transport);
        // groups first (docs/replication.md §7): an index whose group lives on (served by a promoted copy) is not
        // exported again by a restarted node; the Replicator (wired here by the lead) learns its groups before exports
        // a majority read: asked again within the start's deadline when it times out (a restart on a loaded machine)
        java.util.Set<Integer> heldElsewhere = config.replication().enabled()
                ? untilStarted(deadline, this::groupsOfThisNodeElsewhere) : java.util.Set.of();
        List<SegmentDescriptor> exported = new ArrayList<>();
        for (int i = 0; i < config.segmentCount(); i++) {
            if (heldElsewhere.contains(i)) {
                continue;
            }
            Path file = config.fileBacked() ? segmentFile(transport, i) : null;
            try {
                exported.add(transport.export(new SegmentSpec(i, config.segmentSize(), config.segmentAccess(), file))
                        .descriptor());
            } catch (java.io.UncheckedIOException e) {
                throw new DsmConfigException(transport.capabilities().segmentFiles()
                        .map(TransportCapabilities.SegmentFiles::key).orElse("membus.segments.dir"),
                        file == null ? "-" : file.getParent(), "a directory this node can"
                        + " create its segment files in: segment " + i + " could not be created (" + e.getMessage()
                        + ": " + e.getCause() + ")", e);
            }
        }
        this.memory = new RemoteMemory(transport, directory, config.operationTimeout());
        this.messaging = new io.membus.core.message.Messaging(memory);
        startReplication(transport); // before the heaps are formatted and the entry published: every change is forwarded
        List<Integer> heapsHere = config.heapSegments().stream().filter(i -> !heldElsewhere.contains(i)).toList();
        if (!config.heapSegments().isEmpty()) {
            // formatted before the entry is published: no peer ever sees an unformatted heap
            GlobalAllocator a = new GlobalAllocator(memory, AllocatorConfig.builder()
                    .heapSegments(config.heapSegments().stream().mapToInt(Integer::intValue).toArray())
                    .chunkSize(config.heapChunkSize()).build());
            if (!heapsHere.isEmpty()) { // every heap index may be a group another node serves now (a restart)
                a.formatLocalSegments();
            }
            this.allocator = a;
            NodeMeters.bindHeap(meters, a, heapsHere);
        }
        SegmentDescriptor systemSegment = foundNameRegistry(transport, deadline); // the founder's table, before its entry
        if (systemSegment != null) {
            exported.add(systemSegment);
            io.membus.core.replication.Replicator r = replicator;
            if (r != null) {
                r.exported(transport.table().get(systemSegment.index())); // names survive the founder's loss
            }
            io.membus.core.replication.AdoptionReplicator a = adoption;
            if (a != null) {
                a.exported(transport.table().get(systemSegment.index())); // adopted with the founder's other files
            }
        }
        NodeEntry entry = new NodeEntry(config.nodeId(), incarnation, cluster.selfAddress().toString(),
                cluster.selfUniqueAddress().longUid(), transport.name(), transport.localAddress(), exported,
                allocator == null ? List.of() : heapsHere);
        publish(entry); // with the claims published so far (ClusterClaims), tagged
        while (!directory.entries().containsKey(config.nodeId())
                || directory.entries().get(config.nodeId()).incarnation() != incarnation) {
            if (left(deadline) <= 0) {
                throw new DsmTimeoutException("publish this node's directory entry (it did not appear)",
                        config.nodeId(), config.startTimeout(), "the membership is slow or partitioned: check the"
                        + " other members, or raise membus.start-timeout");
            }
            pause();
        }
        registerNameRegistry(); // after the entry: whoever reads the register can reach the table
        LOG.info("membus node {} started: incarnation={}, member={}, transport={} at {}, segments={} x {} B{}",
                config.nodeId(), incarnation, cluster.selfAddress(), transport.name(), transport.localAddress(),
                config.segmentCount(), config.segmentSize(), config.fileBacked() ? " (file-backed)" : "");
    }

    /**
     * Starts the replication engine on a memory node whose transport forwards changes
     * ({@code membus.replication.backups > 0}; docs/replication.md): every segment this node
     * exported becomes a replica group it serves as primary, copies are placed on the other
     * memory nodes, and this node holds the copies its peers place on it. A client holds no
     * copies and runs none. Its rows feed {@code membus status}.
     */
    private void startReplication(Transport transport) {
        if (config.isClient() || !config.replication().enabled()) {
            return;
        }
        if (transport.capabilities().replication() == ReplicationSupport.ADOPTION) {
            // shm (docs/replication.md §8): no copies; a survivor adopts a dead node's files and serves them
            io.membus.core.replication.AdoptionReplicator a = new io.membus.core.replication.AdoptionReplicator(
                    transport, directory, claimPublisher(), config.replication(), config.operationTimeout());
            a.start();
            for (io.membus.core.Segment s : transport.table().all()) {
                a.exported(s);
            }
            this.adoption = a;
            heldGroupStatus(() -> groupRows(a.status()));
            return;
        }
        if (transport.capabilities().replication() != ReplicationSupport.FORWARDING) {
            return;
        }
        io.membus.core.replication.Replicator r = new io.membus.core.replication.Replicator(transport, memory, directory, claimPublisher(), config.replication());
        r.start();
        for (io.membus.core.Segment s : transport.table().all()) {
            r.exported(s);
        }
        this.replicator = r;
        heldGroupStatus(() -> groupRows(r.status()));
    }

    /** The engine's rows of the groups this node serves, as {@code membus status} carries them. */
    private List<ClusterMessage.GroupRow> groupRows(List<ReplicaGroupStatus> held) {
        List<ClusterMessage.GroupRow> rows = new ArrayList<>();
        for (ReplicaGroupStatus g : held) {
            if (g.role() != io.membus.core.replication.GroupClaim.Role.PRIMARY) {
                continue; // a copy's row is its primary's: the directory's view says it
            }
            int n = io.membus.core.replication.GroupId.node(g.group());
            int s = io.membus.core.replication.GroupId.index(g.group());
            long size = directory.group(n, s).map(v -> v.logical().size()).orElse(1L);
            List<ClusterMessage.JoiningCopy> joining = new ArrayList<>();
            int[] nodes = g.joining();
            long[] bytes = g.joinedBytes();
            for (int i = 0; i < nodes.length; i++) {
                joining.add(new ClusterMessage.JoiningCopy(nodes[i],
                        (int) Math.min(100, i < bytes.length ? bytes[i] * 100 / Math.max(1, size) : 0)));
            }
            rows.add(new ClusterMessage.GroupRow(g.group(), io.membus.core.directory.ReplicaGroupView.State.SERVING,
                    config.nodeId(), g.epoch(), java.util.Arrays.stream(g.inSync()).boxed().toList(), joining,
                    g.backups(), g.state()));
        }
        return rows;
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
    private SegmentDescriptor foundNameRegistry(Transport transport, long deadline) {
        // checked on every node, though only the founder acts on it: a bad value fails every start
        io.membus.cluster.names.NameTableSettings settings =
                io.membus.cluster.names.NameTableSettings.from(config.raw());
        var dd = DistributedData.get(system);
        SystemRoot root = new SystemRoot(dd.replicator(), dd.selfUniqueAddress(), macs, config.operationTimeout());
        io.membus.cluster.names.NameTags tags = (name, ptr) -> {
            ClusterMacs.Tag t = macs.bind(name, ptr);
            return new long[]{t.hi(), t.lo()};
        };
        names.useSystemRoot(root, table -> io.membus.cluster.names.NameTable.open(memory, this::allocator, table,
                tags, config.operationTimeout()), system.dispatchers().lookup("pekko.actor.default-blocking-io-dispatcher"));
        statusSections.put("names", names::status); // membus status: table or arbiter
        // the read view of membership follows the events: it may not show this member Up yet when the callback ran
        while (!config.isClient() && cluster.selfMember().status() != MemberStatus.up()) {
            if (left(deadline) <= 0) {
                throw new DsmTimeoutException("see this member Up in its own view of the membership", config.nodeId(),
                        config.startTimeout(), "the membership is slow: raise membus.start-timeout");
            }
            pause();
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
                if (left(deadline) <= config.operationTimeout().toNanos() * 3) {
                    LOG.warn("node {}: the membus-system register could not be read ({}); this node does not found the"
                            + " name registry", config.nodeId(), e.toString());
                    return null;
                }
                LOG.debug("node {}: reading the membus-system register: {}; asking again", config.nodeId(),
                        e.toString());
                pause();
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
    private void registerNameRegistry() {
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

    /** Refuses to start when a live member holds this node id; waits for an unreachable holder to be downed. */
    private void claimNodeId(long deadline) {
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
            pause();
        }
    }

    /** Writes this node's first entry (with the claims published so far) to a majority; a miss is logged. */
    private void publish(NodeEntry entry) {
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
    private void agreeOnBackups(long deadline) {
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
    private <T> T untilStarted(long deadline, java.util.function.Supplier<T> call) {
        while (true) {
            try {
                return call.get();
            } catch (io.membus.core.error.NodeUnavailableException e) {
                if (left(deadline) <= config.operationTimeout().toNanos() * 3) {
                    throw e;
                }
                LOG.debug("node {}: cluster facts: {}; asking again", config.nodeId(), e.toString());
                pause();
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
     * cannot keep copies ({@link io.membus.core.replication.ReplicationSupport#NONE}:
     * rdma, whose NIC executes changes with no CPU that could forward them).
     */
    static void refuseUnreplicatable(NodeConfig config, Transport transport) {
        int backups = config.replication().backups(); // 0 on a client: it holds no copies
        if (backups > 0 && transport.capabilities().replication()
                == io.membus.core.replication.ReplicationSupport.NONE) {
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
    private java.util.Set<Integer> groupsOfThisNodeElsewhere() {
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

    /** A file-backed segment's file: in the transport's directory where it needs one (peers map it), else membus.segments.dir. */
    private Path segmentFile(Transport transport, int index) {
        return transport.capabilities().segmentFiles()
                .map(f -> f.directory().resolve("node-" + config.nodeId() + "-persistent-" + index + ".seg"))
                .orElseGet(() -> config.segmentDir().toAbsolutePath()
                        .resolve("node-" + config.nodeId() + "-seg-" + index + ".seg"));
    }

    private void selfDowned(String reason) {
        if (closing || downReason != null) {
            return;
        }
        downReason = reason;
        LOG.error("membus node {} is DOWN and stops serving: {}", config.nodeId(), reason);
        claims.close(NodeUnavailableException.notSent(config.nodeId(), "node " + config.nodeId() + " is down: "
                + reason));
        Thread t = new Thread(() -> {
            io.membus.core.replication.AdoptionReplicator ad = adoption;
            if (ad != null) {
                ad.close(); // a downed node adopts nothing more
            }
            closeTransport();
            system.terminate();
        }, "membus-node-" + config.nodeId() + "-down");
        t.setDaemon(true);
        t.start();
    }

    private static long left(long deadline) {
        return deadline - System.nanoTime();
    }

    /** Waits a little between polls; fails at once when this node was downed meanwhile. */
    private void pause() {
        String down = downReason;
        if (down != null) {
            throw NodeUnavailableException.notSent(config.nodeId(), "node " + config.nodeId() + " is down: " + down);
        }
        try {
            Thread.sleep(50);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw DsmException.internal("interrupted while starting the node", e);
        }
    }

    /**
     * Waits until the directory shows at least {@code count} live members (this one
     * included) with their segments.
     *
     * @return the number of members seen
     * @throws DsmTimeoutException when they do not appear in time
     */
    public int awaitMembers(int count, Duration timeout) {
        checkOpen();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (directory.entries().size() < count) {
            if (downReason != null) {
                throw NodeUnavailableException.notSent(config.nodeId(), "node " + config.nodeId() + " is down: "
                        + downReason);
            }
            if (left(deadline) <= 0) {
                throw new DsmTimeoutException("await members (members did not join in time: expected=" + count
                        + ", seen=" + directory.entries().keySet() + ")", config.nodeId(), timeout, "start the other"
                        + " nodes with seed-nodes pointing at a running node");
            }
            pause();
        }
        return directory.entries().size();
    }

    public int nodeId() {
        return config.nodeId();
    }

    public long incarnation() {
        return incarnation;
    }

    public NodeConfig config() {
        return config;
    }

    /** Verbs on any pointer of the cluster, through the directory and this node's transport. */
    public RemoteMemory remoteMemory() {
        return memory;
    }

    /** Two-sided messages to any member by node id, and this node's handlers (see {@link io.membus.core.message.Messaging}). */
    public io.membus.core.message.Messaging messaging() {
        return messaging;
    }

    /**
     * The global allocator: blocks in any node's heap segments ({@code membus.heap}).
     * A client ({@link NodeConfig#isClient()}) exports no memory: its allocator, made on
     * first use, places every block on the memory nodes (round robin by default; by key or
     * on a named memory node when asked), in the heap segments their directory entries name.
     *
     * @throws DsmConfigException when this memory node has no heap segments configured
     * @throws io.membus.alloc.PlacementException when this is a client and no live memory
     *                            node exports a heap yet (start one, or wait for it and retry)
     */
    public GlobalAllocator allocator() {
        checkOpen();
        GlobalAllocator a = allocator;
        if (a == null) {
            if (config.isClient()) {
                return clientAllocator();
            }
            throw new DsmConfigException("membus.heap.segments", "[]", "the indexes of the segments to format as"
                    + " allocator heaps, e.g. [0] (the same on every node): node " + config.nodeId()
                    + " runs no allocator");
        }
        return a;
    }

    /** A client's allocator, made once the directory shows a memory node with a heap; it formats nothing. */
    private synchronized GlobalAllocator clientAllocator() {
        GlobalAllocator a = allocator;
        if (a != null) {
            return a;
        }
        java.util.TreeSet<Integer> heaps = new java.util.TreeSet<>();
        java.util.TreeSet<Integer> heapNodes = new java.util.TreeSet<>();
        for (NodeEntry e : directory.entries().values()) {
            if (!e.heapSegments().isEmpty()) {
                if (!heaps.isEmpty() && !heaps.equals(new java.util.TreeSet<>(e.heapSegments()))) {
                    LOG.warn("client {}: memory nodes name different heap segments ({} and node {}: {}); membus.heap"
                            + ".segments must be the same on every memory node", config.nodeId(), heaps, e.nodeId(),
                            e.heapSegments());
                }
                heaps.addAll(e.heapSegments());
                heapNodes.add(e.nodeId());
            }
        }
        if (heaps.isEmpty()) {
            throw new io.membus.alloc.PlacementException("round-robin", config.nodeId(), "node " + config.nodeId()
                    + " is a client (it exports no memory) and no live member exports an allocator heap yet (members: "
                    + directory.entries().keySet() + "); start a memory node with membus.heap.segments, or wait for"
                    + " one (awaitMembers) and try again");
        }
        if (closing || downReason != null) { // shutdown reads the allocator under this lock after setting closing
            throw new io.membus.core.error.NodeUnavailableException(config.nodeId(), closing ? "this node is closed"
                    : "this node is down: " + downReason);
        }
        a = new GlobalAllocator(memory, AllocatorConfig.builder()
                .heapSegments(heaps.stream().mapToInt(Integer::intValue).toArray())
                .defaultPlacement(io.membus.alloc.Placement.roundRobin()).build());
        LOG.info("client {}: allocator places blocks on the memory nodes {} (heap segments {})", config.nodeId(),
                heapNodes, heaps);
        allocator = a;
        return a;
    }

    /**
     * Adds (or replaces) a section of this node's status reply: {@code facts} is asked
     * for its key/value pairs each time a status is taken ({@code membus status} prints
     * them), on a Pekko blocking dispatcher; it must not block for long. What the layers
     * above report about themselves (the coherent heap: caching, measured skew).
     */
    public void statusSection(String name, java.util.function.Supplier<Map<String, String>> facts) {
        checkOpen();
        statusSections.put(java.util.Objects.requireNonNull(name, "name"), java.util.Objects.requireNonNull(facts,
                "facts"));
    }

    /**
     * Counts the transport's verbs per peer ({@link io.membus.core.metrics.VerbMetrics}): a
     * {@code verbs} section of {@code membus status}, meters in {@link #meterRegistry()},
     * and JMX MBeans under {@code membus.node<id>} unless {@code membus.metrics.jmx = false};
     * the Prometheus endpoint when {@code membus.metrics.prometheus.enabled}; the meters of
     * the segments and of membership ({@link NodeMeters}).
     */
    private void installMetrics(Transport transport) {
        if (config.metricsJmx()) {
            meters.add(new io.micrometer.jmx.JmxMeterRegistry(new io.micrometer.jmx.JmxConfig() {
                @Override
                public String get(String key) {
                    return null;
                }

                @Override
                public String domain() {
                    return "membus.node" + config.nodeId();
                }
            }, io.micrometer.core.instrument.Clock.SYSTEM));
        }
        if (config.prometheusEnabled()) {
            PrometheusEndpoint p = new PrometheusEndpoint(config.prometheusHost(), config.prometheusPort(),
                    config.nodeId());
            prometheus = p;
            meters.add(p.registry());
            LOG.info("node {}: Prometheus metrics at http://{}:{}/metrics", config.nodeId(), config.prometheusHost(),
                    p.address().getPort());
        }
        NodeMeters.bindSegments(meters, transport, config.segmentCount());
        NodeMeters.bindChannels(meters, transport);
        membership.bind(meters);
        if (!(transport instanceof io.membus.core.transport.AbstractTransport t)) {
            return;
        }
        io.membus.core.metrics.VerbMetrics m = new io.membus.core.metrics.VerbMetrics(transport.name());
        m.inFlight(t::inFlight);
        m.bindTo(meters);
        t.observe(m);
        verbMetrics = m;
        statusSection("verbs", m::facts);
    }

    /**
     * The node's meter registry: a composite that holds the JMX registry (unless
     * {@code membus.metrics.jmx = false}); add a registry of your own to it to export
     * the node's metrics elsewhere. Closed with the node.
     */
    public io.micrometer.core.instrument.composite.CompositeMeterRegistry meterRegistry() {
        return meters;
    }

    /**
     * Meters the message channels registered now ({@code membus.channel.*}, docs/metrics.md):
     * a layer that registers a channel (the coherent heap's invalidations) calls this after.
     * Idempotent; does nothing before the transport started.
     */
    public void meterMessageChannels() {
        Transport t = transportRef.get();
        if (t != null && !transportClosed.get()) {
            NodeMeters.bindChannels(meters, t);
        }
    }

    /**
     * Where the Prometheus scrape endpoint listens ({@code GET /metrics}), or {@code null}
     * when {@code membus.metrics.prometheus.enabled} is false (or before the transport started).
     */
    public java.net.InetSocketAddress prometheusAddress() {
        PrometheusEndpoint p = prometheus;
        return p == null ? null : p.address();
    }

    /** The transport's verb metrics, or {@code null} before the transport started. */
    public io.membus.core.metrics.VerbMetrics verbMetrics() {
        return verbMetrics;
    }

    /** The sections registered with {@link #statusSection}, asked now; one that fails says so. */
    private java.util.List<StatusSection> statusSections() {
        java.util.List<StatusSection> out = new java.util.ArrayList<>();
        statusSections.forEach((name, facts) -> {
            try {
                out.add(new StatusSection(name, facts.get()));
            } catch (RuntimeException e) {
                out.add(new StatusSection(name, Map.of("error", String.valueOf(e))));
            }
        });
        return out;
    }

    /**
     * SEAM for the replication engine (issue 27; the lead wires it when {@code Replicator}
     * is merged): the engine's own rows of the groups this node holds,
     * {@code Replicator.status()} mapped to {@link ClusterMessage.GroupRow} (how far a joining
     * copy is, the note of the last promotion). Until it is set, the status rows come from
     * the directory's views only. Read on Pekko's blocking dispatcher; must not block long.
     */
    private volatile java.util.function.Supplier<List<ClusterMessage.GroupRow>> heldGroupStatus = List::of;

    /** Connects the replication engine's rows of the groups this node holds ({@link #heldGroupStatus}). */
    void heldGroupStatus(java.util.function.Supplier<List<ClusterMessage.GroupRow>> rows) {
        heldGroupStatus = java.util.Objects.requireNonNull(rows, "rows");
    }

    /**
     * The replica groups as this node sees them, one row per group ordered by group id:
     * the directory's views, each replaced by the engine's row when this node holds the
     * group ({@link #heldGroupStatus}). Empty with replication off.
     */
    List<ClusterMessage.GroupRow> groupRows() {
        List<ClusterMessage.GroupRow> rows = mergeGroupRows(directory.groups(), heldGroupStatus.get(),
                config.replication().backups());
        Transport t = transportRef.get();
        return t != null && t.capabilities().replication() == ReplicationSupport.ADOPTION ? adoptionRows(rows) : rows;
    }

    /**
     * The rows on a transport that adopts (shm): a served group wants no copies (one host) and
     * says so, {@link io.membus.core.replication.AdoptionReplicator#NOTE}; other states as they are.
     */
    static List<ClusterMessage.GroupRow> adoptionRows(List<ClusterMessage.GroupRow> rows) {
        List<ClusterMessage.GroupRow> out = new ArrayList<>(rows.size());
        for (ClusterMessage.GroupRow r : rows) {
            out.add(r.state() != io.membus.core.directory.ReplicaGroupView.State.SERVING ? r
                    : new ClusterMessage.GroupRow(r.group(), r.state(), r.primary(), r.epoch(), r.inSync(),
                    r.joining(), 0, io.membus.core.replication.AdoptionReplicator.NOTE));
        }
        return out;
    }

    /** The rows of {@code views}, each replaced by the row of {@code held} of the same group, ordered by group id. */
    static List<ClusterMessage.GroupRow> mergeGroupRows(java.util.Collection<io.membus.core.directory.ReplicaGroupView> views,
                                                        List<ClusterMessage.GroupRow> held, int backups) {
        java.util.TreeMap<Integer, ClusterMessage.GroupRow> rows = new java.util.TreeMap<>();
        for (io.membus.core.directory.ReplicaGroupView v : views) {
            rows.put(v.group(), ClusterMessage.GroupRow.of(v, backups));
        }
        for (ClusterMessage.GroupRow r : held) {
            rows.put(r.group(), r);
        }
        return List.copyOf(rows.values());
    }

    /** The cluster's heap usage (for {@code membus status}), or {@code null} without an allocator. */
    private HeapUsage heapUsage() {
        GlobalAllocator a = allocator;
        return a == null ? null : a.usage();
    }

    public Transport transport() {
        return transportRef.get();
    }

    /** The replicated segment directory (live members only). */
    public SegmentDirectory directory() {
        return directory;
    }

    /**
     * Publishes this node's replica-group claims in its directory entry, written to a
     * majority ({@link ClusterClaims}): what the replication engine is given. Its futures
     * fail with {@link DsmTimeoutException} or {@link NodeUnavailableException} when no
     * majority acknowledged before {@code membus.operation-timeout}, and with
     * {@link DsmClosedException} once the node is closed.
     */
    public io.membus.core.replication.ClaimPublisher claimPublisher() {
        return claims;
    }

    /** The replicated name registry. */
    public NameRegistry names() {
        return names;
    }

    /** Facts nodes publish for each other to check (e.g. codec registrations); see {@link ClusterFacts}. */
    public ClusterFacts facts() {
        return facts;
    }

    /** This node's segment {@code index}. */
    public Segment localSegment(int index) {
        checkOpen();
        Transport t = transportRef.get();
        Segment s = t == null ? null : t.table().get(index);
        if (s == null) {
            throw new UnknownSegmentException(io.membus.core.RemotePtr.pack(config.nodeId(), index, 0), 0);
        }
        return s;
    }

    /** The node's actor system (tests look at membership through it). */
    ActorSystem actorSystem() {
        return system;
    }

    /** The Pekko address of this node's member, {@code pekko://name@host:port}. */
    public String memberAddress() {
        return cluster.selfAddress().toString();
    }

    /** Why this node was downed (it no longer serves), or {@code null} while it runs. */
    public String downReason() {
        return downReason;
    }

    public boolean isDown() {
        return downReason != null;
    }

    /** The node's state now, as data (the {@code membus} command line prints it as one line). */
    public NodeStatus status() {
        Map<Integer, NodeEntry> live = directory.entries();
        long bytes = 0;
        int segments = 0;
        for (NodeEntry e : live.values()) {
            bytes += e.exportedBytes();
            segments += e.segments().size();
        }
        int unreachable = closing || downReason != null ? 0 : cluster.state().getUnreachable().size();
        Transport t = transportRef.get();
        int groups = 0;
        int groupsShort = 0;
        for (io.membus.core.directory.ReplicaGroupView v : directory.groups()) {
            groups++;
            groupsShort += ClusterMessage.GroupRow.of(v, config.replication().backups()).needsAttention() ? 1 : 0;
        }
        return new NodeStatus(config.nodeId(), downReason, new java.util.TreeSet<>(live.keySet()), unreachable,
                segments, bytes, nameSnapshot.get().size(), t == null ? null : t.name(), incarnation,
                java.time.Duration.ofNanos(System.nanoTime() - startedNanos), groups, groupsShort);
    }

    /**
     * Leaves the cluster (bounded: the allocator's verbs by their deadlines, the hand-over of
     * its replica groups by {@code membus.replication.leave-timeout}, the leave by 15 s), then
     * closes the transport and its segments. Idempotent: a second call, from
     * any thread, returns once the first one has finished (waiting at most as long).
     */
    @Override
    public void close() {
        if (!closeStarted.compareAndSet(false, true)) {
            try {
                if (!closed.await(CLOSE_WAIT.toMillis() + config.operationTimeout().toMillis() * 2
                                + config.replicationLeaveTimeout().toMillis(),
                        TimeUnit.MILLISECONDS)) {
                    LOG.warn("node {}: another close() is still running", config.nodeId());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return;
        }
        closing = true;
        directory.leaving(); // a group lost from here on goes with this clean stop: said at INFO, not WARN
        names.close(closedException());
        try {
            shutdown(CLOSE_WAIT);
        } finally {
            closed.countDown();
        }
    }

    private static final Duration CLOSE_WAIT = Duration.ofSeconds(15);

    /** What a use of this node after {@link #close()} fails with. */
    private DsmClosedException closedException() {
        return new DsmClosedException("node " + config.nodeId() + " (its DsmNode, and the Membus instance, transport,"
                + " allocator and collections built on it)");
    }

    /** Fails at once with {@link DsmClosedException} once {@link #close()} was called. */
    private void checkOpen() {
        if (closeStarted.get()) {
            throw closedException();
        }
    }

    private void shutdown(Duration wait) {
        GlobalAllocator a;
        synchronized (this) { // a client's allocator is made under this lock, never once closing is set
            a = allocator;
        }
        if (a != null && downReason == null) {
            try {
                a.close(); // returns cached blocks to remote free lists: while the peers are still members
            } catch (RuntimeException e) {
                LOG.warn("node {}: closing the allocator: {}", config.nodeId(), e.toString());
            }
        }
        // after the allocator's last verbs, which change this node's groups: they must still be served here
        io.membus.core.replication.Replicator r = replicator;
        if (r != null && downReason == null) {
            try {
                // a graceful leave hands the groups over to their copies and the copies back, while this node is a
                // member and can publish its claims (docs/replication.md §17.9): nothing is LOST, no warning
                r.leave(config.replicationLeaveTimeout());
            } catch (RuntimeException e) {
                LOG.warn("node {}: handing over its replica groups: {}", config.nodeId(), e.toString());
            }
        }
        claims.close(closedException()); // also a failed start's: claims published before it never wait forever
        if (r != null) {
            r.close(); // no new streams or promotions; what was not handed over is promoted once this node left
        }
        io.membus.core.replication.AdoptionReplicator ad = adoption;
        if (ad != null) {
            ad.close(); // no new adoptions, no retries of blocked ones; what was adopted closes with the transport
        }
        boolean clean = downReason == null;
        if (clean) {
            ShutdownLogFilter.leaving(system, true); // the members' closing of connections is no fault
        }
        try {
            CoordinatedShutdown.get(system).run(CoordinatedShutdown.clusterLeavingReason());
            system.getWhenTerminated().toCompletableFuture().get(wait.toMillis(), TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            LOG.warn("node {}: the actor system did not stop within {} ms: {}", config.nodeId(), wait.toMillis(),
                    e.toString());
            system.terminate();
        } finally {
            ShutdownLogFilter.leaving(system, false);
            closeTransport();
        }
    }

    /**
     * Closes the transport once: the thread of a downed node and {@link #close()} may both
     * get here, and a transport's close is not meant to run twice at the same time; the
     * second caller waits until the first has finished.
     */
    private synchronized void closeTransport() {
        Transport t = transportRef.get();
        if (t != null && transportClosed.compareAndSet(false, true)) {
            try {
                t.close();
            } catch (RuntimeException e) {
                LOG.warn("node {}: closing the transport: {}", config.nodeId(), e.toString());
            }
            PrometheusEndpoint p = prometheus;
            if (p != null) {
                p.close(); // the port is free once close() returns
            }
            for (io.micrometer.core.instrument.MeterRegistry r : new ArrayList<>(meters.getRegistries())) {
                meters.remove(r);
                r.close(); // unregisters the MBeans
            }
            meters.close();
        }
    }

    @Override
    public String toString() {
        return "DsmNode{node=" + config.nodeId() + ", incarnation=" + incarnation + ", member=" + memberAddress() + "}";
    }
}
