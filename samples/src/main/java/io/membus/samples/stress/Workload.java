package io.membus.samples.stress;

import java.util.SplittableRandom;

/**
 * What one client of {@code membus stress} does: it draws its next operation and runs
 * it on a key. One instance per client thread.
 *
 * <p><b>Note:</b> confined to its client's thread.
 */
public interface Workload {

    /** An operation to run: see {@link Event} for what {@code a} and {@code b} mean per {@code f}. */
    record Call(String f, long a, long b) {
    }

    /** How a call ended when it threw nothing: OK or FAIL (certainly without effect), with its results. */
    record Outcome(Event.Type type, long a, long b) {
        static Outcome ok(long a, long b) {
            return new Outcome(Event.Type.OK, a, b);
        }
    }

    /** The model the history is checked against: register, counter, ... */
    String model();

    Call next(SplittableRandom random);

    /**
     * Runs the call on the key. A {@link io.membus.core.error.DsmException} means the
     * outcome is unknown (a read's: it had no effect).
     */
    Outcome run(int key, Call call);

    /** The key to use, given one drawn at random (a lock client must release the key it holds). */
    default int key(int drawn) {
        return drawn;
    }

    /**
     * Whether a failure of the call says for the whole operation whether it may have
     * run ({@link io.membus.core.error.DsmException#mayHaveRun()}): true for one verb,
     * and for the collection operations that keep that contract (a failure before
     * their first effect is rethrown as it is, a later one is an
     * {@link io.membus.core.error.OutcomeUnknownException}). Then a call refused before
     * it ran is a FAIL instead of indeterminate, which keeps the checker's search small.
     */
    default boolean preciseFailure(Call call) {
        return false;
    }

    /** Whether the call changes nothing, so an exception from it is a FAIL rather than INFO. */
    default boolean readOnly(Call call) {
        return call.f().equals("read");
    }
}
