package io.membus.core.transport;

import io.membus.core.error.NodeUnavailableException;

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
