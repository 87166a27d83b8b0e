package io.membus.transport.rdma;

import io.membus.core.Access;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.Batch;
import io.membus.core.transport.Connection;
import io.membus.core.transport.PeerInfo;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

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

    RdmaConnection(PeerInfo peer, RemoteCatalog catalog, VerbEngine engine, Runnable onClose) {
        this.peer = peer;
        this.catalog = catalog;
        this.engine = engine;
        this.onClose = onClose;
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
        if (offset < 0 || length < 0 || offset > src.length - length) {
            return CompletableFuture.failedFuture(new IllegalArgumentException("source range out of bounds: offset="
                    + offset + ", length=" + length + ", array=" + src.length));
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

    private <T> CompletableFuture<T> closed(String reason) {
        return CompletableFuture.failedFuture(new NodeUnavailableException(peer.nodeId(), reason));
    }

    @Override
    public Batch batch() {
        return new RdmaBatch();
    }

    /** Closes with a reason that verbs in flight and later verbs report. */
    void close(String reason) {
        if (closeReason != null) {
            return;
        }
        closeReason = reason;
        engine.close(reason);
        onClose.run();
    }

    @Override
    public void close() {
        close("connection closed");
    }

    /** Verbs held until {@link #submit()}, then checked and posted in order under one pass. */
    private final class RdmaBatch implements Batch {
        private final List<Runnable> posts = new ArrayList<>();
        private boolean submitted;

        @Override
        public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
            return add(() -> RdmaConnection.this.read(ptr, remoteKey, length));
        }

        @Override
        public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
            if (offset < 0 || length < 0 || offset > src.length - length) {
                return CompletableFuture.failedFuture(new IllegalArgumentException("source range out of bounds: offset="
                        + offset + ", length=" + length + ", array=" + src.length));
            }
            byte[] copy = java.util.Arrays.copyOfRange(src, offset, offset + length);
            return add(() -> RdmaConnection.this.write(ptr, remoteKey, copy, 0, length));
        }

        @Override
        public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
            return add(() -> RdmaConnection.this.compareAndSwap(ptr, remoteKey, expected, update));
        }

        @Override
        public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
            return add(() -> RdmaConnection.this.fetchAndAdd(ptr, remoteKey, delta));
        }

        private <T> CompletableFuture<T> add(Supplier<CompletableFuture<T>> post) {
            if (submitted) {
                throw new IllegalStateException("batch already submitted: start a new batch");
            }
            CompletableFuture<T> result = new CompletableFuture<>();
            posts.add(() -> post.get().whenComplete((v, e) -> {
                if (e != null) {
                    result.completeExceptionally(e);
                } else {
                    result.complete(v);
                }
            }));
            return result;
        }

        @Override
        public void submit() {
            if (submitted) {
                throw new IllegalStateException("batch already submitted: start a new batch");
            }
            submitted = true;
            posts.forEach(Runnable::run);
            posts.clear();
        }

        @Override
        public int size() {
            return submitted ? 0 : posts.size();
        }
    }
}
