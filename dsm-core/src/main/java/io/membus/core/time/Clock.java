package io.membus.core.time;

/**
 * Wall-clock time in microseconds since the Unix epoch, as the coherence layer's
 * leases use it. Leases compare one node's clock with another's, so the origin
 * must be the same on every node: {@link System#nanoTime()} is not (each JVM has
 * its own origin); {@link #system()} reads {@link java.time.Instant#now()}.
 *
 * <p>Every lease check reads the clock afresh: a coarse clock advanced by a ticker
 * thread is unsafe (a stalled ticker makes an expired lease look valid).
 *
 * <p><b>Note:</b> implementations are thread-safe and never go backwards by more
 * than the system clock does.
 */
@FunctionalInterface
public interface Clock {

    /** Microseconds since 1970-01-01T00:00:00Z. */
    long nowMicros();

    /**
     * A reading no earlier than {@link #nowMicros()} would give now (it may be later by
     * up to a millisecond), and possibly cheaper: for checks that must not run late, such
     * as a reader's "is my lease still valid" ({@code now < expiry - ε}), which an
     * over-estimate only makes end a little sooner. Never for a writer's "has that lease
     * run out", which needs the opposite bound: use {@link #nowMicros()} there.
     */
    default long nowMicrosAtLeast() {
        return nowMicros();
    }

    /** The system wall clock. */
    static Clock system() {
        return SystemClock.INSTANCE;
    }
}
