package io.membus.core.transport;

import io.membus.core.directory.PeerInfo;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.TransportUnavailableException;

import java.util.concurrent.CompletableFuture;

/**
 * A reliable connection from this node to one peer incarnation, on which verbs
 * are posted (see {@link Verbs} for the ordering, atomicity and deadline
 * contract). Verbs posted on a closed connection fail with
 * {@link NodeUnavailableException}.
 *
 * <p>Owned by the {@link Transport} that opened it: closing the transport closes
 * it. {@link #close()} fails the verbs still in flight.
 *
 * <p><b>Note:</b> thread-safe: any thread may post verbs.
 */
public interface Connection extends Verbs, AutoCloseable {

    /** The peer this connection reaches. */
    PeerInfo peer();

    /**
     * Sends a one-way message to the peer's handler of {@code channel} (see
     * {@link io.membus.core.message.Messaging} for the contract). The future
     * completes when the peer's handler has taken the message, or fails with a
     * typed {@link io.membus.core.error.DsmException}. The payload is copied.
     */
    default CompletableFuture<Void> send(short channel, byte[] payload) {
        return CompletableFuture.failedFuture(new TransportUnavailableException(getClass().getSimpleName(),
                "this connection carries no messages; use local, shm or tcp"));
    }

    /**
     * Sends a request to the peer's handler of {@code channel}; the future completes
     * with the handler's reply or fails with a typed
     * {@link io.membus.core.error.DsmException}. The payload is copied.
     */
    default CompletableFuture<byte[]> request(short channel, byte[] payload) {
        return CompletableFuture.failedFuture(new TransportUnavailableException(getClass().getSimpleName(),
                "this connection carries no messages; use local, shm or tcp"));
    }

    /**
     * Blocking verbs the calling thread may run on this connection right now, or
     * {@code null} when it must post them and wait (the default). A connection
     * offers them only when they keep the {@link Verbs} contract for this caller:
     * no verb the calling thread issued on this connection is unsettled (so none can
     * be overtaken), no fault rule applies, and the caller is not a transport thread.
     * Used by {@link io.membus.core.RemoteMemory}'s blocking calls.
     */
    default BlockingVerbs blockingNow() {
        return null;
    }

    /**
     * Sends a request to the peer's {@link io.membus.core.message.InlineMessageHandler} of
     * {@code channel} on a blocking socket and reads its reply on the calling thread, when
     * the connection can do so now (tcp: an idle blocking lane, no fault rule); else
     * {@code null} (the default): post it with {@link #request} instead. The receiver
     * handles it at once on the thread serving that socket, <em>outside</em> the order of
     * the sender's messages ({@link #request}'s FIFO): only for a handler that orders its
     * messages itself (the replication stream numbers its records). Bounded by the operation
     * timeout (or the caller's {@link io.membus.core.OperationDeadline}).
     *
     * <p>Used by a thread that waits for the reply anyway (a tcp lane thread whose verb's
     * answer waits for the replica group's copies): it saves the hand-offs to and from the
     * I/O threads, docs/replication.md §3.5.1.
     *
     * @throws io.membus.core.error.DsmException the typed failure of the exchange (the
     *         message may or may not have been handled)
     */
    default byte[] requestDirect(short channel, byte[] payload) {
        return null;
    }

    /** Verbs issued on this connection and not completed yet (waiting, on the wire or held); for metrics. */
    default int inFlight() {
        return 0;
    }

    /** A new batch of verbs on this connection. */
    Batch batch();

    boolean isOpen();

    @Override
    void close();

    /**
     * Closes the connection; verbs in flight and verbs posted later fail with
     * {@link NodeUnavailableException} carrying {@code reason} (why the peer is gone:
     * fenced, the transport closed, ...). Idempotent: the first reason stays.
     */
    void close(String reason);
}
