package io.membus.test.nemesis;

/**
 * One fault a {@link Nemesis} started and that holds until {@link #heal()}.
 *
 * <p><b>Note:</b> {@link #heal()} is idempotent and may be called from any thread.
 */
public interface Fault extends AutoCloseable {

    /** {@code partition}, {@code kill}, {@code pause}, {@code delay}, {@code drop} or {@code skew}. */
    String kind();

    /** What it hit, for reports: e.g. {@code [1] | [2, 3]} or {@code node 2}. */
    String targets();

    /** Ends the fault (heals the partition, restarts the killed node, resumes the paused one, ...). */
    void heal();

    @Override
    default void close() {
        heal();
    }

    /**
     * A fault whose {@link #heal()} runs {@code heal} once, however many threads call it
     * however often (the first caller runs it; later calls return at once, possibly
     * before the first finished).
     */
    static Fault of(String kind, String targets, Runnable heal) {
        java.util.concurrent.atomic.AtomicBoolean healed = new java.util.concurrent.atomic.AtomicBoolean();
        return new Fault() {
            @Override
            public String kind() {
                return kind;
            }

            @Override
            public String targets() {
                return targets;
            }

            @Override
            public void heal() {
                if (healed.compareAndSet(false, true)) {
                    heal.run();
                }
            }

            @Override
            public String toString() {
                return kind + " of " + targets;
            }
        };
    }
}
