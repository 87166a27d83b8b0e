package io.membus.core.error;

/**
 * Root of every failure Membus reports. Unchecked, like the failures of
 * {@code java.util.concurrent} collections; every subclass names its
 * {@link ErrorCode} and carries the facts of the failure as fields, and its
 * message is written as {@code key=value} pairs followed by what to do.
 *
 * <p><b>Note:</b> immutable once thrown; thread-safe.
 */
public class DsmException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;

    public DsmException(ErrorCode code, String message) {
        super(message);
        this.code = code;
    }

    public DsmException(ErrorCode code, String message, Throwable cause) {
        super(message, cause);
        this.code = code;
    }

    public ErrorCode code() {
        return code;
    }
}
