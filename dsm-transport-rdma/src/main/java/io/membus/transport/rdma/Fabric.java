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

    /** The RDMA CM port peers connect queue pairs to. */
    int cmPort();

    /** Registers {@code length} bytes at {@code address} with {@code ibv_access_flags}. */
    Region register(long address, long length, int access) throws IOException;

    /** Deregisters; the region's rkey is refused by the NIC from then on. */
    void deregister(Region region);

    /** Lets the holder of {@code token} (a peer authenticated as {@code nodeId}) connect one queue pair. */
    void expect(byte[] token, int nodeId);

    /** Destroys the target-side queue pairs of {@code nodeId} (fencing): its verbs fail from then on. */
    void dropPassive(int nodeId);

    /**
     * Forgets {@code token} and destroys the target-side queue pair connected with
     * it, if any: its control channel closed.
     */
    void release(byte[] token);

    /**
     * Connects one RC queue pair to a peer's CM port presenting {@code token}; every
     * step waits at most until {@code deadlineNanos} ({@link System#nanoTime()}).
     */
    QueuePair connect(InetSocketAddress target, byte[] token, long deadlineNanos) throws IOException;

    @Override
    void close();

    /** An initiator queue pair: a {@link SendQueue} whose completions the transport's completion thread polls. */
    interface QueuePair extends SendQueue {
        /** Sets the engine completions are reported to; before the first post. */
        void attach(VerbEngine engine);

        /** Polls the completion queue once, reporting to the engine; returns completions found. */
        int poll() throws IOException;
    }
}
