package io.membus.collections;

import java.util.concurrent.locks.LockSupport;

/**
 * How a blocked {@code lock}/{@code take}/{@code put} waits between looks at remote
 * memory: parks for a pause that doubles from {@code min} to {@code max}, so a
 * long wait costs a few verbs per {@code max} (bounded polling), and a short one
 * reacts within microseconds. Honours a deadline and interruption.
 *
 * <p><b>Note:</b> not thread-safe: one per waiting call.
 */
final class Backoff {
    static final long MIN_NANOS = 20_000;
    static final long MAX_NANOS = 2_000_000;

    private final long max;
    private long pause;
    private boolean interrupted;

    Backoff() {
        this(MIN_NANOS, MAX_NANOS);
    }

    Backoff(long min, long max) {
        this.pause = min;
        this.max = max;
    }

    /**
     * Parks until the next look. Returns {@code false} without parking when
     * {@code deadline} ({@link System#nanoTime()} based) has passed.
     *
     * @param interruptible whether an interrupt ends the wait; if not, it is
     *                      remembered and restored by {@link #restoreInterrupt()}
     * @throws InterruptedException when interruptible and the thread is interrupted
     */
    boolean pause(long deadline, boolean interruptible) throws InterruptedException {
        long left = remaining(deadline);
        if (left <= 0) {
            return false;
        }
        LockSupport.parkNanos(Math.min(pause, left));
        pause = Math.min(max, pause * 2);
        if (Thread.interrupted()) {
            if (interruptible) {
                throw new InterruptedException();
            }
            interrupted = true;
        }
        return true;
    }

    /** Sets the thread's interrupt status again if an uninterruptible wait swallowed one. */
    void restoreInterrupt() {
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** No deadline: wait until it happens. */
    static final long NO_DEADLINE = Long.MIN_VALUE;

    /** A deadline {@code nanos} from now ({@link #NO_DEADLINE} for a wait of more than 100 years). */
    static long deadline(long nanos) {
        if (nanos > 100L * 365 * 24 * 3600 * 1_000_000_000L) {
            return NO_DEADLINE;
        }
        long d = System.nanoTime() + Math.max(0, nanos);
        return d == NO_DEADLINE ? d + 1 : d;
    }

    /** Nanoseconds left until {@code deadline} (Long.MAX_VALUE for none). */
    static long remaining(long deadline) {
        return deadline == NO_DEADLINE ? Long.MAX_VALUE : deadline - System.nanoTime();
    }
}
