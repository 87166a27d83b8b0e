package io.membus.core.transport;

import io.membus.core.Segment;
import io.membus.core.capability.TransportCapabilities;
import io.membus.core.directory.PeerInfo;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.fault.FaultInjector;

import java.util.Collection;
import java.util.concurrent.CompletableFuture;

/**
 * One node's end of a transport: it exports the node's segments so peers can run
 * verbs on them, and opens {@link Connection}s to peers. Created by a
 * {@link TransportProvider}, found by name with {@link Transports}.
 *
 * <p>Lifecycle: created, then {@link #export} segments (peers may reach a segment
 * once {@code export} returns), {@link #connect} to peers, and {@link #close()}
 * exactly once by its owner (the node), which closes every connection (failing
 * verbs in flight), stops serving peers and closes every exported segment.
 *
 * <p><b>Note:</b> thread-safe.
 */
public interface Transport extends AutoCloseable {

    /**
     * The transport's name: {@code local}, {@code shm}, {@code tcp} or {@code rdma}. For
     * selecting a transport, logs, the directory and metric tags only: what a layer
     * decides on is in {@link #capabilities()}.
     */
    String name();

    /**
     * What this transport promises beyond the {@link Verbs} contract (whole words, plain
     * writes against atomics, fencing, where segment files must be). Fixed for the
     * transport's life; the contract suite checks each promise against the behaviour.
     */
    TransportCapabilities capabilities();

    /**
     * Whether this transport was closed on this node; its verbs and connections then
     * fail with {@link io.membus.core.error.DsmClosedException}.
     */
    default boolean isClosed() {
        return false;
    }

    int nodeId();

    long incarnation();

    /** Where peers reach this node (goes into the directory as {@link PeerInfo#address()}). */
    String localAddress();

    /** This node as peers see it. */
    default PeerInfo self() {
        return new PeerInfo(nodeId(), incarnation(), localAddress());
    }

    /**
     * Creates and exports a segment. The transport chooses its memory (native, a
     * shared file, NIC-registered) and draws its remote key.
     *
     * @throws IllegalStateException when a segment with that index is exported already
     */
    Segment export(SegmentSpec spec);

    /**
     * Stops exporting a segment and closes it; verbs on it fail with
     * {@link io.membus.core.error.UnknownSegmentException} from then on.
     *
     * @param keepFile keep a file-backed segment's file (its data survives)
     * @return whether a segment with that index was exported
     */
    boolean unexport(int index, boolean keepFile);

    /** The segments this node exports now. */
    Collection<Segment> segments();

    /**
     * Opens a connection to a peer, or returns the open one. Completes within the
     * connect timeout; fails with {@link NodeUnavailableException} when the peer
     * cannot be reached and with {@link StaleIncarnationException} when the peer
     * runs another incarnation than {@code peer.incarnation()}.
     */
    CompletableFuture<Connection> connect(PeerInfo peer);

    /**
     * Fences a node that was downed: closes the connections to it (failing their
     * verbs in flight with {@link NodeUnavailableException}), refuses its verbs from
     * now on, and refuses new connections to or from it. Idempotent.
     */
    void fence(int nodeId, String reason);

    /**
     * Lifts the fence of a node id, when the cluster admits that id again as a new
     * incarnation (a restarted node). Connections to the fenced incarnation stay
     * closed; a new {@link #connect} names the new incarnation. Idempotent.
     */
    void unfence(int nodeId);

    /** Whether {@code nodeId} has been fenced. */
    boolean isFenced(int nodeId);

    /**
     * This node's exported segments with the verb checks: what peers' verbs run
     * against, and what this node may use for its own words (see
     * {@link #localAtomicsCoherent()}).
     */
    SegmentTable table();

    /**
     * Whether this node's CPU atomics on its own segments are atomic with respect to
     * peers' verbs on them. True for every software transport; false for {@code rdma}
     * unless the NIC reports {@code IBV_ATOMIC_GLOB}, in which case a node reaches its
     * own words through a loopback connection.
     */
    default boolean localAtomicsCoherent() {
        return true;
    }

    /**
     * The node's message side: handlers per channel, their executor, the inboxes of
     * senders, limits and counters (see {@link io.membus.core.message.Messaging}).
     * Closed with the transport.
     */
    io.membus.core.transport.message.MessageEndpoint messages();

    /** Fault injection for tests; inert (and free) until a rule is set. */
    FaultInjector faults();

    @Override
    void close();
}
