package io.membus.core.transport;

import io.membus.core.error.BlockingCallOnTransportThreadException;

import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;

/**
 * Work a thread left for whoever waits for its verbs, done by that thread before it blocks:
 * tcp holds a thread's asynchronous reads on a blocking lane until somebody waits for them
 * (its {@code LaneFlight}s), and a wait on any future — a verb's, or one a layer above made
 * from it (a routed verb's, an {@code allOf}) — must send them and read their answers first,
 * else it would wait for the transport's fallback reader. {@link VerbWait#await} calls
 * {@link #beforeWait(long, java.util.concurrent.Future)} with its own wait when the future it waits for is not done yet.
 *
 * <p>Two more hooks: {@link #whenCompleteOwnerWaits} attaches a relay to a verb's future
 * whose caller is expected to wait (a routed verb's wrapper: the transport need not find a
 * reader for it), and {@link #delivering()} tells a wait that the calling thread is
 * completing a transport's futures (it runs their callbacks, which must not block).
 *
 * <p><b>Note:</b> thread-safe. The registry is per thread (a {@link ThreadLocal}): only the
 * registering thread adds to and runs its own entries; an entry may be finished meanwhile by
 * another thread ({@link Pending#settled()} says so and {@link Pending#help} is then a
 * no-op). The registry keeps only unsettled entries: settled ones are dropped at every
 * {@link #register} and every {@link #beforeWait}, so it never holds more than the thread's
 * unsettled work. Memory ordering is the entries' own.
 */
public final class WaitHelp {
    /** A wait with no deadline ({@code get()}, {@code join()}): {@link Pending#help}'s {@code waitNanos}. */
    public static final long FOREVER = Long.MAX_VALUE;
    private static final ThreadLocal<java.util.ArrayList<Pending>> PENDING =
            ThreadLocal.withInitial(() -> new java.util.ArrayList<>(2));
    private static final ThreadLocal<int[]> DELIVERING = ThreadLocal.withInitial(() -> new int[1]);

    /** Work a waiter does first. */
    public interface Pending {
        /** Whether nothing is left to do (finished by a waiter or the transport). */
        boolean settled();

        /**
         * Does the work on the calling thread when nobody took it yet and it fits in
         * {@code waitNanos} ({@link #FOREVER}: bounded by the work's own deadlines only), else
         * makes sure another thread does it; never waits for work another thread does (the
         * waiter then waits for its own future only). A no-op once settled.
         */
        void help(long waitNanos);
    }

    /**
     * A future whose callers may say they will wait for it ({@link #whenCompleteOwnerWaits}):
     * a relay attached that way does not make its transport look for another thread to
     * complete it.
     */
    public interface Waitable<T> {
        /** {@code whenComplete(action)}, telling the transport that a waiter is expected. */
        void whenCompleteExpectingWaiter(BiConsumer<? super T, ? super Throwable> action);

        /**
         * A callback or a dependent was attached to a future made from this one (a routed
         * verb's wrapper): somebody may never wait, so the transport may look for a thread to
         * complete it.
         */
        void dependentAttached();
    }

    private WaitHelp() {
    }

    /** Registers {@code p} for the calling thread's next wait. */
    public static void register(Pending p) {
        java.util.ArrayList<Pending> l = PENDING.get();
        if (!l.isEmpty()) {
            l.removeIf(Pending::settled);
        }
        l.add(p);
    }

    /**
     * Helps the calling thread's registered work ({@link Pending#help}), in registration order,
     * each within what is left of {@code waitNanos} from now ({@link #FOREVER}: no bound of its
     * own), and then what callbacks it ran registered meanwhile; stops as soon as
     * {@code awaited} is done or the time is up. Never waits for work another thread does:
     * the caller then waits for {@code awaited} itself. Called by {@link VerbWait#await} (and
     * a routed verb's {@code get}/{@code join}) before it blocks; not on transport threads
     * (they register nothing).
     */
    public static void beforeWait(long waitNanos, java.util.concurrent.Future<?> awaited) {
        java.util.ArrayList<Pending> l = PENDING.get();
        if (l.isEmpty()) {
            return;
        }
        long deadline = waitNanos == FOREVER ? 0 : System.nanoTime() + waitNanos;
        java.util.ArrayList<Pending> kept = new java.util.ArrayList<>(2);
        try {
            while (!l.isEmpty()) { // each pass helps only what the previous one's callbacks registered
                Pending[] all = l.toArray(new Pending[0]);
                l.clear();
                for (int i = 0; i < all.length; i++) {
                    long left = waitNanos == FOREVER ? FOREVER : deadline - System.nanoTime();
                    if (left <= 0 || awaited.isDone()) {
                        for (int j = i; j < all.length; j++) { // kept for the next wait
                            if (!all[j].settled()) {
                                kept.add(all[j]);
                            }
                        }
                        return;
                    }
                    all[i].help(left);
                    if (!all[i].settled()) {
                        kept.add(all[i]); // another thread has it: the caller waits for its own future
                    }
                }
            }
        } finally {
            l.removeIf(Pending::settled);
            l.addAll(0, kept); // registration order: the older entries first
        }
    }

    /** Entries the calling thread's registry holds (unsettled ones, and settled ones not yet dropped); for tests. */
    public static int registered() {
        return PENDING.get().size();
    }

    /**
     * Attaches {@code action} to {@code future}; when the future is a transport's
     * {@link Waitable}, it is told that the caller will wait (a routed verb's wrapper, awaited
     * through {@link VerbWait#await}): no other thread is asked to complete it before a
     * bound of its own, since the waiter will.
     */
    @SuppressWarnings("unchecked")
    public static <T> void whenCompleteOwnerWaits(CompletableFuture<T> future,
                                                  BiConsumer<? super T, ? super Throwable> action) {
        if (future instanceof Waitable<?> w) {
            ((Waitable<T>) w).whenCompleteExpectingWaiter(action);
        } else {
            future.whenComplete(action);
        }
    }

    /**
     * Runs {@code body} marked as completing a transport's futures on this thread (tcp: the
     * answers of reads held on a lane, delivered on the thread that read them): a wait in one
     * of their callbacks fails at once ({@link #checkNotDelivering}), as it would on a
     * transport thread, instead of waiting for verbs the delivery holds back.
     */
    public static void delivering(Runnable body) {
        int[] depth = DELIVERING.get();
        depth[0]++;
        try {
            body.run();
        } finally {
            depth[0]--;
        }
    }

    /** Whether the calling thread is completing a transport's futures ({@link #delivering(Runnable)}). */
    public static boolean delivering() {
        return DELIVERING.get()[0] > 0;
    }

    /**
     * Throws when the calling thread runs a callback of a transport's delivery: a blocking
     * wait there is the same error as on a transport thread. Every blocking wait of the
     * transports' futures calls it when its future is not done yet ({@link VerbWait#await},
     * tcp's held reads' {@code get}/{@code join}, a routed verb's future).
     *
     * @throws BlockingCallOnTransportThreadException when {@link #delivering()}
     */
    public static void checkNotDelivering() {
        if (delivering()) {
            throw new BlockingCallOnTransportThreadException(Thread.currentThread().getName()
                    + " (in a callback of a tcp read it is completing)");
        }
    }
}
