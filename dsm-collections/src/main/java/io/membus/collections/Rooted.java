package io.membus.collections;

/**
 * A handle on a named structure: its root, and the {@link Lifecycle.Life} that tells
 * it when the structure was destroyed.
 *
 * <p><b>Note:</b> implementations are thread-safe; the life is set once (a volatile
 * field) by {@link DsmCollections} before the handle is handed out.
 */
interface Rooted {
    /** The structure's root (name, kind, descriptor, block). */
    Root root();

    /** Set by {@link DsmCollections} when it opens the handle. */
    void life(Lifecycle.Life life);

    /** The handle's life, or null for a handle not opened through {@link DsmCollections}. */
    Lifecycle.Life life();

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
