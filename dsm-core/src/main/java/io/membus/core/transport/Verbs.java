package io.membus.core.transport;

import io.membus.core.time.Deadlines;

import java.util.concurrent.CompletableFuture;

/**
 * The four one-sided verbs on remote memory, modelled on an RDMA reliable
 * connection. The target's application threads never take part.
 *
 * <h2>Contract (every transport)</h2>
 * <ul>
 *   <li><b>Checks before effects.</b> A verb names a remote pointer and the remote
 *       key of the pointer's segment. A wrong key, an access the segment's flags do
 *       not allow, any byte outside the segment, an unaligned atomic, a null pointer
 *       or a pointer to another node than the connection's is refused with its typed
 *       {@link io.membus.core.error.VerbException} and touches nothing.</li>
 *   <li><b>Order.</b> Verbs one thread issues on one connection (or in one
 *       {@link Batch}) are executed and completed in issue order: when a verb's future
 *       completes, every verb that thread issued before it on the same connection has
 *       completed. Across threads the order is the caller's: a verb another thread
 *       issues after this thread's verb <em>completed</em> runs after it (Visibility,
 *       below); one issued after this thread merely <em>issued</em> its verb — even
 *       when the threads order their issues by a lock or a queue — may run and
 *       complete first on {@code tcp}, whose blocking lanes carry blocking verbs beside
 *       the pipelined channel and hold {@code readAsync} reads until their thread waits
 *       ({@code membus.transports.tcp.hold-reads}). A thread that hands work to another
 *       and needs its verbs done first waits for their futures before the hand-off.
 *       ({@code local} and {@code shm} run a verb on the calling thread, so there every
 *       issued verb has completed.)</li>
 *   <li><b>Visibility.</b> A write is visible to every read (on any connection, by
 *       any node) that is issued after the write's future completed.</li>
 *   <li><b>Atomicity.</b> {@link #compareAndSwap} and {@link #fetchAndAdd} act on one
 *       8-byte aligned little-endian word, atomically with respect to every other
 *       atomic on that word, across all connections. Against a plain {@link #write}
 *       of the same word: on {@code local}, {@code shm} and {@code tcp} the write lands
 *       whole before or after the atomic; on {@code rdma} the InfiniBand
 *       specification promises atomicity only among atomics, so layers above never
 *       race a plain write with an atomic on one word (they change such words by
 *       CAS).</li>
 *   <li><b>Whole words.</b> A {@link #read} or {@link #write} moves every 8-byte
 *       aligned word it covers whole with one 8-byte load or store at the target
 *       ({@code local}, {@code shm}, {@code tcp}, and the rdma software fabric of the
 *       tests; {@link io.membus.core.WordCopy}): a read never returns such a word made
 *       of parts of two writes, plain or atomic, and a write never leaves one half
 *       written. The promise is per word: a longer transfer is not one atomic unit (a
 *       read racing a longer write may see some of its words new and others old), and
 *       a word the transfer covers only in part (an unaligned start or end) has none.
 *       An RDMA NIC moves aligned words whole too, but the InfiniBand specification
 *       does not promise it.</li>
 *   <li><b>Deadlines.</b> Every verb has a deadline: the transport's operation
 *       timeout, counted from the moment the verb is issued (time spent waiting for
 *       room in an in-flight window counts); a verb not completed by then fails with
 *       {@link io.membus.core.error.DsmTimeoutException}. A lost connection fails
 *       every verb in flight on it with
 *       {@link io.membus.core.error.NodeUnavailableException}. A verb is never retried
 *       by the transport.</li>
 *   <li><b>Outcome.</b> Every failure says whether the verb may have run:
 *       {@link io.membus.core.error.DsmException#mayHaveRun()}. False for verbs refused
 *       before they were sent (no live member, cannot connect, fenced, connection
 *       already closed, still in a backlog or held by a fault rule) and for verbs the
 *       target refused by its checks; true (unknown) for verbs whose deadline fired
 *       or that were on the wire when the connection was lost. A caller may retry the
 *       first kind; the second must be read back first.</li>
 *   <li><b>Completion.</b> Futures complete on a transport thread or, for
 *       memory-semantics transports ({@code local}, {@code shm}), on the calling
 *       thread before the method returns; a read {@code tcp} holds on a blocking lane
 *       until its thread waits completes on the thread that reads its answer: the thread
 *       that waits for it, or a transport thread (see {@link WaitHelp}). Callbacks attached
 *       to them must not block (a blocking call in one fails with
 *       {@code BlockingCallOnTransportThreadException}).</li>
 * </ul>
 * Buffers passed to {@link #write} are copied before the method returns; the
 * caller may reuse them at once.
 *
 * <p><b>Note:</b> implementations are thread-safe; the order guarantee holds for
 * the verbs of one thread (across threads, for verbs whose futures completed: see
 * Order).
 */
public interface Verbs {

    /** Reads {@code length} bytes at {@code ptr}. */
    CompletableFuture<byte[]> read(long ptr, long remoteKey, int length);

    /**
     * Writes {@code src[offset..offset+length)} at {@code ptr}. A range outside
     * {@code src} fails the future with {@link IllegalArgumentException} (see
     * {@link #sourceRangeError}) and writes nothing.
     */
    CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length);

    /**
     * The failure of a write whose source range lies outside its array, or {@code null}
     * when the range is inside: the one check every transport's {@link #write} makes.
     */
    static IllegalArgumentException sourceRangeError(byte[] src, int offset, int length) {
        if (offset < 0 || length < 0 || offset > src.length - length) {
            return new IllegalArgumentException("source range out of bounds: offset=" + offset + ", length=" + length
                    + ", array=" + src.length);
        }
        return null;
    }

    /** Writes all of {@code src} at {@code ptr}. */
    default CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src) {
        return write(ptr, remoteKey, src, 0, src.length);
    }

    /**
     * Atomically replaces the word at {@code ptr} with {@code update} if it holds
     * {@code expected}.
     *
     * @return the value the word held before: equal to {@code expected} when the swap happened
     */
    CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update);

    /** Atomically adds {@code delta} to the word at {@code ptr}; returns the value before. */
    CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta);

    /**
     * {@link #compareAndSwap(long, long, long, long)} completing with a primitive: {@code done}
     * gets the word's previous value, or the failure, exactly once, in the connection's
     * completion order. The pipelined transports ({@code tcp}, {@code rdma}) and the direct
     * ones ({@code local}, {@code shm}) implement it with no future and no boxed
     * {@code Long}; this default goes through the future.
     */
    default void compareAndSwap(long ptr, long remoteKey, long expected, long update, LongCompletion done) {
        compareAndSwap(ptr, remoteKey, expected, update).whenComplete((v, e) -> Verbs.complete(done, v, e));
    }

    /** {@link #fetchAndAdd(long, long, long)} completing with a primitive, as {@link #compareAndSwap(long, long, long, long, LongCompletion)}. */
    default void fetchAndAdd(long ptr, long remoteKey, long delta, LongCompletion done) {
        fetchAndAdd(ptr, remoteKey, delta).whenComplete((v, e) -> Verbs.complete(done, v, e));
    }

    private static void complete(LongCompletion done, Long value, Throwable failure) {
        if (failure != null) {
            done.completed(0, failure instanceof java.util.concurrent.CompletionException && failure.getCause() != null
                    ? failure.getCause() : failure);
        } else {
            done.completed(value, null);
        }
    }
}
