package io.membus.transport.rdma;

import java.io.IOException;

/**
 * One end of a reliable-connection queue pair's two-sided path, as
 * {@link RdmaMessages} uses it: {@link #slots()} send buffers, each with its
 * encoded SEND work request ({@link SendWrFlyweight#send}), and as many receive
 * buffers, each with its encoded receive work request ({@link RecvWrFlyweight}),
 * all in memory registered under {@link #localKey()}. Both ends of a connection
 * have one (the initiator's queue pair and the target's accepted one).
 *
 * <p>A SEND lands in the oldest receive buffer the peer posted; one posted with none
 * waiting fails with {@code IBV_WC_RNR_RETRY_EXC_ERR} (credits exist to prevent that).
 * Completions come from {@link #poll}: one per SEND (its slot's wr id) and one per
 * filled receive buffer (its wr id and the received length).
 *
 * <p><b>Note:</b> {@link #postSend} and {@link #postRecv} are called by one thread at a
 * time (the caller's lock); {@link #poll} by the transport's completion thread.
 */
interface MessagePort {

    /** Send buffers, and receive buffers. */
    int slots();

    /** Bytes of each buffer. */
    int slotBytes();

    long sendBufferAddress(int slot);

    long recvBufferAddress(int slot);

    /** Where slot {@code slot}'s SEND work request is encoded ({@link SendWrFlyweight#ENCODED_SIZE} bytes). */
    long sendWrAddress(int slot);

    /** Where slot {@code slot}'s receive work request is encoded ({@link RecvWrFlyweight#ENCODED_SIZE} bytes). */
    long recvWrAddress(int slot);

    int localKey();

    /** Posts the SEND encoded in slot {@code slot} ({@code ibv_post_send}). */
    void postSend(int slot) throws IOException;

    /** Posts the receive work request encoded in slot {@code slot} ({@code ibv_post_recv}). */
    void postRecv(int slot) throws IOException;

    /**
     * Reports the completions found.
     *
     * @throws IOException once the queue pair is destroyed (its peer's side released or fenced it, or it closed)
     */
    int poll(Completions completions) throws IOException;

    /** Destroys this end; idempotent. */
    void close();

    /** Where {@link #poll} reports. */
    interface Completions {
        void sent(long wrId, int status);

        void received(long wrId, int status, int byteLength);
    }
}
