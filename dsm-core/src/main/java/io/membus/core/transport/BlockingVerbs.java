package io.membus.core.transport;

/**
 * Verbs that run to completion on the calling thread and return their result
 * directly: no future, no boxing, no result array. What
 * {@link io.membus.core.RemoteMemory}'s blocking calls use when a path offers
 * them: a {@link SegmentTable} (memory semantics: this node's own segments, or a
 * peer's through a {@link DirectConnection}) or a connection's blocking lane
 * ({@link Connection#blockingNow()}, e.g. tcp's per-call sockets).
 *
 * <p>Semantics are those of {@link Verbs} (the same checks, the same typed
 * errors, the same deadline): only the way the caller waits differs. A verb that
 * fails after it was sent may have run ({@link io.membus.core.error.DsmException#mayHaveRun()}).
 *
 * <p><b>Note:</b> thread-safe: any thread may call; a call that crosses a network
 * blocks its thread for at most the operation timeout, so it is refused on a
 * transport thread (see {@link Connection#blockingNow()}).
 */
public interface BlockingVerbs {

    /** Reads {@code length} bytes at {@code ptr} into {@code dst[dstOffset..]}. */
    void readInto(long ptr, long remoteKey, byte[] dst, int dstOffset, int length);

    /**
     * Reads {@code length} bytes at {@code ptr} into native memory at {@code address}
     * (a direct buffer's or a Chronicle store's; the caller owns {@code length} bytes there).
     */
    void readToAddress(long ptr, long remoteKey, long address, int length);

    /** Writes {@code length} bytes of native memory at {@code address} to {@code ptr}. */
    void writeFromAddress(long ptr, long remoteKey, long address, int length);

    /** Reads the little-endian word at {@code ptr}. */
    long readLong(long ptr, long remoteKey);

    /** Writes {@code src[offset..offset+length)} at {@code ptr}. */
    void write(long ptr, long remoteKey, byte[] src, int offset, int length);

    /** Writes the little-endian word at {@code ptr}. */
    void writeLong(long ptr, long remoteKey, long value);

    /** Atomically replaces the word at {@code ptr} with {@code update} when it holds {@code expected}; returns the old word. */
    long compareAndSwap(long ptr, long remoteKey, long expected, long update);

    /** Atomically adds {@code delta} to the word at {@code ptr}; returns the old word. */
    long fetchAndAdd(long ptr, long remoteKey, long delta);

    /**
     * Reads {@code lengthA} bytes at {@code ptrA} into {@code dstA[0..]}, then
     * {@code lengthB} bytes at {@code ptrB} into {@code dstB[0..]}, both on this path's
     * node: the second read runs after the first has read (it sees every write the first
     * saw, and maybe later ones), and a path with round trips runs the pair in one. A
     * failure of either is thrown (the first read's when both fail); both buffers are
     * then unspecified.
     *
     * <p>This default runs them one after the other, which is what a memory path does.
     */
    default void readInOrder(long ptrA, long keyA, byte[] dstA, int lengthA, long ptrB, long keyB, byte[] dstB,
                             int lengthB) {
        readInto(ptrA, keyA, dstA, 0, lengthA);
        readInto(ptrB, keyB, dstB, 0, lengthB);
    }

    /**
     * Reads {@code dsts[i].length} bytes at {@code ptrs[i]} (remote key {@code keys[i]}) into
     * {@code dsts[i]}, for every {@code i < count}, all on this path's node, as one burst: a
     * path with round trips sends the {@code count} requests together and its caller reads
     * the answers itself (tcp's lane: one write, one round trip per at most
     * {@code TcpLane.MAX_BURST} reads). The reads run in array order at the node: read
     * {@code i + 1} sees every write read {@code i} saw, and maybe later ones; each sees
     * every write that completed before this call. One deadline (the operation timeout, or
     * the thread's {@link io.membus.core.OperationDeadline} if earlier) covers the burst.
     * The failure of the lowest index is thrown; the reads after it may or may not have
     * run, and the destinations are then unspecified. A failure after the requests left
     * may have run ({@link io.membus.core.error.DsmException#mayHaveRun()}); reads change
     * nothing, so repeating the call is safe.
     *
     * <p>This default runs them one after the other, which is what a memory path does.
     */
    default void readEach(long[] ptrs, long[] keys, byte[][] dsts, int count) {
        for (int i = 0; i < count; i++) {
            readInto(ptrs[i], keys[i], dsts[i], 0, dsts[i].length);
        }
    }

    /**
     * Writes {@code src[offset..offset+length)} at {@code ptrW} and then, only if the write
     * succeeded, compare-and-swaps the word at {@code ptrC} (both on this path's node):
     * the swap is ordered after the write and never runs without it — what a writer
     * needs that fills data and then publishes it with a CAS. A path with round trips
     * runs the pair in one. Returns the word the CAS found; a failed write is thrown and
     * its CAS did not run.
     *
     * <p>This default runs them one after the other, which is what a memory path does.
     */
    default long writeThenCompareAndSwap(long ptrW, long keyW, byte[] src, int offset, int length, long ptrC,
                                         long keyC, long expected, long update) {
        write(ptrW, keyW, src, offset, length);
        return compareAndSwap(ptrC, keyC, expected, update);
    }

    /**
     * Writes {@code src[offset..offset+length)} at {@code ptrW}, then reads {@code lengthA}
     * bytes at {@code ptrA} into {@code dstA[0..]} and after it {@code lengthB} bytes at
     * {@code ptrB} into {@code dstB[0..]}, all three on this path's node and run in that
     * order (the reads as {@link #readInOrder}): a path with round trips runs the three in
     * one — what a writer needs that stores a block and looks up where to publish it. The
     * reads run whether or not the write did; the write's failure is thrown first (it may
     * have run: {@link io.membus.core.error.DsmException#mayHaveRun()}), then the first
     * read's, then the second's; the buffers are then unspecified.
     *
     * <p>This default runs them one after the other, which is what a memory path does.
     */
    default void writeThenReadInOrder(long ptrW, long keyW, byte[] src, int offset, int length, long ptrA, long keyA,
                                      byte[] dstA, int lengthA, long ptrB, long keyB, byte[] dstB, int lengthB) {
        write(ptrW, keyW, src, offset, length);
        readInOrder(ptrA, keyA, dstA, lengthA, ptrB, keyB, dstB, lengthB);
    }
}
