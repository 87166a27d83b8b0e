package io.membus.coherence;

/**
 * Where a {@link RemoteRef} reports its operations (by kind: {@link RemoteRef#GET}, ...)
 * when it was opened by name through the facade ({@code Membus.ref}): the facade passes
 * the name's counters ({@code io.membus.collections.OperationStats}) with
 * {@link RemoteRef#metered}. A handle made without one reports to {@link #NONE}, which
 * reads no clock and counts nothing.
 *
 * <p>A timed operation calls {@link #begin()} before and {@link #end} after (in a
 * {@code finally}: failed operations are counted and timed too), and {@link #failed}
 * when it threw; an untimed one calls {@link #count}. A get served from the node's
 * cached copy also calls {@link #cacheHit()}.
 *
 * <p><b>Note:</b> implementations must be thread-safe and cheap (striped counters): every
 * thread using a handle calls them on its operation's path; they must not throw.
 */
public interface OperationMeter {

    /** Counts and times nothing; {@link #begin()} reads no clock. */
    OperationMeter NONE = new OperationMeter() {
        @Override
        public long begin() {
            return 0;
        }

        @Override
        public void end(int op, long began) {
        }

        @Override
        public void count(int op) {
        }

        @Override
        public void failed(int op) {
        }

        @Override
        public String toString() {
            return "OperationMeter.NONE";
        }
    };

    /** The start of a timed operation ({@link System#nanoTime()}, or 0 when nothing is timed). */
    long begin();

    /** One timed operation of kind {@code op}, begun at {@code began} ({@link #begin()}), ended now. */
    void end(int op, long began);

    /** One operation of kind {@code op}, not timed. */
    void count(int op);

    /** The operation of kind {@code op} just counted ({@link #end} or {@link #count}) failed with an exception. */
    void failed(int op);

    /**
     * The get just counted ({@link #count}) was served from this node's cached copy with no
     * verb: a cache hit of this object (the heap counts it node-wide too). Called on the
     * hit's path: one striped increment at most. Does nothing by default.
     */
    default void cacheHit() {
    }
}
