package io.membus.samples.stress;

import java.util.List;

/**
 * Decides whether the history of one key is linearizable for a model (register,
 * counter, ...). The stress command depends on this interface only; the
 * implementation is the test kit's checker (dsm-test).
 *
 * <p><b>Note:</b> implementations are stateless and thread-safe.
 */
public interface Checker {

    /** The answer for one key. */
    enum Status { LINEARIZABLE, VIOLATION, UNKNOWN }

    /**
     * @param status what the checker found
     * @param detail for a violation, the operations that cannot be ordered; for unknown, why
     */
    record Verdict(Status status, String detail) {
    }

    /**
     * @param model  the workload's model
     * @param events the key's events, by time; an invocation without completion has an unknown outcome
     */
    Verdict check(String model, List<Event> events);
}
