package io.membus.core;

import java.util.concurrent.locks.LockSupport;

/**
 * How a retry loop waits between its attempts: the one backoff of Membus. The first
 * {@code spins} pauses are {@link Thread#onSpinWait()}, the next {@code yields} are
 * {@link Thread#yield()}, then the thread parks: {@code steadyParks} parks of
 * {@code minParkNanos} (at least one), then parks that double from there up to the cap
 * {@code maxParkNanos} (a polling thread's idle strategy that stays at a short park for a
 * while before it slows down: rdma's completion poller); no pause ever runs past the
 * deadline, and a pause asked for after it returns {@code false} at once, so the caller
 * throws its own typed error (naming what it waited for) without waiting more.
 *
 * <pre>{@code
 * Backoff backoff = new Backoff(Backoff.SPIN_THEN_PARK, deadline);
 * while (!attempt()) {
 *     if (!backoff.pause()) {
 *         throw DsmTimeoutException.notSent(...);
 *     }
 * }
 * }</pre>
 *
 * <p>Interrupts: {@link #pause()} leaves the thread's interrupt flag as it finds it (an
 * interrupted thread's park returns at once, so its waits end by the deadline like
 * spins; a verb of the loop sees the flag as it would without the backoff);
 * {@link #pauseInterruptibly()} throws {@link InterruptedException};
 * {@link #pauseUninterruptibly()} takes the flag off so that parks park, remembers it,
 * and {@link #restoreInterrupt()} sets it again when the loop is done.
 *
 * <p>Deadlines are {@link System#nanoTime()} instants; {@link #NO_DEADLINE} waits for
 * ever (only for waits that something else bounds).
 *
 * <p><b>Note:</b> a {@link Policy} is immutable and thread-safe (share one per kind of
 * loop); a {@code Backoff} is not thread-safe: it is the state of one waiting call, made
 * by the thread that loops and used by it alone (its fields need no ordering).
 */
public final class Backoff {
    /** No deadline: pause for ever (use only where something else bounds the loop). */
    public static final long NO_DEADLINE = Long.MIN_VALUE;

    /**
     * Three spins, then parks from 1 µs doubling up to 1 ms: for a retry that another
     * thread's or node's next verb usually unblocks (a coherent object's validated read
     * or lock). The schedule the coherence layer has always used.
     */
    public static final Policy SPIN_THEN_PARK = new Policy(3, 0, 1_000, 1_000_000);

    /**
     * Parks from 20 µs doubling up to 2 ms: bounded polling of remote memory by a blocked
     * call ({@code lock}, {@code take}, {@code put}): a long wait costs a few verbs per
     * 2 ms, a short one reacts within microseconds.
     */
    public static final Policy POLL = new Policy(0, 0, 20_000, 2_000_000);

    /**
     * A backoff's schedule: {@code spins} spin-waits, then {@code yields} yields, then
     * {@code steadyParks} parks of {@code minParkNanos} (at least one), then parks doubling
     * from there up to {@code maxParkNanos}.
     *
     * <p><b>Note:</b> immutable, thread-safe.
     */
    public record Policy(int spins, int yields, long minParkNanos, long maxParkNanos, int steadyParks) {
        /**
         * @throws io.membus.core.error.DsmConfigException when a count is negative, the
         *         first park is not positive or the cap is below it
         */
        public Policy {
            if (spins < 0 || yields < 0 || steadyParks < 0) {
                throw new io.membus.core.error.DsmConfigException("backoff", spins + " spins, " + yields + " yields, "
                        + steadyParks + " steady parks", "counts of 0 or more");
            }
            if (minParkNanos <= 0 || maxParkNanos < minParkNanos) {
                throw new io.membus.core.error.DsmConfigException("backoff", minParkNanos + ".." + maxParkNanos
                        + " ns", "a first park above 0 ns and a cap at least as long");
            }
        }

        /** Parks that double from the first: {@code minParkNanos} once, then twice as long each time, up to the cap. */
        public Policy(int spins, int yields, long minParkNanos, long maxParkNanos) {
            this(spins, yields, minParkNanos, maxParkNanos, 0);
        }

        /** A fixed pause of {@code nanos} every time (a poll at a steady rate). */
        public static Policy every(long nanos) {
            return new Policy(0, 0, nanos, nanos);
        }
    }

    private final Policy policy;
    private final long deadline;
    private int pauses;
    private long park;
    private boolean interrupted;

    /** The state of one waiting call that ends at {@code deadlineNanos} ({@link System#nanoTime()}, or {@link #NO_DEADLINE}). */
    public Backoff(Policy policy, long deadlineNanos) {
        this.policy = policy;
        this.deadline = deadlineNanos;
        this.park = policy.minParkNanos();
    }

    /** A deadline {@code nanos} from now ({@link #NO_DEADLINE} for a wait of more than 100 years). */
    public static long deadlineIn(long nanos) {
        if (nanos > 100L * 365 * 24 * 3600 * 1_000_000_000L) {
            return NO_DEADLINE;
        }
        long d = System.nanoTime() + Math.max(0, nanos);
        return d == NO_DEADLINE ? d + 1 : d;
    }

    /** Nanoseconds left until {@code deadline} ({@link Long#MAX_VALUE} for {@link #NO_DEADLINE}; negative once passed). */
    public static long remaining(long deadline) {
        return deadline == NO_DEADLINE ? Long.MAX_VALUE : deadline - System.nanoTime();
    }

    /** Whether this call's deadline has passed. */
    public boolean expired() {
        return deadline != NO_DEADLINE && System.nanoTime() - deadline > 0;
    }

    /** The pauses taken so far (since the last {@link #reset()}; it stops counting at {@link Integer#MAX_VALUE}). */
    public int pauses() {
        return pauses;
    }

    /**
     * Starts the schedule again from its first spin: what a polling loop calls when it found
     * work, so that the next idle stretch spins before it parks (an idle strategy: shm's
     * message receiver, rdma's completion poller). The deadline stays.
     */
    public void reset() {
        pauses = 0;
        park = policy.minParkNanos();
    }

    /**
     * The next pause, leaving the interrupt flag alone. Returns {@code false} without
     * pausing once the deadline has passed.
     */
    public boolean pause() {
        if (expired()) {
            return false;
        }
        int n = pauses;
        if (n != Integer.MAX_VALUE) { // an idle poller with no deadline pauses for ever: never wrap to spinning
            pauses = n + 1;
        }
        long parks = (long) n - policy.spins() - policy.yields(); // this pause's index among the parks
        if (n < policy.spins()) {
            Thread.onSpinWait();
        } else if (parks < 0) {
            Thread.yield();
        } else {
            LockSupport.parkNanos(Math.min(park, Math.max(1, remaining(deadline))));
            if (parks + 1 >= policy.steadyParks()) {
                park = Math.min(policy.maxParkNanos(), park * 2);
            }
        }
        return true;
    }

    /** How long the next park of this call is (whether or not the next pause parks). */
    public long nextParkNanos() {
        return park;
    }

    /**
     * {@link #pause()}, then throws if the thread was interrupted (before or during it; the
     * flag is cleared, as {@link InterruptedException} promises).
     */
    public boolean pauseInterruptibly() throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        boolean paused = pause();
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        return paused;
    }

    /**
     * {@link #pause()} with the interrupt flag taken off first (so that a park parks) and
     * remembered; {@link #restoreInterrupt()} sets it again.
     */
    public boolean pauseUninterruptibly() {
        interrupted |= Thread.interrupted();
        boolean paused = pause();
        interrupted |= Thread.interrupted();
        return paused;
    }

    /** Whether {@link #pauseUninterruptibly()} took an interrupt off the flag (not yet restored). */
    public boolean tookInterrupt() {
        return interrupted;
    }

    /** Sets the thread's interrupt flag again if {@link #pauseUninterruptibly()} took one. */
    public void restoreInterrupt() {
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
