package io.membus.core;

import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NotPrimaryException;

import io.membus.core.transport.WaitHelp;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The future of a routed verb ({@link GroupRouter}) that was refused
 * {@link NotPrimaryException} and issued again ({@link #then}), or held: a blocking caller
 * whose wait ends while the verb is held withdraws it through {@link #withdraw()} and
 * reports it not sent. Waiting for it ({@code get}, {@code join}) first does what the
 * thread left for its waiter ({@link WaitHelp}: tcp's reads held on a lane, which the
 * routed verb may be), within the wait's own bound, as {@code VerbWait.await} does, and then
 * waits for this future only (never for the rest of a delivery another thread runs). A wait
 * for a future not done yet in a callback a transport's delivery runs
 * ({@link WaitHelp#delivering()}) fails at once with
 * {@link io.membus.core.error.BlockingCallOnTransportThreadException}, as {@code VerbWait.await} does.
 *
 * <p><b>Note:</b> thread-safe: {@link #then} and {@link #source} are volatile (set by the
 * thread that issued or re-issued the verb, read by the blocking caller or by whoever attaches
 * a dependent); completion is the {@link CompletableFuture}'s.
 */
class RoutedFuture<T> extends CompletableFuture<T> {
    /** The future of the verb issued again after a refusal, when that is withdrawable. */
    volatile RoutedFuture<T> then;

    /** The verb's own future this one relays, when the transport wants to know of dependents ({@link WaitHelp.Waitable}). */
    volatile WaitHelp.Waitable<?> source;

    @Override
    public <U> CompletableFuture<U> newIncompleteFuture() {
        WaitHelp.Waitable<?> s = source;
        if (s != null) {
            s.dependentAttached(); // a callback on this future: somebody may never wait for the verb
        }
        return new CompletableFuture<>();
    }

    @Override
    public T get() throws InterruptedException, ExecutionException {
        if (!isDone()) {
            WaitHelp.checkNotDelivering(); // a callback of a delivery must not block (it could wait for ever)
            WaitHelp.beforeWait(WaitHelp.FOREVER, this);
        }
        return super.get();
    }

    @Override
    public T get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
        if (!isDone()) {
            WaitHelp.checkNotDelivering();
            long deadline = System.nanoTime() + unit.toNanos(timeout);
            WaitHelp.beforeWait(unit.toNanos(timeout), this);
            return super.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        }
        return super.get(timeout, unit);
    }

    @Override
    public T join() {
        if (!isDone()) {
            WaitHelp.checkNotDelivering(); // a callback of a delivery must not block (it could wait for ever)
            WaitHelp.beforeWait(WaitHelp.FOREVER, this);
        }
        return super.join();
    }

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
