package io.membus.core.replication;

import java.util.Collection;
import java.util.concurrent.CompletableFuture;

/**
 * Publishes this node's {@link GroupClaim}s in the directory: implemented by the cluster
 * (its node entry, written with a majority) and by
 * {@link io.membus.core.directory.StaticDirectory} (in memory, for tests and
 * single-process clusters).
 *
 * <p><b>Note:</b> implementations are thread-safe.
 */
public interface ClaimPublisher {

    /**
     * Replaces every claim of node {@code nodeId} by {@code claims}. The future completes
     * when the claims are visible to a majority of the directory's members (the cluster)
     * or to every lookup (in memory), and fails when that cannot be done (no majority
     * reachable before the deadline): a node that cannot publish must not serve.
     */
    CompletableFuture<Void> publish(int nodeId, Collection<GroupClaim> claims);
}
