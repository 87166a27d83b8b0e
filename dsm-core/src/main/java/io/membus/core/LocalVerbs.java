package io.membus.core;

import io.membus.core.replication.AckGate;
import io.membus.core.transport.Transport;
import io.membus.core.transport.Verbs;

import java.util.concurrent.CompletableFuture;

/**
 * This node's own segments (and the replica groups it serves as primary), run on the
 * caller's thread with the verb checks of {@link Transport#table()}: {@link RemoteMemory}'s
 * posted verbs on its own pointers when the transport's local atomics are coherent with
 * peers' verbs. A verb of a replicated group completes once the group's {@link AckGate}
 * says every in-sync copy has what it changed or saw ({@link #gated}); with no gate its
 * future is complete when the method returns.
 *
 * <p><b>Note:</b> thread-safe (no state of its own); ordering and visibility are the
 * table's ({@link Verbs}): a verb's effect is done when its method returns.
 */
final class LocalVerbs implements Verbs {
    private final Transport transport;

    LocalVerbs(Transport transport) {
        this.transport = transport;
    }

    @Override
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        try {
            return gated(ptr, transport.table().read(ptr, remoteKey, length));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        try {
            transport.table().write(ptr, remoteKey, src, offset, length);
            return gated(ptr, null);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        try {
            return gated(ptr, transport.table().compareAndSwap(ptr, remoteKey, expected, update));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
        try {
            return gated(ptr, transport.table().fetchAndAdd(ptr, remoteKey, delta));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * The future of a verb that ran on this node's table: done once its group acknowledged
     * it ({@link io.membus.core.transport.SegmentTable#acked}).
     */
    private <T> CompletableFuture<T> gated(long ptr, T value) {
        return transport.table().acked(ptr, value);
    }
}
