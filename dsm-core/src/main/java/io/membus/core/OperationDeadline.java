package io.membus.core;

import io.membus.core.error.DsmTimeoutException;

import java.time.Duration;

/**
 * One deadline for a whole blocking operation, kept per thread, so that an operation
 * made of several verbs (a coherent object's compare-and-set, a map's put, a lock's
 * timed acquire) ends by the deadline taken at its start and not by the sum of its
 * verbs' timeouts.
 *
 * <p>An operation opens a scope at its start and closes it in a {@code finally}:
 * <pre>{@code
 * long scope = OperationDeadline.enter(timeout);
 * try {
 *     ... blocking verbs ...
 * } finally {
 *     OperationDeadline.exit(scope);
 * }
 * }</pre>
 * Inside it every blocking verb of {@link RemoteMemory} (and a tcp blocking lane, and
 * the opening of one) waits at most until the scope's deadline, and a verb about to be
 * issued after it fails at once with {@link DsmTimeoutException#notSent} (it did not
 * run). Scopes nest: an inner scope keeps the earlier of its own deadline and the
 * enclosing one, and {@link #exit} restores the enclosing one. A thread with no scope
 * open gives each blocking verb its own operation timeout from the call.
 *
 * <p>{@link #MARGIN}: a blocking operation returns or fails by its deadline plus this
 * margin, plus any time the JVM does not run the waiting thread (a GC pause, an
 * overloaded machine). It is made of {@link #VERB_GRACE} (a waiting thread gives the
 * transport that long to report its own outcome, which knows whether the verb was
 * sent, before it gives up itself) and {@link #CLEANUP} (an operation that holds a
 * lock when its deadline passes gets that long to release it, so it does not leave
 * it for the lock timeout to recover).
 *
 * <p><b>Note:</b> thread-confined by design: the scope is a thread-local, entered and
 * left on one thread, and seen only by the blocking calls of that thread. Entering and
 * leaving allocate nothing (the saved deadline is a {@code long} the caller keeps).
 */
public final class OperationDeadline {
    /** How long a thread waits past a verb's deadline for the transport to report the verb's own outcome. */
    public static final Duration VERB_GRACE = Duration.ofMillis(50);
    /** The budget of the release an operation makes after its deadline passed while it held a lock. */
    public static final Duration CLEANUP = Duration.ofMillis(200);
    /** How late past its deadline a blocking operation may return: {@link #VERB_GRACE} + {@link #CLEANUP}. */
    public static final Duration MARGIN = VERB_GRACE.plus(CLEANUP);

    static final long VERB_GRACE_NANOS = VERB_GRACE.toNanos();
    private static final long NONE = Long.MIN_VALUE;
    private static final ThreadLocal<long[]> UNTIL = ThreadLocal.withInitial(() -> new long[]{NONE});

    private OperationDeadline() {
    }

    /**
     * Opens a scope whose deadline is {@code timeout} from now (or the enclosing scope's,
     * if earlier).
     *
     * @return what {@link #exit} needs to restore the enclosing scope
     */
    public static long enter(Duration timeout) {
        return enterNanos(timeout.toNanos());
    }

    /** {@link #enter(Duration)} in nanoseconds. */
    public static long enterNanos(long timeoutNanos) {
        long[] u = UNTIL.get();
        long previous = u[0];
        long mine = System.nanoTime() + timeoutNanos;
        u[0] = previous == NONE || mine - previous < 0 ? mine : previous;
        return previous;
    }

    /**
     * Opens a scope for cleanup: at least {@link #CLEANUP} from now, even past the
     * enclosing scope's deadline (a lock release must not be refused because the
     * operation that took the lock ran out of time), and no less than what the enclosing
     * scope still has (a cleanup made in good time keeps the operation's own budget: a
     * replicated change's answer waits for its copies, which can take longer than
     * {@link #CLEANUP} on a loaded machine). An operation still returns by its deadline
     * plus {@link #MARGIN}.
     */
    public static long enterCleanup() {
        long[] u = UNTIL.get();
        long previous = u[0];
        long floor = System.nanoTime() + CLEANUP.toNanos();
        u[0] = previous != NONE && previous - floor > 0 ? previous : floor;
        return previous;
    }

    /** Closes the scope {@link #enter} opened; {@code saved} is what it returned. */
    public static void exit(long saved) {
        UNTIL.get()[0] = saved;
    }

    /** Whether a scope is open on this thread. */
    public static boolean active() {
        return UNTIL.get()[0] != NONE;
    }

    /**
     * The deadline ({@code System.nanoTime()}) of something that would by itself end at
     * {@code start + timeoutNanos}: that, or the scope's deadline if earlier.
     */
    public static long until(long start, long timeoutNanos) {
        long own = start + timeoutNanos;
        long scope = UNTIL.get()[0];
        return scope != NONE && scope - own < 0 ? scope : own;
    }

    /** Nanoseconds left before {@link #until(long, long)} from now; at most {@code timeoutNanos}, maybe negative. */
    public static long remainingNanos(long timeoutNanos) {
        long now = System.nanoTime();
        return until(now, timeoutNanos) - now;
    }

    /** Whether the scope's deadline has passed (false when no scope is open). */
    public static boolean expired() {
        long scope = UNTIL.get()[0];
        return scope != NONE && System.nanoTime() - scope >= 0;
    }

    /**
     * Throws {@link DsmTimeoutException#notSent} when the scope's deadline has passed: what
     * a verb checks before it is issued.
     *
     * @param operation what was about to be done, for the message
     * @param node      the node it was for
     * @param timeout   the timeout the scope was opened with, for the message
     */
    public static void check(String operation, int node, Duration timeout) {
        if (expired()) {
            throw DsmTimeoutException.notSent(operation + " (the operation's deadline passed before it was sent)",
                    node, timeout);
        }
    }
}
