package io.membus.cluster;

import io.membus.alloc.GlobalAllocator;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.Transport;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

/**
 * How a {@link DsmNode} stops: a clean stop ({@link #close()}: the allocator's last verbs,
 * the replication engine's graceful leave, the claims, the cluster leave, the transport and
 * the meters, in that order, each bounded), a start that failed half way
 * ({@link #abortStart}), and a downing ({@link #selfDowned}: it stops serving at once and
 * says why). It holds the node's closed and down state, which every public method of the
 * node checks.
 *
 * <p><b>Note:</b> thread-safe. {@code closing} and {@code downReason} are volatile (the
 * down reason is written by the cluster agent's thread); the first {@link #close()} wins a
 * compare-and-set and the others wait on a latch for it; the transport is closed once, under
 * the node's monitor ({@code lock}), which is also the monitor a client's allocator is made
 * under, so a close never misses an allocator made while it started.
 */
final class NodeShutdown {
    private static final Logger LOG = LoggerFactory.getLogger(DsmNode.class); // the node's lines, as before
    private static final Duration CLOSE_WAIT = Duration.ofSeconds(15);
    private final NodeConfig config;
    /** The node: its monitor guards the making of a client's allocator and the transport's close. */
    private final Object lock;
    private final ActorSystem system;
    private final ClusterDirectory directory;
    private final ClusterNames names;
    private final ClusterClaims claims;
    private final NodeReplication replication;
    private final NodeMetrics metrics;
    private final AtomicReference<Transport> transport;
    private final AtomicBoolean transportClosed;
    /** The node's allocator, read under {@code lock}. */
    private final Supplier<GlobalAllocator> allocator;
    private volatile String downReason;
    private volatile boolean closing;
    /** Set by the first {@link #close()}; later calls wait for it ({@link #closed}). */
    private final AtomicBoolean closeStarted = new AtomicBoolean();
    private final CountDownLatch closed = new CountDownLatch(1);

    NodeShutdown(NodeConfig config, Object lock, ActorSystem system, ClusterDirectory directory, ClusterNames names,
                 ClusterClaims claims, NodeReplication replication, NodeMetrics metrics,
                 AtomicReference<Transport> transport, AtomicBoolean transportClosed,
                 Supplier<GlobalAllocator> allocator) {
        this.config = config;
        this.lock = lock;
        this.system = system;
        this.directory = directory;
        this.names = names;
        this.claims = claims;
        this.replication = replication;
        this.metrics = metrics;
        this.transport = transport;
        this.transportClosed = transportClosed;
        this.allocator = allocator;
    }

    /** Whether a close began (a use of the node fails from then on). */
    boolean closing() {
        return closing;
    }

    /** Why this node was downed, or {@code null} while it runs. */
    String downReason() {
        return downReason;
    }

    /**
     * Leaves the cluster (bounded: the allocator's verbs by their deadlines, the hand-over of
     * its replica groups by {@code membus.replication.leave-timeout}, the leave by 15 s), then
     * closes the transport and its segments. Idempotent: a second call, from any thread,
     * returns once the first one has finished (waiting at most as long).
     */
    void close() {
        if (!closeStarted.compareAndSet(false, true)) {
            try {
                if (!closed.await(CLOSE_WAIT.toMillis() + config.operationTimeout().toMillis() * 2
                                + config.replicationLeaveTimeout().toMillis(),
                        TimeUnit.MILLISECONDS)) {
                    LOG.warn("node {}: another close() is still running", config.nodeId());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return;
        }
        closing = true;
        directory.leaving(); // a group lost from here on goes with this clean stop: said at INFO, not WARN
        names.close(closedException());
        try {
            shutdown(CLOSE_WAIT);
        } finally {
            closed.countDown();
        }
    }

    /** A start that failed half way: the actor system, maybe the transport and its segments; releases them all. */
    void abortStart(Throwable failure) {
        closeStarted.set(true);
        closing = true;
        try {
            shutdown(Duration.ofSeconds(5));
        } catch (RuntimeException | Error s) {
            failure.addSuppressed(s);
        } finally {
            closed.countDown();
        }
    }

    /** What a use of this node after {@link #close()} fails with. */
    DsmClosedException closedException() {
        return new DsmClosedException("node " + config.nodeId() + " (its DsmNode, and the Membus instance, transport,"
                + " allocator and collections built on it)");
    }

    /** Fails at once with {@link DsmClosedException} once {@link #close()} was called. */
    void checkOpen() {
        if (closeStarted.get()) {
            throw closedException();
        }
    }

    /** This member was downed or removed: stops serving at once (claims, adoption, transport, actor system). */
    void selfDowned(String reason) {
        if (closing || downReason != null) {
            return;
        }
        downReason = reason;
        LOG.error("membus node {} is DOWN and stops serving: {}", config.nodeId(), reason);
        claims.close(NodeUnavailableException.notSent(config.nodeId(), "node " + config.nodeId() + " is down: "
                + reason));
        Thread t = new Thread(() -> {
            replication.closeAdoption(); // a downed node adopts nothing more
            closeTransport();
            system.terminate();
        }, "membus-node-" + config.nodeId() + "-down");
        t.setDaemon(true);
        t.start();
    }

    private void shutdown(Duration wait) {
        GlobalAllocator a;
        synchronized (lock) { // a client's allocator is made under this lock, never once closing is set
            a = allocator.get();
        }
        if (a != null && downReason == null) {
            try {
                a.close(); // returns cached blocks to remote free lists: while the peers are still members
            } catch (RuntimeException e) {
                LOG.warn("node {}: closing the allocator: {}", config.nodeId(), e.toString());
            }
        }
        // after the allocator's last verbs, which change this node's groups: they must still be served here
        if (downReason == null) {
            replication.leave(); // hands the groups over to their copies and the copies back (§17.9)
        }
        claims.close(closedException()); // also a failed start's: claims published before it never wait forever
        replication.close(); // no new streams, promotions or adoptions
        boolean clean = downReason == null;
        if (clean) {
            ShutdownLogFilter.leaving(system, true); // the members' closing of connections is no fault
        }
        try {
            CoordinatedShutdown.get(system).run(CoordinatedShutdown.clusterLeavingReason());
            // bounded, and Artery's streams are stopped if they stall on a peer's TLS close (ArteryStop)
            if (!ArteryStop.await(system, wait, config.nodeId())) {
                throw new TimeoutException();
            }
        } catch (Exception e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            LOG.warn("node {}: the actor system did not stop within {} ms: {}", config.nodeId(), wait.toMillis(),
                    e.toString());
            system.terminate();
        } finally {
            ShutdownLogFilter.leaving(system, false);
            closeTransport();
        }
    }

    /**
     * Closes the transport once: the thread of a downed node and {@link #close()} may both
     * get here, and a transport's close is not meant to run twice at the same time; the
     * second caller waits until the first has finished.
     */
    private void closeTransport() {
        synchronized (lock) {
            Transport t = transport.get();
            if (t != null && transportClosed.compareAndSet(false, true)) {
                try {
                    t.close();
                } catch (RuntimeException e) {
                    LOG.warn("node {}: closing the transport: {}", config.nodeId(), e.toString());
                }
                metrics.close(); // the Prometheus port is free and the MBeans unregistered once close() returns
            }
        }
    }
}
