package io.membus.core;

import io.membus.core.error.NotPrimaryException;
import io.membus.core.transport.Verbs;

import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/**
 * One verb of a {@link RemoteMemory.RemoteBatch}: how to post it, and the future its caller
 * holds. A verb refused {@link NotPrimaryException} (replication) is re-issued on its own
 * through the {@link GroupRouter}.
 *
 * <p><b>Note:</b> posted once, by the thread that submits its batch; its future completes
 * on whichever thread completes the posted verb (a transport thread, or the submitter for
 * this node's own table).
 */
final class BatchedVerb<T> {
    private final GroupRouter router;
    private final long ptr;
    private final Function<Verbs, CompletableFuture<T>> op;
    final CompletableFuture<T> result;

    BatchedVerb(GroupRouter router, long ptr, Function<Verbs, CompletableFuture<T>> op, CompletableFuture<T> result) {
        this.router = router;
        this.ptr = ptr;
        this.op = op;
        this.result = result;
    }

    /** Routes it on its own (its group was promoting when it was added). */
    void route(long deadline) {
        VerbFutures.relay(router.routed(ptr, op, deadline, 0), result);
    }

    void post(Verbs on, long deadline) {
        CompletableFuture<T> posted;
        try {
            posted = op.apply(on);
        } catch (RuntimeException e) {
            result.completeExceptionally(e);
            return;
        }
        posted.whenComplete((value, error) -> {
            Throwable cause = error == null ? null : VerbFutures.unwrap(error);
            if (cause instanceof NotPrimaryException np && router.replicated()) {
                VerbFutures.relay(router.reissue(ptr, op, deadline, 0, np), result);
            } else if (cause != null) {
                result.completeExceptionally(cause);
            } else {
                result.complete(value);
            }
        });
    }

    /**
     * The bytes of a batched write, copied at submit when the write may run later
     * (replication: a held or re-issued write).
     *
     * <p><b>Note:</b> not thread-safe: filled and taken by the batch's one thread, before
     * the verb is posted (posting publishes it).
     */
    static final class Snapshot {
        byte[] src;
        int offset;
        final int length;

        Snapshot(byte[] src, int offset, int length) {
            this.src = src;
            this.offset = offset;
            this.length = length;
        }

        void take() {
            if (Verbs.sourceRangeError(src, offset, length) == null) { // a bad range fails its own verb
                src = Arrays.copyOfRange(src, offset, offset + length);
                offset = 0;
            }
        }
    }
}
