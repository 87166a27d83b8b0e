package io.membus.core.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.time.Deadlines;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * What both replication engines ({@link Replicator} by forwarding, {@link AdoptionReplicator}
 * by adoption) run the same way: one service thread ({@code membus-repl-<node>}) for the
 * engine's decisions, and the publication of this node's {@link GroupClaim}s.
 *
 * <p>Publication: {@link #publishNow()} sends every claim of this node in one publication and
 * waits for it (bounded by the operation timeout). {@link #schedulePublish()} does it on the
 * service thread, coalescing requests, and retries a failed publication every
 * {@link #RETRY} until it succeeds (a claim the directory lacks must not stay lacking): the
 * first failure is logged at WARN, the retries at DEBUG, the success after failures at INFO.
 * A publisher that was closed ({@link DsmClosedException}: the node is closing and its
 * directory went first) ends the retries: nobody is left to publish to.
 *
 * <p><b>Note:</b> thread-safe. {@link #claims()} is a concurrent map; a publication takes its
 * snapshot under a lock, so a later publication always carries the later claims.
 */
final class ReplicationService {
    private static final Logger LOG = LoggerFactory.getLogger(ReplicationService.class);
    /** The pause before a failed publication is made again. */
    static final Duration RETRY = Duration.ofMillis(500);

    private final int self;
    private final ClaimPublisher publisher;
    private final Duration timeout;
    private final ThreadPoolExecutor executor;
    private final Map<Integer, GroupClaim> claims = new ConcurrentHashMap<>();
    private final AtomicBoolean publishScheduled = new AtomicBoolean();
    private final Object publishLock = new Object();
    /** Whether the last publication failed (so the next failure is not logged at WARN again). */
    private volatile boolean failing;
    private volatile boolean closed;
    /** Whether {@link #close()} stopped the thread (it stops it once). */
    private final AtomicBoolean stopped = new AtomicBoolean();

    ReplicationService(int self, ClaimPublisher publisher, Duration timeout) {
        this.self = self;
        this.publisher = publisher;
        this.timeout = timeout;
        this.executor = new ThreadPoolExecutor(1, 1, 0, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>(), r -> {
            Thread t = new Thread(r, "membus-repl-" + self);
            t.setDaemon(true);
            return t;
        });
    }

    /** This node's claims, by group id: what the next publication sends. */
    Map<Integer, GroupClaim> claims() {
        return claims;
    }

    boolean closed() {
        return closed;
    }

    /** @throws DsmClosedException naming this node's replication once {@link #close()} ran */
    void checkOpen() {
        if (closed) {
            throw new DsmClosedException("replication of node " + self);
        }
    }

    /** Runs {@code task} on the service thread; dropped once closed. A task's failure is logged, never rethrown. */
    void submit(Runnable task) {
        if (closed) {
            return;
        }
        try {
            executor.execute(() -> {
                try {
                    task.run();
                } catch (RuntimeException e) {
                    if (!closed) {
                        LOG.error("replication: a task of node {} failed", self, e);
                    }
                }
            });
        } catch (RejectedExecutionException e) {
            // closing
        }
    }

    /** Runs {@code task} on the service thread after {@code delayNanos} (on the shared timer). */
    void later(Runnable task, long delayNanos) {
        if (!closed) {
            Deadlines.schedule(() -> submit(task), delayNanos);
        }
    }

    /** Tasks waiting for the service thread (for status text). */
    int queued() {
        return executor.getQueue().size();
    }

    /**
     * Publishes every claim of this node and waits for it.
     *
     * @throws DsmException when the publication failed or did not complete within the operation timeout
     */
    void publishNow() {
        CompletableFuture<Void> f;
        synchronized (publishLock) {
            f = publisher.publish(self, new ArrayList<>(claims.values()));
        }
        RemoteMemory.await(f, timeout);
    }

    /** Publishes on the service thread (requests coalesce), retrying until it succeeds or the publisher closed. */
    void schedulePublish() {
        if (publishScheduled.compareAndSet(false, true)) {
            submit(() -> {
                publishScheduled.set(false);
                try {
                    publishNow();
                    if (failing) {
                        failing = false;
                        LOG.info("replication: node {} published its claims again", self);
                    }
                } catch (DsmClosedException e) {
                    LOG.debug("replication: node {} stops publishing its claims: {}", self, e.getMessage());
                } catch (DsmException e) {
                    if (failing) {
                        LOG.debug("replication: node {} could not publish its claims ({}); trying again", self,
                                e.getMessage());
                    } else {
                        failing = true;
                        LOG.warn("replication: node {} could not publish its claims ({}); trying again every {} ms"
                                + " until it can", self, e.getMessage(), RETRY.toMillis());
                    }
                    later(this::schedulePublish, RETRY.toNanos());
                }
            });
        }
    }

    /**
     * Marks the service closed without stopping its thread yet: from here {@link #closed()}
     * is true, {@link #checkOpen()} throws, tasks are dropped. An engine that must do more
     * before the thread stops (unregister its handlers) calls this first, then {@link #close()}.
     */
    void markClosed() {
        closed = true;
    }

    /** Stops the service thread (waiting up to 5 s for a running task); pending tasks are dropped. Idempotent. */
    void close() {
        closed = true;
        if (!stopped.compareAndSet(false, true)) {
            return;
        }
        executor.shutdownNow();
        try {
            if (!executor.awaitTermination(5, TimeUnit.SECONDS)) {
                LOG.warn("replication: the service thread of node {} still runs 5 s after close", self);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
