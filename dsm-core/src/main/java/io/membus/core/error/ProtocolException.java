package io.membus.core.error;

/**
 * A peer sent bytes that are not a valid frame (bad length, unknown opcode,
 * unsupported version, truncated). The connection is closed; nothing in the
 * frame was executed.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class ProtocolException extends DsmException {
    private static final long serialVersionUID = 1L;

    public ProtocolException(String peer, String detail) {
        super(ErrorCode.PROTOCOL, "protocol error: peer=" + peer + ", " + detail);
    }
}
