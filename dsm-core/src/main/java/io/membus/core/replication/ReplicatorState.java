package io.membus.core.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.fault.FaultInjector;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.Transport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What the jobs of one node's forwarding engine share ({@link Replicator} is the facade;
 * {@link CopySide}, {@link Promotion}, {@link CopyPlacement} and {@link GracefulLeave} the
 * jobs): the groups served here, the copies held, this node's claims, the streams to copy
 * nodes (and their {@link CopyStream.Carrier}, which takes the copies' acknowledgements),
 * the members seen, the departing nodes; and the operations more than one job uses (a
 * copy's drop, a stream, a claim, reachability). Its closed state and service thread are
 * the {@link ReplicationService}'s.
 *
 * <p><b>Note:</b> thread-safe. The maps and sets are concurrent; {@code started} and
 * {@code leaving} are volatile (written once each, before what depends on them is
 * published); a copy's drop is decided under the copy's monitor, so it runs once.
 */
final class ReplicatorState {
    /** The engine's lines keep one logger name, {@code Replicator}, whichever of its jobs says them. */
    private static final Logger LOG = LoggerFactory.getLogger(Replicator.class);
    final Transport transport;
    final RemoteMemory memory;
    final SegmentDirectory directory;
    final ReplicationConfig config;
    final int self;
    final Duration timeout;
    final int partBytes;
    /** The service thread, the claims' publication, the engine's closed state ({@link ReplicationService#closed()}). */
    final ReplicationService service;
    final Map<Integer, CopyStream> streams = new ConcurrentHashMap<>();
    final Map<Integer, ReplicaGroup> primaries = new ConcurrentHashMap<>();
    /** Copies this node holds (the memory it allocated for them: closed on drop and at close). */
    final Map<Integer, CopyReplica> copies = new ConcurrentHashMap<>();
    /** This node's claims: the service's ({@link ReplicationService#claims()}). */
    final Map<Integer, GroupClaim> claims;
    /**
     * Node ids this service has seen as live members of the directory. A promotion starts
     * only from a removal, i.e. only when the copy's primary was seen live and is gone: a
     * starting node places copies before its own directory entry is published, and its copy
     * holder, not seeing it yet, must not take its absence for a departure.
     */
    final Set<Integer> seenMembers = ConcurrentHashMap.newKeySet();
    /**
     * Memory nodes that said they leave gracefully (LEAVING): they hold no copy of this node's
     * groups from then on and none is placed on them; their removal from membership is no loss.
     */
    final Set<Integer> departing = ConcurrentHashMap.newKeySet();
    /** Groups served here that lost a copy to a crash (not a graceful leave): their shortage is a WARN. */
    final Set<Integer> lostCopy = ConcurrentHashMap.newKeySet();
    private volatile boolean started;
    /** Set by {@link GracefulLeave#leave}: this node promotes nothing from then on. */
    private volatile boolean leaving;

    ReplicatorState(Transport transport, RemoteMemory memory, SegmentDirectory directory, ClaimPublisher publisher,
                    ReplicationConfig config) {
        this.transport = transport;
        this.memory = memory;
        this.directory = directory;
        this.config = config;
        this.self = transport.nodeId();
        this.timeout = memory.operationTimeout();
        this.partBytes = ReplicationCodec.maxPart(transport.messages().maxMessageSize());
        this.service = new ReplicationService(self, publisher, timeout);
        this.claims = service.claims();
    }

    boolean started() {
        return started;
    }

    /** The channel handler and the directory listener are registered. */
    void markStarted() {
        started = true;
    }

    boolean leaving() {
        return leaving;
    }

    /** The first step of a graceful leave: from here this node promotes nothing. */
    void startLeaving() {
        leaving = true;
    }

    GroupClaim primaryClaim(ReplicaGroup g) {
        Segment m = g.memory();
        return new GroupClaim(g.group(), g.epoch(), GroupClaim.Role.PRIMARY, m.size(), m.flags(), m.remoteKey(),
                g.inSync(), System.currentTimeMillis());
    }

    GroupClaim copyClaim(CopyReplica c) {
        Segment m = c.memory();
        return new GroupClaim(c.group(), c.epoch(), c.inSync() ? GroupClaim.Role.COPY : GroupClaim.Role.JOINING,
                m.size(), m.flags(), m.remoteKey(), new int[0], System.currentTimeMillis());
    }

    void inSyncChanged(ReplicaGroup g) {
        if (primaries.get(g.group()) == g && g.serving()) {
            claims.put(g.group(), primaryClaim(g));
            LOG.info("replication: segment {} in-sync copies now {}", GroupId.toString(g.group()),
                    Arrays.toString(g.inSync()));
            schedulePublish();
        }
    }

    void schedulePublish() {
        service.schedulePublish();
    }

    void publishNow() {
        service.publishNow();
    }

    // ---------------------------------------------------------------- streams (primary side)

    CopyStream stream(int node) {
        return streams.computeIfAbsent(node, n -> new CopyStream(n, carrier, config, timeout));
    }

    boolean reachable(int node) {
        return !service.closed() && directory.member(node).isPresent() && !transport.isFenced(node);
    }

    private final CopyStream.Carrier carrier = new CopyStream.Carrier() {
        @Override
        public CompletableFuture<byte[]> send(int node, byte[] payload) {
            return memory.onNode(node, c -> c.request(Replicator.CHANNEL, payload));
        }

        @Override
        public byte[] sendNow(int node, byte[] payload) {
            if (service.closed() || transport.isClosed()) {
                return null;
            }
            io.membus.core.directory.PeerInfo peer = directory.member(node).orElse(null);
            if (peer == null) {
                return null;
            }
            CompletableFuture<io.membus.core.transport.Connection> c = transport.connect(peer);
            if (!c.isDone() || c.isCompletedExceptionally()) {
                return null; // not open yet: the posted path waits for it
            }
            return c.join().requestDirect(Replicator.CHANNEL, payload);
        }

        @Override
        public void acknowledged(int copyNode, int group, byte status, long epoch, long applied, boolean inSync) {
            ReplicaGroup g = primaries.get(group);
            if (g == null) {
                return;
            }
            if (departing.contains(copyNode) && status != ReplicationCodec.OK) {
                // a node leaving gracefully dropped its copies after it told this one (LEAVING): records that were
                // still in flight to it are refused, which is no fault
                LOG.debug("replication: node {} (leaving) refused a record of segment {}", copyNode,
                        GroupId.toString(group));
                return;
            }
            switch (status) {
                case ReplicationCodec.OK -> g.acknowledged(copyNode, applied, inSync);
                case ReplicationCodec.STALE -> {
                    if (g.serving() && epoch > g.epoch()) {
                        LOG.error("replication: node {} no longer serves segment {}: copy node {} is at epoch {} (was {})",
                                self, GroupId.toString(group), copyNode, Ballot.toString(epoch),
                                Ballot.toString(g.epoch()));
                        g.stop(epoch, "copy node " + copyNode + " is at epoch " + Ballot.toString(epoch) + " (was "
                                + Ballot.toString(g.epoch()) + "): a promotion replaced this primary");
                        claims.remove(group, claims.get(group));
                        schedulePublish();
                    }
                }
                default -> LOG.error("replication: copy node {} refused a record of segment {} ({}); epoch {}, applied {}",
                        copyNode, GroupId.toString(group), status == ReplicationCodec.GAP ? "gap" : "not held",
                        Ballot.toString(epoch), applied);
            }
        }

        @Override
        public boolean reachable(int node) {
            return ReplicatorState.this.reachable(node);
        }

        @Override
        public int maxMessageSize() {
            return transport.messages().maxMessageSize();
        }

        @Override
        public FaultInjector faults() {
            return transport.faults();
        }
    };

    /** Frees a copy's memory and forgets it (its claim too). */
    void dropCopy(CopyReplica c) {
        synchronized (c) {
            if (c.dropped()) {
                return;
            }
            c.markDropped();
        }
        copies.remove(c.group(), c);
        Hosted h = transport.table().hosted(c.group());
        if (h != null && h.copy() == c) {
            transport.table().unhost(c.group());
        }
        GroupClaim claim = claims.get(c.group());
        if (claim != null && claim.role() != GroupClaim.Role.PRIMARY) {
            claims.remove(c.group(), claim);
            schedulePublish();
        }
        c.memory().close(false);
    }

    static boolean contains(int[] nodes, int node) {
        for (int n : nodes) {
            if (n == node) {
                return true;
            }
        }
        return false;
    }
}
