package io.membus.collections;

/**
 * A handle on a named structure: its root, and the {@link Lifecycle.Life} that tells
 * it when the structure was destroyed, all held by its {@link Handle}.
 *
 * <p><b>Note:</b> implementations are thread-safe; the life is set once (a volatile
 * field of the handle) by {@link DsmCollections} before the handle is handed out.
 */
interface Rooted {
    /** The handle's shared plumbing (root, life, operation counts). */
    Handle handle();

    /** The structure's root (name, kind, descriptor, block). */
    default Root root() {
        return handle().root();
    }

    /** The name the structure is bound to (null for a map made by {@code DsmMap.create}, which has none). */
    default String name() {
        Root r = root();
        return r == null ? null : r.name();
    }

    /** Set by {@link DsmCollections} when it opens the handle. */
    default void life(Lifecycle.Life life) {
        handle().life(life);
    }

    /** The handle's life, or null for a handle not opened through {@link DsmCollections}. */
    default Lifecycle.Life life() {
        return handle().life();
    }

    /** The counts and times of this handle's operations, by kind (see {@link OperationStats}). */
    default OperationStats operationStats() {
        return handle().stats();
    }

    /** Destroys {@code handle}'s structure (see {@link NamedRoots#destroy(String, long, java.util.function.Consumer)}). */
    static boolean destroy(Rooted handle) {
        Lifecycle.Life life = handle.life();
        if (life == null) {
            throw new CollectionArgumentException("handle", String.valueOf(handle.root()),
                    "a handle opened through DsmCollections (or Membus), which knows the name registry");
        }
        return life.destroy();
    }
}
