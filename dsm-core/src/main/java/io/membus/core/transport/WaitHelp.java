package io.membus.core.transport;

import java.util.ArrayList;

/**
 * Work a thread left for whoever waits for its verbs, done by that thread before it blocks:
 * tcp holds a thread's asynchronous reads on a blocking lane until somebody waits for them
 * (its {@code LaneFlight}s), and a wait on any future — a verb's, or one a layer above made
 * from it (a routed verb's, an {@code allOf}) — must send them and read their answers first,
 * else it would wait for the transport's fallback reader. {@link VerbWait#await} calls
 * {@link #beforeWait()} when the future it waits for is not done yet.
 *
 * <p><b>Note:</b> the registry is per thread (a {@link ThreadLocal}): only the registering
 * thread adds to and runs its own entries; an entry may be finished meanwhile by another
 * thread ({@link Pending#settled()} says so and {@link Pending#finish()} is then a no-op).
 * Memory ordering is the entries' own.
 */
public final class WaitHelp {
    /** Entries kept before settled ones are pruned (a thread that never waits cannot grow the list). */
    private static final int PRUNE_AT = 32;
    private static final ThreadLocal<ArrayList<Pending>> PENDING = ThreadLocal.withInitial(ArrayList::new);

    /** Work a waiter does first. */
    public interface Pending {
        /** Whether nothing is left to do (finished by a waiter or the transport). */
        boolean settled();

        /** Does the work on the calling thread (may block up to the work's deadlines); a no-op once settled. */
        void finish();
    }

    private WaitHelp() {
    }

    /** Registers {@code p} for the calling thread's next wait. */
    public static void register(Pending p) {
        ArrayList<Pending> l = PENDING.get();
        if (l.size() >= PRUNE_AT) {
            l.removeIf(Pending::settled);
        }
        l.add(p);
    }

    /**
     * Finishes the calling thread's registered work, in registration order, and then what
     * callbacks it ran registered meanwhile, until none is left. Called by
     * {@link VerbWait#await} before it blocks; not on transport threads (they register nothing).
     */
    public static void beforeWait() {
        ArrayList<Pending> l = PENDING.get();
        while (!l.isEmpty()) {
            if (l.size() == 1) {
                l.remove(0).finish();
                continue;
            }
            Pending[] all = l.toArray(new Pending[0]);
            l.clear();
            for (Pending p : all) {
                p.finish();
            }
        }
    }
}
