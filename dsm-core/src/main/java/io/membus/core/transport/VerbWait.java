package io.membus.core.transport;

import io.membus.core.error.BlockingCallOnTransportThreadException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The bounded, typed wait for a verb's (or a connection's, or a message's) future: what
 * every blocking call of the project ends in. It lives beside the transport SPI so that a
 * transport waiting on its own futures (tcp's blocking lanes) needs nothing from the layers
 * above it; {@code io.membus.core.RemoteMemory#await(CompletableFuture, Duration)} is the
 * same method.
 *
 * <p><b>Note:</b> thread-safe (stateless). Memory ordering is the future's: a value
 * returned was published by the completing thread's {@code complete}, which happens-before
 * the return.
 */
public final class VerbWait {
    private VerbWait() {
    }

    /**
     * Waits at most {@code wait} for {@code future}. A failure is rethrown as its typed
     * {@link DsmException} with the caller's stack ({@link DsmException#forCaller()}:
     * the exception the transport thread threw is the cause); a wait that outlasts
     * {@code wait} (a transport that did not enforce its own deadline) is a
     * {@link DsmTimeoutException}.
     *
     * <p>The wait is not interruptible: a verb in flight may already have run at its
     * target (a CAS that claimed something), so abandoning it would leave the caller
     * not knowing what happened. An interrupt that arrives during the wait is kept
     * (the thread's interrupt status is set again when this returns or throws), and
     * the wait stays bounded by {@code wait}; interruptible callers check the status
     * where stopping is safe, between verbs.
     *
     * @throws BlockingCallOnTransportThreadException when called on a transport thread,
     *         where waiting could deadlock, or in a callback a transport's delivery runs
     *         ({@link WaitHelp#delivering()}) (unless the future is already complete)
     */
    public static <T> T await(CompletableFuture<T> future, Duration wait) {
        if (!future.isDone()) {
            if (TransportThreads.isTransportThread()) {
                throw new BlockingCallOnTransportThreadException(Thread.currentThread().getName());
            }
            WaitHelp.checkNotDelivering();
        }
        long deadline = System.nanoTime() + wait.toNanos();
        if (!future.isDone()) {
            // what this thread left for its waiter (tcp: reads held on a lane) goes first, within this wait
            WaitHelp.beforeWait(wait.toNanos(), future);
        }
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return future.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (InterruptedException e) {
                    interrupted = true; // get() cleared the status: wait on for the verb, set it again after
                }
            }
        } catch (ExecutionException | CompletionException e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            if (cause instanceof DsmException de) {
                throw de.forCaller();
            }
            if (cause instanceof RuntimeException re) {
                throw re;
            }
            throw DsmException.internal("operation failed: " + cause, cause);
        } catch (TimeoutException e) {
            // the call's deadline passed while the verb was issued: it may still run
            throw new DsmTimeoutException("await (the call's deadline passed with the verb issued)", -1, wait);
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
