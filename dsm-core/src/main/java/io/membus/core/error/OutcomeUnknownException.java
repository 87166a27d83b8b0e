package io.membus.core.error;

/**
 * An operation of several verbs failed after it had begun to change remote state:
 * whether it took effect is unknown. The failure of the verb that stopped it is the
 * {@linkplain #getCause() cause}, and the error code is the cause's. What the
 * higher layers (collections, coherent objects) throw so that
 * {@link #mayHaveRun()} speaks for the whole operation: a failure they rethrow
 * as it is, with {@code mayHaveRun() == false}, means the operation certainly had
 * no effect; this one means read back before retrying.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public class OutcomeUnknownException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String operation;

    public OutcomeUnknownException(String operation, String what, Throwable cause) {
        super(cause instanceof DsmException d ? d.code() : ErrorCode.INTERNAL,
                "outcome unknown: operation=" + operation + ", on=" + what + ", cause=" + cause
                        + ": it failed after it had begun and may have taken effect; read back before retrying",
                cause);
        this.operation = operation;
    }

    /** The operation that failed, e.g. {@code offer}. */
    public String operation() {
        return operation;
    }

    @Override
    public boolean mayHaveRun() {
        return true;
    }
}
