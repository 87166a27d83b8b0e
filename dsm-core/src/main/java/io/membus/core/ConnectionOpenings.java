package io.membus.core;

import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.Transport;
import io.membus.core.transport.Verbs;

import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * {@link RemoteMemory}'s connections by node id: runs an operation on the connection to a
 * node (a loopback connection for this node), found from the directory's member and the
 * transport's {@link Transport#connect}. While a connection is still opening, operations
 * wait in a per-node {@link Opening} in issue order and are submitted in that order once
 * it opens: chaining each on the connect future instead would run them in reverse
 * ({@code CompletableFuture} dependents), breaking the per-connection issue order of
 * {@link Verbs}.
 *
 * <p><b>Note:</b> thread-safe: the openings are a concurrent map (a count lets the common
 * case, nothing opening, skip it); each {@link Opening}'s queue is guarded by its monitor,
 * which is held while the queued operations are submitted (so none overtakes another) but
 * never while a caller's future completes with a value it waits for.
 */
final class ConnectionOpenings {
    private final Transport transport;
    private final SegmentDirectory directory;
    private final ConcurrentHashMap<Integer, Opening> openings = new ConcurrentHashMap<>();
    /** Entries in {@code openings}, raised before one is added: zero lets a verb skip the map. */
    private final AtomicInteger openingCount = new AtomicInteger();

    ConnectionOpenings(Transport transport, SegmentDirectory directory) {
        this.transport = transport;
        this.directory = directory;
    }

    /** Whether some connection is opening now (its node's verbs must queue behind it). */
    boolean anyOpening() {
        return openingCount.get() != 0;
    }

    /** What a verb issued after this node's transport closed fails with: at once, naming the node. */
    DsmClosedException closedException() {
        return new DsmClosedException("the remote memory of node " + transport.nodeId() + " (its transport "
                + transport.name() + " is closed: the node or Membus instance that owned it was closed)");
    }

    /**
     * Runs {@code op} on the connection to {@code node}; {@code what} names the target in a
     * failure. A node that is not a live member fails the future with
     * {@link NodeUnavailableException}, a connection that cannot open with its typed cause.
     */
    <T> CompletableFuture<T> onNode(int node, Function<Connection, CompletableFuture<T>> op, Supplier<String> what) {
        if (transport.isClosed()) {
            return CompletableFuture.failedFuture(closedException());
        }
        PeerInfo peer = node == transport.nodeId() ? transport.self() : directory.member(node).orElse(null);
        if (peer == null) {
            return CompletableFuture.failedFuture(NodeUnavailableException.notSent(node,
                    "not a live member of the cluster (" + what.get() + ")"));
        }
        Opening opening = openingCount.get() == 0 ? null : openings.get(node);
        if (opening == null) {
            CompletableFuture<Connection> c = transport.connect(peer);
            if (c.isDone()) {
                return c.isCompletedExceptionally() ? VerbFutures.failedLike(c) : op.apply(c.join());
            }
            Opening fresh = new Opening(c);
            openingCount.incrementAndGet();
            opening = openings.putIfAbsent(node, fresh);
            if (opening == null) {
                opening = fresh;
                c.whenComplete((connection, error) -> drain(node, fresh));
            } else {
                openingCount.decrementAndGet();
            }
        }
        return opening.submit(op);
    }

    /** Runs, in issue order, the operations that waited for a connection to open. */
    private void drain(int node, Opening opening) {
        opening.drain();
        if (openings.remove(node, opening)) {
            openingCount.decrementAndGet();
        }
    }

    /**
     * Operations issued while a connection to their node is still opening, in issue order.
     *
     * <p><b>Note:</b> thread-safe: the queue and the drained flag are guarded by the monitor.
     */
    private static final class Opening {
        private final CompletableFuture<Connection> connection;
        private final ArrayDeque<Runnable> waiting = new ArrayDeque<>();
        private boolean drained;

        Opening(CompletableFuture<Connection> connection) {
            this.connection = connection;
        }

        <T> CompletableFuture<T> submit(Function<Connection, CompletableFuture<T>> op) {
            synchronized (this) {
                if (!drained) {
                    CompletableFuture<T> result = new CompletableFuture<>();
                    waiting.add(() -> run(op, result));
                    return result;
                }
            }
            // Opened (or failed) and every earlier operation submitted: the future is done.
            return connection.isCompletedExceptionally() ? VerbFutures.failedLike(connection)
                    : op.apply(connection.join());
        }

        synchronized void drain() {
            for (Runnable r; (r = waiting.poll()) != null; ) {
                r.run();
            }
            drained = true;
        }

        private <T> void run(Function<Connection, CompletableFuture<T>> op, CompletableFuture<T> result) {
            CompletableFuture<T> issued;
            try {
                issued = connection.isCompletedExceptionally() ? VerbFutures.failedLike(connection)
                        : op.apply(connection.join());
            } catch (RuntimeException e) {
                issued = CompletableFuture.failedFuture(e);
            }
            VerbFutures.relay(issued, result);
        }
    }
}
