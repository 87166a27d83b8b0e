package io.membus.core.directory;

import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Names of shared objects: name to the remote pointer of the object's root (a
 * collection, a counter). Replicated by the cluster module, in memory in
 * {@link StaticDirectory}.
 *
 * <p>Naming: the plain methods block (at most the operation deadline, then a
 * typed failure); the {@code *Async} forms return a stage that completes the same
 * way and never block the caller. An implementation whose calls never wait (the
 * in-memory one) may keep the default {@code *Async} forms, which run the plain
 * method at once.
 *
 * <p><b>Note:</b> implementations are thread-safe; {@link #bind} and
 * {@link #unbind(String, long)} are atomic (first binder wins; an unbind compares
 * the bound pointer; cluster-wide in the replicated implementation).
 */
public interface NameRegistry {

    /** The pointer bound to {@code name}. */
    Optional<Long> lookup(String name);

    /**
     * The pointer bound to {@code name} as the registry's authoritative copy says now (in
     * the replicated implementation: read from a majority, never from this node's replica,
     * which may still hold a binding another node removed). For a caller that found a
     * binding whose object is gone: is the name still bound to it, bound anew, or free?
     */
    default Optional<Long> lookupLatest(String name) {
        return lookup(name);
    }

    /**
     * Binds {@code name} to {@code ptr} unless it is bound already.
     *
     * @return the pointer bound to the name afterwards ({@code ptr} if this call bound it)
     */
    long bind(String name, long ptr);

    /** Removes the binding; returns whether there was one. */
    boolean unbind(String name);

    /**
     * Removes the binding of {@code name} only if it is bound to {@code expectedPtr}
     * (compare-and-unbind, atomic like {@link #bind}): a name that a concurrent caller
     * already rebound to a new object is left alone. How a structure that is gone (its
     * root destroyed, or its node's memory lost) gives its name back.
     *
     * @return whether this call removed the binding
     */
    boolean unbind(String name, long expectedPtr);

    /** A snapshot of every binding. */
    Map<String, Long> bindings();

    /** {@link #lookup} without blocking the caller. */
    default CompletionStage<Optional<Long>> lookupAsync(String name) {
        return now(() -> lookup(name));
    }

    /** {@link #bind} without blocking the caller. */
    default CompletionStage<Long> bindAsync(String name, long ptr) {
        return now(() -> bind(name, ptr));
    }

    /** {@link #unbind} without blocking the caller. */
    default CompletionStage<Boolean> unbindAsync(String name) {
        return now(() -> unbind(name));
    }

    /** {@link #unbind(String, long)} without blocking the caller. */
    default CompletionStage<Boolean> unbindAsync(String name, long expectedPtr) {
        return now(() -> unbind(name, expectedPtr));
    }

    private static <T> CompletionStage<T> now(java.util.function.Supplier<T> call) {
        try {
            return CompletableFuture.completedStage(call.get());
        } catch (RuntimeException e) {
            return CompletableFuture.failedStage(e);
        }
    }
}
