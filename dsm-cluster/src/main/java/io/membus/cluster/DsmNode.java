package io.membus.cluster;

import com.typesafe.config.Config;
import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.alloc.GlobalAllocator;
import io.membus.core.Backoff;
import io.membus.core.JvmFlags;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.NameRegistry;
import io.membus.core.fault.FaultInjector;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.AddressFromURIString;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.ddata.DistributedData;
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
 * <p>This class is the assembly and its order ({@link #start}, {@code join}); each job is a
 * class of its own: {@link StartChecks} (node id, backups, groups held elsewhere, the first
 * entry), {@link SegmentExports} (file placement, exports), {@link NodeReplication} (the
 * engine), {@link NodeAllocator}, {@link NameRegistryBootstrap}, {@link NodeMetrics},
 * {@link NodeReport} (status sections and group rows) and {@link NodeShutdown} (close,
 * graceful leave, downing).
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
    /** The status reply's sections and replica-group rows. */
    private final NodeReport report;
    /** The cluster-wide checks and writes of the start. */
    private final StartChecks checks;
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
    /** This node's allocator: a memory node's heaps, or a client's made on first use. */
    private final NodeAllocator allocators;
    /** The replication engine this node runs (forwarding, adoption, or none). */
    private final NodeReplication replication;
    /** How this node stops (close, failed start, downing) and its closed and down state. */
    private final NodeShutdown shutdown;
    private final long startedNanos = System.nanoTime();
    private final NodeMetrics metrics;

    private DsmNode(NodeConfig config) {
        this.config = config;
        this.report = new NodeReport(config, directory, transportRef::get);
        this.replication = new NodeReplication(config);
        this.metrics = new NodeMetrics(config);
        this.allocators = new NodeAllocator(config, directory, this, this::closing, this::downReason);
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
            this.shutdown = new NodeShutdown(config, this, system, directory, names, claims, replication, metrics,
                    transportRef, transportClosed, allocators::current);
            this.checks = new StartChecks(config, system, cluster, facts, claims, macs, this::pause);
            system.actorOf(ClusterAgent.props(config.nodeId(), directory, nameSnapshot, transportRef, this::selfDowned,
                    config.operationTimeout(), allocators::usage, report::sections, report::groupRows, macs),
                    ClusterAgent.NAME);
            system.actorOf(NodeMeters.Membership.props(metrics.membership()), "membus-membership-meters");
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

    private static boolean causedByTimeout(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof java.util.concurrent.TimeoutException) {
                return true;
            }
        }
        return false;
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
            if (causedByTimeout(e)) { // a slow bind (a loaded machine) is no bad address: say what it was
                throw new io.membus.core.error.DsmTimeoutException("bind the cluster membership (Pekko Artery) to "
                        + config.host() + ":" + config.port(), config.nodeId(), PekkoSettings.BIND_TIMEOUT,
                        "the machine is too busy to start the node's membership in time: start it again when the load"
                                + " is lower (" + e.getMessage() + ")");
            }
            throw new DsmConfigException("membus.port", config.host() + ":" + config.port(),
                    "an address this node can listen on (free port, local interface): the cluster membership could"
                            + " not start: " + e.getMessage(), e);
        }
        try {
            node.join();
            return node;
        } catch (RuntimeException | Error e) {
            node.shutdown.abortStart(e); // half started: the actor system, maybe the transport; released
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
            up.get(StartChecks.left(deadline), TimeUnit.NANOSECONDS);
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
        checks.claimNodeId(deadline);
        if (!config.isClient()) {
            checks.agreeOnBackups(deadline); // before the transport: a refused node never touches memory
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
        StartChecks.refuseUnreplicatable(config, transport);
        metrics.install(transport, report);
        // groups first (docs/replication.md §7): an index whose group lives on (served by a promoted copy) is not
        // exported again by a restarted node; the Replicator (wired here by the lead) learns its groups before exports
        // a majority read: asked again within the start's deadline when it times out (a restart on a loaded machine)
        java.util.Set<Integer> heldElsewhere = config.replication().enabled()
                ? checks.untilStarted(deadline, checks::groupsOfThisNodeElsewhere) : java.util.Set.of();
        List<SegmentDescriptor> exported = SegmentExports.export(config, transport, heldElsewhere);
        this.memory = new RemoteMemory(transport, directory, config.operationTimeout());
        this.messaging = new io.membus.core.message.Messaging(memory);
        // before the heaps are formatted and the entry published: every change is forwarded
        replication.start(transport, memory, directory, claims, report);
        List<Integer> heapsHere = config.heapSegments().stream().filter(i -> !heldElsewhere.contains(i)).toList();
        allocators.startMemoryNode(memory, heapsHere, metrics);
        NameRegistryBootstrap registry = new NameRegistryBootstrap(config, system, cluster, macs, names, memory,
                this::allocator, report, this::pause);
        SegmentDescriptor systemSegment = registry.found(transport, deadline); // the founder's table, before its entry
        if (systemSegment != null) {
            exported.add(systemSegment);
            replication.exported(transport.table().get(systemSegment.index()));
        }
        NodeEntry entry = new NodeEntry(config.nodeId(), incarnation, cluster.selfAddress().toString(),
                cluster.selfUniqueAddress().longUid(), transport.name(), transport.localAddress(), exported,
                allocators.current() == null ? List.of() : heapsHere);
        checks.publish(entry); // with the claims published so far (ClusterClaims), tagged
        while (!directory.entries().containsKey(config.nodeId())
                || directory.entries().get(config.nodeId()).incarnation() != incarnation) {
            if (StartChecks.left(deadline) <= 0) {
                throw new DsmTimeoutException("publish this node's directory entry (it did not appear)",
                        config.nodeId(), config.startTimeout(), "the membership is slow or partitioned: check the"
                        + " other members, or raise membus.start-timeout");
            }
            pause();
        }
        registry.register(); // after the entry: whoever reads the register can reach the table
        LOG.info("membus node {} started: incarnation={}, member={}, transport={} at {}, segments={} x {} B{}",
                config.nodeId(), incarnation, cluster.selfAddress(), transport.name(), transport.localAddress(),
                config.segmentCount(), config.segmentSize(), config.fileBacked() ? " (file-backed)" : "");
    }

    private void selfDowned(String reason) {
        shutdown.selfDowned(reason);
    }

    /** The start's and {@link #awaitMembers}' polls of the directory: every 50 ms. */
    private static final Backoff.Policy START_POLL = Backoff.Policy.every(50_000_000L);

    /** Waits a little between polls; fails at once when this node was downed meanwhile. */
    private void pause() {
        String down = shutdown.downReason();
        if (down != null) {
            throw NodeUnavailableException.notSent(config.nodeId(), "node " + config.nodeId() + " is down: " + down);
        }
        try {
            new Backoff(START_POLL, Backoff.NO_DEADLINE).pauseInterruptibly(); // the caller's loop keeps the deadline
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
            String down = shutdown.downReason();
            if (down != null) {
                throw NodeUnavailableException.notSent(config.nodeId(), "node " + config.nodeId() + " is down: "
                        + down);
            }
            if (StartChecks.left(deadline) <= 0) {
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
        return allocators.get(memory);
    }

    /**
     * Adds (or replaces) a section of this node's status reply: {@code facts} is asked
     * for its key/value pairs each time a status is taken ({@code membus status} prints
     * them), on a Pekko blocking dispatcher; it must not block for long. What the layers
     * above report about themselves (the coherent heap: caching, measured skew).
     */
    public void statusSection(String name, java.util.function.Supplier<Map<String, String>> facts) {
        checkOpen();
        report.section(name, facts);
    }

    /**
     * The node's meter registry: a composite that holds the JMX registry when
     * {@code membus.metrics.jmx = true} and the Prometheus endpoint's when it is enabled (both
     * off by default: then it holds no registry, and its meters cost nothing but their
     * registration); add a registry of your own to it to export or read the node's metrics.
     * Closed with the node.
     */
    public io.micrometer.core.instrument.composite.CompositeMeterRegistry meterRegistry() {
        return metrics.registry();
    }

    /**
     * Meters the message channels registered now ({@code membus.channel.*}, docs/metrics.md):
     * a layer that registers a channel (the coherent heap's invalidations) calls this after.
     * Idempotent; does nothing before the transport started.
     */
    public void meterMessageChannels() {
        Transport t = transportRef.get();
        if (t != null && !transportClosed.get()) {
            metrics.bindChannels(t);
        }
    }

    /**
     * Where the Prometheus scrape endpoint listens ({@code GET /metrics}), or {@code null}
     * when {@code membus.metrics.prometheus.enabled} is false (or before the transport started).
     */
    public java.net.InetSocketAddress prometheusAddress() {
        return metrics.prometheusAddress();
    }

    /** The transport's verb metrics, or {@code null} before the transport started. */
    public io.membus.core.metrics.VerbMetrics verbMetrics() {
        return metrics.verbMetrics();
    }

    /** Connects the replication engine's rows of the groups this node holds ({@link NodeReport#heldGroupStatus}). */
    void heldGroupStatus(java.util.function.Supplier<List<ClusterMessage.GroupRow>> rows) {
        report.heldGroupStatus(rows);
    }

    public Transport transport() {
        return transportRef.get();
    }

    /** The faults a test injects into this node's transport (delay, drop, partition per peer; replication streams). */
    public FaultInjector faults() {
        return transport().faults();
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
        return shutdown.downReason();
    }

    /** Whether a close of this node began. */
    private boolean closing() {
        return shutdown.closing();
    }

    public boolean isDown() {
        return shutdown.downReason() != null;
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
        String downReason = shutdown.downReason();
        int unreachable = shutdown.closing() || downReason != null ? 0 : cluster.state().getUnreachable().size();
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
        shutdown.close();
    }

    /** Fails at once with {@link DsmClosedException} once {@link #close()} was called. */
    private void checkOpen() {
        shutdown.checkOpen();
    }

    @Override
    public String toString() {
        return "DsmNode{node=" + config.nodeId() + ", incarnation=" + incarnation + ", member=" + memberAddress() + "}";
    }
}
