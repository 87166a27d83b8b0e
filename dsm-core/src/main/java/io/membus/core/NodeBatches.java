package io.membus.core;

import io.membus.core.error.DsmException;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.transport.Batch;
import io.membus.core.transport.Transport;
import io.membus.core.transport.Verbs;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import java.util.function.LongFunction;

/**
 * The verbs of one {@link RemoteMemory.RemoteBatch}, grouped by the node that serves each
 * pointer when it is added, and their posting at submit: per node, in the order added, as
 * one {@link Batch} of that node's connection (this node's own pointers on its table when
 * its local atomics are coherent; verbs of a group that was promoting when added routed,
 * and held, one by one). The public face, with its contract, is {@link RemoteMemory.RemoteBatch}.
 *
 * <p><b>Note:</b> not thread-safe, as the batch it serves: one thread adds and submits,
 * once. Nothing is posted before {@link #submit}; the futures complete on transport threads.
 */
final class NodeBatches {
    private final RemoteMemory memory;
    private final Transport transport;
    private final GroupRouter router;
    private final ConnectionOpenings openings;
    private final LocalVerbs local;
    private final long timeoutNanos;
    private final Map<Integer, List<BatchedVerb<?>>> byNode = new LinkedHashMap<>();
    /** Writes whose bytes are copied at submit (replication: a held or re-issued write runs later). */
    private List<BatchedVerb.Snapshot> snapshots;
    private int size;
    private boolean submitted;

    NodeBatches(RemoteMemory memory, Transport transport, GroupRouter router, ConnectionOpenings openings,
                LocalVerbs local, long timeoutNanos) {
        this.memory = memory;
        this.transport = transport;
        this.router = router;
        this.openings = openings;
        this.local = local;
        this.timeoutNanos = timeoutNanos;
    }

    /** Whether verbs are routed by replica group: then a write's bytes are copied at submit. */
    boolean replicated() {
        return router.replicated();
    }

    /** A write's source range, copied at {@link #submit} (before anything is posted). */
    BatchedVerb.Snapshot snapshot(byte[] src, int offset, int length) {
        BatchedVerb.Snapshot snapshot = new BatchedVerb.Snapshot(src, offset, length);
        if (snapshots == null) {
            snapshots = new ArrayList<>();
        }
        snapshots.add(snapshot);
        return snapshot;
    }

    /** Verbs added and not yet submitted. */
    int size() {
        return submitted ? 0 : size;
    }

    /**
     * Adds the verb {@code op} makes from the pointer's remote key, under the node serving it now;
     * its future fails at once when the pointer has no segment or member.
     */
    <T> CompletableFuture<T> add(long ptr, LongFunction<Function<Verbs, CompletableFuture<T>>> op) {
        if (submitted) {
            throw new IllegalStateException("batch already submitted: start a new batch");
        }
        CompletableFuture<T> result = new CompletableFuture<>();
        int node = RemotePtr.nodeId(ptr);
        if (ptr == RemotePtr.NULL) {
            result.completeExceptionally(new InvalidPointerException(ptr, 0, node));
            return result;
        }
        long key;
        try {
            key = memory.segmentOf(ptr).remoteKey();
            node = router.route(ptr); // the group's primary, or HELD: those are routed again at submit
        } catch (DsmException e) {
            result.completeExceptionally(e);
            return result;
        }
        byNode.computeIfAbsent(node, n -> new ArrayList<>())
                .add(new BatchedVerb<>(router, ptr, op.apply(key), result));
        size++;
        return result;
    }

    /** Posts every verb added, one batch per node; the deadlines start now. */
    void submit() {
        if (submitted) {
            throw new IllegalStateException("batch already submitted: start a new batch");
        }
        submitted = true;
        if (snapshots != null) {
            snapshots.forEach(BatchedVerb.Snapshot::take);
        }
        long deadline = OperationDeadline.until(System.nanoTime(), timeoutNanos);
        byNode.forEach((node, verbs) -> {
            if (node == GroupRouter.HELD) { // their groups were promoting at add: each is routed (held) on its own now
                verbs.forEach(p -> p.route(deadline));
                return;
            }
            if (node == transport.nodeId() && transport.localAtomicsCoherent()) {
                verbs.forEach(p -> p.post(local, deadline));
                return;
            }
            openings.onNode(node, connection -> {
                Batch b = connection.batch();
                verbs.forEach(p -> p.post(b, deadline));
                b.submit();
                return CompletableFuture.completedFuture(null);
            }, () -> "node " + node).whenComplete((v, e) -> {
                if (e != null) { // the connection did not open: none of these verbs was posted
                    Throwable cause = VerbFutures.unwrap(e);
                    verbs.forEach(p -> p.result.completeExceptionally(cause));
                }
            });
        });
        byNode.clear();
    }
}
