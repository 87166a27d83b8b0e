package io.membus.test.history;

/**
 * How an operation ended, as Jepsen records it.
 *
 * <p><b>Note:</b> an enum; thread-safe.
 */
public enum Outcome {
    /** It took effect and returned its output. */
    OK,
    /** It certainly did not take effect (e.g. refused before anything was sent). */
    FAIL,
    /**
     * Indeterminate: it may or may not have taken effect (a timeout, a lost
     * connection). The checker lets it take effect at any point after its invocation,
     * or never.
     */
    INFO
}
