package io.membus.transport.rdma;

import java.io.IOException;

/**
 * The send side of one reliable-connection queue pair as {@link VerbEngine} posts
 * to it: a ring of {@link #depth()} slots, each with native memory for one encoded
 * work request ({@link SendWrFlyweight#ENCODED_SIZE} bytes) and a registered
 * staging buffer ({@link #stagingBytes()} bytes, local key {@link #localKey()})
 * that reads and atomics land in and writes are sent from.
 *
 * <p>Implementations: {@link DisniQueuePair} (the NIC, through DiSNI) and the
 * software NIC of the tests. Completions are reported by the implementation's
 * completion thread through {@link VerbEngine#complete}, in posting order, one per
 * work request (every work request is signalled).
 *
 * <p><b>Note:</b> {@link #post} is called by one thread at a time (the engine's
 * post lock); the addresses are fixed for the queue's life. The work request is
 * written with plain stores before {@link #post}; the post (a JNI call to
 * {@code ibv_post_send}, whose provider copies it into the send queue before the
 * doorbell) orders them, so a slot's memory may be rewritten as soon as
 * {@link #post} returns, and its staging buffer once its completion is reported.
 */
public interface SendQueue {

    /** Slots in the ring: a power of two, at most the queue pair's {@code max_send_wr}. */
    int depth();

    /** Native address of slot {@code slot}'s work request (8-byte aligned). */
    long workRequestAddress(int slot);

    /** Native address of slot {@code slot}'s staging buffer. */
    long stagingAddress(int slot);

    /** Bytes of each slot's staging buffer; a longer verb is posted as several work requests. */
    int stagingBytes();

    /** Local key of the staging buffers' memory region. */
    int localKey();

    /**
     * Posts the work request encoded in slot {@code slot} ({@code ibv_post_send}).
     *
     * @throws IOException when the queue pair refuses it (closed, in error state)
     */
    void post(int slot) throws IOException;

    /** Destroys the queue pair; work requests still posted complete with {@code IBV_WC_WR_FLUSH_ERR} or never. */
    void close();
}
