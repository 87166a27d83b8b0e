package io.membus.codec;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A value could not be encoded or decoded: an unregistered class, bytes that are
 * not a value of the codec (truncated, corrupt), or a structure opened with
 * another codec than it was created with. The message names the codec and the
 * problem as {@code key=value} pairs and says what to do.
 *
 * <p><b>Note:</b> immutable once thrown; thread-safe.
 */
public class CodecException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String codecId;

    public CodecException(String codecId, String message) {
        super(ErrorCode.CODEC, "codec: codec=" + codecId + ", " + message);
        this.codecId = codecId;
    }

    public CodecException(String codecId, String message, Throwable cause) {
        super(ErrorCode.CODEC, "codec: codec=" + codecId + ", " + message, cause);
        this.codecId = codecId;
    }

    /** The id of the codec that failed. */
    public String codecId() {
        return codecId;
    }
}
