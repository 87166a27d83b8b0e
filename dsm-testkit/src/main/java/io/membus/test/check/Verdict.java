package io.membus.test.check;

/**
 * What the checker concluded about a history or one key's sub-history.
 *
 * <p><b>Note:</b> an enum; thread-safe.
 */
public enum Verdict {
    /** Some order of the operations, consistent with real time, satisfies the model. */
    LINEARIZABLE,
    /** No such order exists: a consistency violation. */
    VIOLATION,
    /** The search budget ran out before an answer: neither proven nor refuted. */
    UNKNOWN
}
