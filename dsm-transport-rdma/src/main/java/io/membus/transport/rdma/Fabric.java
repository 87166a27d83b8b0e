package io.membus.transport.rdma;

import java.io.IOException;
import java.net.InetSocketAddress;

/**
 * What {@link RdmaTransport} needs of an RDMA device: memory registration, the
 * RDMA CM listener that accepts queue pairs from authenticated peers, and
 * connection setup. {@link DisniFabric} is the device through DiSNI; the tests
 * plug in a software fabric (same work-request bytes, same posting interface) to
 * run the transport contract suite on a machine without a NIC.
 *
 * <p><b>Note:</b> implementations are thread-safe.
 */
interface Fabric extends AutoCloseable {

    /** A registered memory region. {@code handle} is the implementation's object (DiSNI's {@code IbvMr}). */
    record Region(int rkey, int lkey, Object handle) {
    }

    /**
     * Whether this fabric's reads and writes move every 8-byte aligned word whole
     * ({@link io.membus.core.capability.TransportCapabilities#wholeWords()}). A NIC's DMA does
     * in practice, but the InfiniBand specification does not promise it, so a device says no.
     */
    default boolean movesWordsWhole() {
        return false;
    }

    /** The RDMA CM port peers connect queue pairs to. */
    int cmPort();

    /** Registers {@code length} bytes at {@code address} with {@code ibv_access_flags}. */
    Region register(long address, long length, int access) throws IOException;

    /**
     * Deregisters; the region's rkey is refused by the NIC from then on.
     *
     * @return whether the region is gone: when {@code false} (logged) the NIC may still
     *         access the memory, so its owner must not free it
     */
    boolean deregister(Region region);

    /**
     * Accepts one connect request from {@code initiator} (the CM address the peer
     * announced on its authenticated control channel) for node {@code nodeId}; the
     * queue pair is remembered under {@code session} for {@link #release}.
     */
    void expect(InetSocketAddress initiator, int nodeId, byte[] session);

    /** Destroys the target-side queue pairs of {@code nodeId} (fencing): its verbs fail from then on. */
    void dropPassive(int nodeId);

    /**
     * Forgets the expectations of {@code session} and destroys the target-side queue
     * pair connected under it, if any: its control channel closed.
     */
    void release(byte[] session);

    /**
     * Connects one RC queue pair to a peer's CM port; every step waits at most until
     * {@code deadlineNanos} ({@link System#nanoTime()}). Once the route is resolved,
     * {@code announce} is called with this side's CM address, and must return only
     * when the target expects a connect request from it.
     */
    QueuePair connect(InetSocketAddress target, Announcer announce, long deadlineNanos) throws IOException;

    /** Tells the target, over the control channel, which CM address the connect request comes from. */
    @FunctionalInterface
    interface Announcer {
        void announce(InetSocketAddress localCmAddress) throws IOException;
    }

    @Override
    void close();

    /**
     * Hands every target-side queue pair to {@code listener} as it is accepted, before
     * the initiator's connect returns (so the target can post receive buffers before
     * the first SEND). Set once, before any connect.
     */
    void onAccepted(PassiveListener listener);

    /** Learns of accepted (target-side) queue pairs. */
    @FunctionalInterface
    interface PassiveListener {
        void accepted(int nodeId, byte[] session, MessageCapable pair);
    }

    /** A queue pair end that can carry SEND/RECV. */
    interface MessageCapable {
        /**
         * The two-sided end of this queue pair, with {@code slots} send and receive buffers of
         * {@code slotBytes} each, created at the first call.
         *
         * @throws io.membus.core.error.TransportUnavailableException when this fabric cannot carry SENDs
         */
        MessagePort messages(int slots, int slotBytes);
    }

    /** An initiator queue pair: a {@link SendQueue} whose completions the transport's completion thread polls. */
    interface QueuePair extends SendQueue, MessageCapable {
        /** Sets the engine completions are reported to; before the first post. */
        void attach(VerbEngine engine);

        /** Polls the completion queue once, reporting to the engine; returns completions found. */
        int poll() throws IOException;
    }
}
