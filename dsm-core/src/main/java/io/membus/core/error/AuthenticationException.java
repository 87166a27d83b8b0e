package io.membus.core.error;

/**
 * A peer failed authentication (wrong cluster secret, bad handshake, wrong node
 * identity). The connection is closed; none of its frames were executed.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class AuthenticationException extends DsmException {

    /** Refused before anything was sent or executed. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
    private static final long serialVersionUID = 1L;

    public AuthenticationException(String peer, String detail) {
        super(ErrorCode.AUTHENTICATION, "authentication failed: peer=" + peer + ", " + detail
                + "; every node of a cluster must be configured with the same cluster secret");
    }
}
