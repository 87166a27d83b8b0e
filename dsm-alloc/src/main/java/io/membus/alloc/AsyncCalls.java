package io.membus.alloc;

import io.membus.core.error.DsmException;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * The threads of one {@link GlobalAllocator} that run its {@code *Async} forms, orphan
 * adoption and its size classes' refills ahead of need ({@link ClassPool}): at most {@value #THREADS} daemon threads ("membus-alloc-&lt;node&gt;", ending
 * when idle for 10 s) and {@value #QUEUE} calls waiting; past that a call fails at once
 * with a typed error saying the allocator is busy.
 *
 * <p><b>Note:</b> thread-safe (a {@link ThreadPoolExecutor}); a task's effects reach the
 * caller through its future.
 */
final class AsyncCalls {
    static final int THREADS = 4;
    static final int QUEUE = 4096;

    private final int self;
    private final ThreadPoolExecutor executor;

    AsyncCalls(int self) {
        this.self = self;
        this.executor = new ThreadPoolExecutor(THREADS, THREADS, 10, TimeUnit.SECONDS,
                new LinkedBlockingQueue<>(QUEUE), r -> {
                    Thread t = new Thread(r, "membus-alloc-" + self);
                    t.setDaemon(true);
                    return t;
                });
        this.executor.allowCoreThreadTimeOut(true);
    }

    /** Runs {@code task} on the allocator's threads; a full queue fails the stage at once. */
    <T> CompletableFuture<T> supply(Supplier<T> task) {
        try {
            return CompletableFuture.supplyAsync(task, executor);
        } catch (RejectedExecutionException e) {
            return CompletableFuture.failedFuture(DsmException.internal("allocator busy: node=" + self
                    + ", queued=" + QUEUE + ": too many *Async calls at once; wait for some to complete"
                    + " or call the blocking forms from threads of your own", e));
        }
    }

    /**
     * Runs {@code task} on the allocator's threads (a size class's refill ahead of need);
     * false, running nothing, when the queue is full or the allocator closed.
     */
    boolean execute(Runnable task) {
        try {
            executor.execute(task);
            return true;
        } catch (RejectedExecutionException e) {
            return false;
        }
    }

    /** No new call is taken; calls queued still run. */
    void shutdown() {
        executor.shutdown();
    }
}
