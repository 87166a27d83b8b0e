package io.membus.cluster;

import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.replication.ClaimPublisher;
import io.membus.core.replication.GroupClaim;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.cluster.ddata.LWWMap;
import org.apache.pekko.cluster.ddata.Replicator;
import org.apache.pekko.cluster.ddata.SelfUniqueAddress;
import org.apache.pekko.pattern.Patterns;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The cluster's {@link ClaimPublisher}: this node's {@link GroupClaim}s live in its own
 * directory entry ({@link NodeEntry#claims()}), so "each node writes only its own key"
 * still holds. A publication replaces the claims in the entry, tags the entry again under
 * the cluster secret ({@link ClusterMacs}) and writes it to Distributed Data with
 * {@code WriteMajority}; its future completes when a majority of the members acknowledged
 * it, and fails typed when none did within the operation timeout:
 * {@link DsmTimeoutException} (no majority answered in time; the entry is applied locally
 * and spreads by gossip, but a node that could not publish must not serve on it) or
 * {@link NodeUnavailableException} (the write failed, or the node is closed or down).
 *
 * <p>The node's entry is first written by {@link DsmNode} at start ({@link #start}); claims
 * published before that (the replication engine learns its groups before the node's entry
 * exists: docs/replication.md §7) are written with it, and their futures complete with the
 * outcome of that first write.
 *
 * <p><b>Note:</b> thread-safe. One lock orders publications: the entry is built and its
 * update handed to the replicator (enqueued in its mailbox) under the lock, so the
 * replicator applies publications in the order they were made, and the last one wins
 * (last-writer-wins entries of one node only grow in time). Futures complete on Pekko's
 * threads; callers must not block them.
 */
final class ClusterClaims implements ClaimPublisher {
    private final int nodeId;
    private final ActorRef replicator;
    private final SelfUniqueAddress self;
    private final ClusterMacs macs;
    private final Duration timeout;

    private final Object lock = new Object();
    /** The node's entry without claims; {@code null} until {@link #start}. Guarded by {@link #lock}. */
    private NodeEntry base;
    /** The claims published last. Guarded by {@link #lock}. */
    private List<GroupClaim> claims = List.of();
    /** Publications made before {@link #start}: completed with the first write's outcome. Guarded by {@link #lock}. */
    private final List<CompletableFuture<Void>> beforeStart = new ArrayList<>();
    /** Why publications fail from now on (the node closed or is down); {@code null} while it runs. Guarded by {@link #lock}. */
    private DsmException closed;

    ClusterClaims(int nodeId, ActorRef replicator, SelfUniqueAddress self, ClusterMacs macs, Duration timeout) {
        this.nodeId = nodeId;
        this.replicator = replicator;
        this.self = self;
        this.macs = macs;
        this.timeout = timeout;
    }

    /**
     * Replaces this node's claims. {@code node} must be this node: an entry is written by
     * its own node only.
     */
    @Override
    public CompletableFuture<Void> publish(int node, Collection<GroupClaim> next) {
        if (node != nodeId) {
            return CompletableFuture.failedFuture(DsmException.internal("claims of node " + node + " published on node "
                    + nodeId + ": a node publishes only its own claims (its directory entry is written by itself"
                    + " only); publish them on node " + node));
        }
        List<GroupClaim> copy = List.copyOf(next);
        synchronized (lock) {
            if (closed != null) {
                return CompletableFuture.failedFuture(closed);
            }
            claims = copy;
            if (base == null) {
                CompletableFuture<Void> f = new CompletableFuture<>();
                beforeStart.add(f);
                return f;
            }
            return write(entry(), "publish the replica-group claims of node " + nodeId);
        }
    }

    /**
     * Writes the node's first entry ({@code entry} without claims), with the claims
     * published so far; the publications made before complete with its outcome.
     *
     * @return the outcome of the write (also typed on failure)
     */
    CompletableFuture<Void> start(NodeEntry entry) {
        List<CompletableFuture<Void>> waiting;
        CompletableFuture<Void> written;
        synchronized (lock) {
            if (closed != null) {
                return CompletableFuture.failedFuture(closed);
            }
            base = entry.withClaims(List.of());
            written = write(entry(), "publish the directory entry of node " + nodeId);
            waiting = List.copyOf(beforeStart);
            beforeStart.clear();
        }
        written.whenComplete((ok, e) -> waiting.forEach(f -> {
            if (e == null) {
                f.complete(null);
            } else {
                f.completeExceptionally(e);
            }
        }));
        return written;
    }

    /** The entry as it is published now: tagged, with the current claims; {@code null} before {@link #start}. */
    NodeEntry current() {
        synchronized (lock) {
            return base == null ? null : entry();
        }
    }

    /** The claims published last. */
    List<GroupClaim> claims() {
        synchronized (lock) {
            return claims;
        }
    }

    /** From now on every publication fails with {@code reason}; those waiting for the first write fail too. */
    void close(DsmException reason) {
        List<CompletableFuture<Void>> waiting;
        synchronized (lock) {
            if (closed != null) {
                return;
            }
            closed = reason;
            waiting = List.copyOf(beforeStart);
            beforeStart.clear();
        }
        waiting.forEach(f -> f.completeExceptionally(reason));
    }

    /** Guarded by {@link #lock}. */
    private NodeEntry entry() {
        NodeEntry e = base.withClaims(claims);
        return e.withMac(macs.entry(e));
    }

    /** Hands the update to the replicator (under the lock: enqueued in order) and maps its answer. */
    private CompletableFuture<Void> write(NodeEntry entry, String operation) {
        String key = Integer.toString(nodeId);
        return Patterns.ask(replicator, new Replicator.Update<LWWMap<String, NodeEntry>>(ClusterAgent.NODES,
                                LWWMap.create(), new Replicator.WriteMajority(timeout), m -> m.put(self, key, entry)),
                        timeout.plusMillis(500))
                .toCompletableFuture()
                .handle((reply, failure) -> {
                    DsmException e = outcome(nodeId, operation, timeout, reply, failure);
                    if (e != null) {
                        throw e;
                    }
                    return (Void) null;
                });
    }

    /**
     * What a write's answer means: {@code null} for success, else the typed failure.
     * {@link Replicator.UpdateTimeout} and an ask that timed out are
     * {@link DsmTimeoutException} (no majority answered in time); any other answer is
     * {@link NodeUnavailableException}.
     */
    static DsmException outcome(int nodeId, String operation, Duration timeout, Object reply, Throwable failure) {
        if (failure == null && reply instanceof Replicator.UpdateSuccess<?>) {
            return null;
        }
        Throwable cause = failure instanceof java.util.concurrent.CompletionException && failure.getCause() != null
                ? failure.getCause() : failure;
        if (reply instanceof Replicator.UpdateTimeout<?> || cause instanceof org.apache.pekko.pattern.AskTimeoutException
                || cause instanceof java.util.concurrent.TimeoutException) {
            return new DsmTimeoutException(operation + " (write to a majority)", nodeId, timeout, "no majority of the"
                    + " cluster's members acknowledged it in time (membus.operation-timeout); it is applied on this node"
                    + " and spreads by gossip, but may not be relied on: check that a majority of the members is"
                    + " reachable");
        }
        String why = cause != null ? cause.toString() : reply == null ? "no answer" : reply.getClass().getSimpleName();
        return new NodeUnavailableException(nodeId, "the directory could not take the write: operation=" + operation
                + ", answer=" + why + "; a majority of the cluster must be reachable and this node running", cause);
    }
}
