package io.membus.transport.rdma;

import io.membus.core.Access;
import io.membus.core.OpenResources;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.Batch;
import io.membus.core.transport.DeferredBatch;
import io.membus.core.transport.Connection;
import io.membus.core.transport.LongCompletion;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.Verbs;

import java.util.concurrent.CompletableFuture;

/**
 * A reliable connection to one peer incarnation over {@code rdma}: verbs are
 * checked against the peer's {@link RemoteCatalog} (a refused verb posts nothing)
 * and posted by its {@link VerbEngine}. The control channel keeps the catalog
 * current; when it closes, the connection closes.
 *
 * <p><b>Note:</b> thread-safe: any thread may post verbs.
 */
final class RdmaConnection implements Connection {
    private final PeerInfo peer;
    private final RemoteCatalog catalog;
    private final VerbEngine engine;
    private final Runnable onClose;
    private volatile String closeReason;
    private volatile RdmaMessages.Initiator messages;
    private volatile DsmException messagesUnavailable;
    /** This connection's entry in {@link OpenResources#CONNECTIONS}, removed by {@link #close(String)}. */
    private final long openId;

    RdmaConnection(PeerInfo peer, RemoteCatalog catalog, VerbEngine engine, Runnable onClose) {
        this.peer = peer;
        this.catalog = catalog;
        this.engine = engine;
        this.onClose = onClose;
        this.openId = OpenResources.CONNECTIONS.opened("RdmaConnection to " + peer);
    }

    @Override
    public PeerInfo peer() {
        return peer;
    }

    RemoteCatalog catalog() {
        return catalog;
    }

    VerbEngine engine() {
        return engine;
    }

    @Override
    public boolean isOpen() {
        return closeReason == null && engine.brokenReason() == null;
    }

    @Override
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        String reason = closeReason;
        if (reason != null) {
            return closed(reason);
        }
        try {
            CatalogEntry e = catalog.check(ptr, remoteKey, length, Access.READ, false);
            return engine.read(ptr, remoteKey, e.address() + RemotePtr.offset(ptr), length);
        } catch (DsmException refused) {
            return CompletableFuture.failedFuture(refused); // nothing was posted
        }
    }

    @Override
    public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
        if (badRange != null) {
            return CompletableFuture.failedFuture(badRange);
        }
        String reason = closeReason;
        if (reason != null) {
            return closed(reason);
        }
        try {
            CatalogEntry e = catalog.check(ptr, remoteKey, length, Access.WRITE, false);
            return engine.write(ptr, remoteKey, e.address() + RemotePtr.offset(ptr), src, offset, length);
        } catch (DsmException refused) {
            return CompletableFuture.failedFuture(refused);
        }
    }

    @Override
    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        String reason = closeReason;
        if (reason != null) {
            return closed(reason);
        }
        try {
            CatalogEntry e = catalog.check(ptr, remoteKey, Long.BYTES, Access.ATOMIC, true);
            return engine.compareAndSwap(ptr, remoteKey, e.address() + RemotePtr.offset(ptr), expected, update);
        } catch (DsmException refused) {
            return CompletableFuture.failedFuture(refused);
        }
    }

    @Override
    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
        String reason = closeReason;
        if (reason != null) {
            return closed(reason);
        }
        try {
            CatalogEntry e = catalog.check(ptr, remoteKey, Long.BYTES, Access.ATOMIC, true);
            return engine.fetchAndAdd(ptr, remoteKey, e.address() + RemotePtr.offset(ptr), delta);
        } catch (DsmException refused) {
            return CompletableFuture.failedFuture(refused);
        }
    }

    @Override
    public void compareAndSwap(long ptr, long remoteKey, long expected, long update, LongCompletion done) {
        CatalogEntry e = atomicTarget(ptr, remoteKey, done);
        if (e != null) {
            engine.compareAndSwap(ptr, remoteKey, e.address() + RemotePtr.offset(ptr), expected, update, done);
        }
    }

    @Override
    public void fetchAndAdd(long ptr, long remoteKey, long delta, LongCompletion done) {
        CatalogEntry e = atomicTarget(ptr, remoteKey, done);
        if (e != null) {
            engine.fetchAndAdd(ptr, remoteKey, e.address() + RemotePtr.offset(ptr), delta, done);
        }
    }

    /**
     * The catalog entry of an atomic's word, or null when the verb failed here, before
     * anything was posted ({@code done} was called with the typed failure).
     */
    private CatalogEntry atomicTarget(long ptr, long remoteKey, LongCompletion done) {
        String reason = closeReason;
        if (reason != null) {
            done.completed(0, NodeUnavailableException.notSent(peer.nodeId(), reason));
            return null;
        }
        try {
            return catalog.check(ptr, remoteKey, Long.BYTES, Access.ATOMIC, true);
        } catch (DsmException refused) {
            done.completed(0, refused); // nothing was posted
            return null;
        }
    }

    /**
     * Messages go through the queue pair's SEND/RECV end ({@link RdmaMessages}); a
     * fabric that cannot carry SENDs (the NIC, for now) leaves {@code unavailable},
     * which every message then fails with.
     */
    void attachMessages(RdmaMessages.Initiator end, DsmException unavailable) {
        this.messages = end;
        this.messagesUnavailable = unavailable;
    }

    @Override
    @SuppressWarnings("unchecked")
    public CompletableFuture<Void> send(short channel, byte[] payload) {
        return (CompletableFuture<Void>) (CompletableFuture<?>) message(channel, false, payload);
    }

    @Override
    public CompletableFuture<byte[]> request(short channel, byte[] payload) {
        return message(channel, true, payload);
    }

    private CompletableFuture<byte[]> message(short channel, boolean request, byte[] payload) {
        RdmaMessages.Initiator end = messages;
        if (end == null) {
            return CompletableFuture.failedFuture(messagesUnavailable != null ? messagesUnavailable
                    : new io.membus.core.error.TransportUnavailableException("rdma", "this connection carries no"
                    + " messages"));
        }
        String reason = closeReason;
        if (reason != null) {
            return closed(reason);
        }
        return end.outbox.post(channel, request, payload);
    }

    private <T> CompletableFuture<T> closed(String reason) {
        return CompletableFuture.failedFuture(NodeUnavailableException.notSent(peer.nodeId(), reason));
    }

    @Override
    public Batch batch() {
        return new DeferredBatch(this);
    }

    /** Closes with a reason that verbs in flight and later verbs report. */
    @Override
    public void close(String reason) {
        if (closeReason != null) {
            return;
        }
        closeReason = reason;
        OpenResources.CONNECTIONS.closed(openId);
        RdmaMessages.Initiator end = messages;
        if (end != null) {
            end.close(reason);
        }
        engine.close(reason);
        onClose.run();
    }

    @Override
    public void close() {
        close("connection closed");
    }
}
