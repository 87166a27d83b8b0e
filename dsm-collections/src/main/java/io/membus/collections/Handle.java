package io.membus.collections;

/**
 * The plumbing every named structure's handle shares, held by one object behind the
 * {@link Rooted} default methods: its {@link Root}, the {@link Lifecycle.Life} that
 * tells it when the structure was destroyed or its node's collections closed, and its
 * {@link OperationStats}. Each structure keeps only what is its own.
 *
 * <p><b>Note:</b> thread-safe: the root and stats are final; the life is a volatile
 * field set once by {@link DsmCollections} before the handle is handed out (a handle
 * built without it, in tests and benchmarks, checks nothing).
 */
final class Handle {
    private final Root root;
    private final OperationStats stats;
    private volatile Lifecycle.Life life;

    Handle(Root root, String... operations) {
        this(root, Lifecycle.what(root), operations);
    }

    /** {@code root} may be null (a map made by {@code DsmMap.create}): {@code what} names the structure then. */
    Handle(Root root, String what, String... operations) {
        this.root = root;
        this.stats = new OperationStats(what, operations);
    }

    Root root() {
        return root;
    }

    Lifecycle.Life life() {
        return life;
    }

    void life(Lifecycle.Life life) {
        this.life = life;
    }

    OperationStats stats() {
        return stats;
    }

    /** Fails once the structure is known destroyed or closed; reads its root when the last look is stale. */
    void check() {
        Lifecycle.Life l = life;
        if (l != null) {
            l.check();
        }
    }

    /** Fails once the structure is known destroyed or closed; no verb, no clock (a leased cache hit). */
    void checkDead() {
        Lifecycle.Life l = life;
        if (l != null) {
            l.checkDead();
        }
    }

    /** {@link #check()} as a value for the async forms: the failure, or null when alive. */
    RuntimeException failureNow() {
        try {
            check();
            return null;
        } catch (RuntimeException e) {
            return e;
        }
    }
}
