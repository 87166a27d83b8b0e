package io.membus.core.directory;

import java.util.Map;
import java.util.Optional;

/**
 * Names of shared objects: name to the remote pointer of the object's root (a
 * collection, a counter). Replicated by the cluster module, in memory in
 * {@link StaticDirectory}.
 *
 * <p><b>Note:</b> implementations are thread-safe; {@link #bind} is atomic
 * (first binder wins, cluster-wide in the replicated implementation).
 */
public interface NameRegistry {

    /** The pointer bound to {@code name}. */
    Optional<Long> lookup(String name);

    /**
     * Binds {@code name} to {@code ptr} unless it is bound already.
     *
     * @return the pointer bound to the name afterwards ({@code ptr} if this call bound it)
     */
    long bind(String name, long ptr);

    /** Removes the binding; returns whether there was one. */
    boolean unbind(String name);

    /** A snapshot of every binding. */
    Map<String, Long> bindings();
}
