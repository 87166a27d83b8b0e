package io.membus.core.error;

/**
 * A transport cannot run on this machine: a native library, a device or a file
 * it needs is missing. The message says what is missing and what to install,
 * and which transport works instead.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class TransportUnavailableException extends DsmException {

    /** Refused before anything was sent or executed. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
    private static final long serialVersionUID = 1L;

    private final String transport;

    public TransportUnavailableException(String transport, String message) {
        super(ErrorCode.TRANSPORT_UNAVAILABLE, "transport unavailable: transport=" + transport + "; " + message);
        this.transport = transport;
    }

    public TransportUnavailableException(String transport, String message, Throwable cause) {
        super(ErrorCode.TRANSPORT_UNAVAILABLE, "transport unavailable: transport=" + transport + "; " + message, cause);
        this.transport = transport;
    }

    public String transport() {
        return transport;
    }
}
