package io.membus.collections;

/**
 * The kinds of named structure, with the stable number each root records.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public enum CollectionKind {
    /** {@code DsmMap} (its root is laid out by the map). */
    MAP(1),
    /** {@link DsmAtomicLong}. */
    ATOMIC_LONG(2),
    /** {@link DsmLongArray}. */
    LONG_ARRAY(3),
    /** {@link DsmDoubleArray}. */
    DOUBLE_ARRAY(4),
    /** {@link DsmQueue}. */
    QUEUE(5),
    /** {@link DsmLock}. */
    LOCK(6),
    /**
     * A named coherent object ({@link io.membus.coherence.RemoteRef}, {@link DsmCollections#ref}):
     * the root body holds the object's two words (pointer, generation header).
     */
    REF(7);

    private final int id;

    CollectionKind(int id) {
        this.id = id;
    }

    /** The number stored in a root. */
    public int id() {
        return id;
    }

    /** The kind with number {@code id}, or {@code null}. */
    public static CollectionKind byId(int id) {
        for (CollectionKind k : values()) {
            if (k.id == id) {
                return k;
            }
        }
        return null;
    }
}
