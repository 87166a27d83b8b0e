package io.membus.core;

import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NotPrimaryException;

import java.util.concurrent.CompletableFuture;

/**
 * The future of a routed verb ({@link GroupRouter}) that was refused
 * {@link NotPrimaryException} and issued again ({@link #then}), or held: a blocking caller
 * whose wait ends while the verb is held withdraws it through {@link #withdraw()} and
 * reports it not sent.
 *
 * <p><b>Note:</b> thread-safe: {@link #then} is volatile (set by the thread that re-issued
 * the verb, read by the blocking caller); completion is the {@link CompletableFuture}'s.
 */
class RoutedFuture<T> extends CompletableFuture<T> {
    /** The future of the verb issued again after a refusal, when that is withdrawable. */
    volatile RoutedFuture<T> then;

    /** The not-sent timeout when the verb was still held (it will never be sent now), else null. */
    DsmTimeoutException withdraw() {
        RoutedFuture<T> next = then;
        DsmTimeoutException e = next == null ? null : next.withdraw();
        if (e != null) {
            completeExceptionally(e);
        }
        return e;
    }
}
