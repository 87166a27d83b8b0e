package io.membus.core;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * Small future helpers of {@link RemoteMemory}'s classes: unwrapping a
 * {@link CompletionException}, relaying one future's outcome into another, and a failed
 * future carrying another's typed cause.
 *
 * <p><b>Note:</b> thread-safe (stateless); relaying completes the target on the thread
 * that completed the source, after it (the source's completion happens-before the
 * target's).
 */
final class VerbFutures {
    private VerbFutures() {
    }

    /** The typed cause inside a {@link CompletionException}, else {@code e} itself. */
    static Throwable unwrap(Throwable e) {
        return e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
    }

    /** Completes {@code to} as {@code from} completes (a failure with its unwrapped cause). */
    static <T> void relay(CompletableFuture<T> from, CompletableFuture<T> to) {
        from.whenComplete((value, error) -> {
            if (error != null) {
                to.completeExceptionally(unwrap(error));
            } else {
                to.complete(value);
            }
        });
    }

    /** A future failed with the typed cause of {@code failed} (not wrapped in a CompletionException). */
    static <T> CompletableFuture<T> failedLike(CompletableFuture<?> failed) {
        Throwable cause = failed.handle((v, e) -> e).join();
        return CompletableFuture.failedFuture(unwrap(cause));
    }
}
