package io.membus.cluster;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A name given to the name registry is null, empty or longer than it allows.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class InvalidNameException extends DsmException {
    private static final long serialVersionUID = 1L;

    public InvalidNameException(String name, int maxLength) {
        super(ErrorCode.BAD_LENGTH, "bad name: name=" + (name == null ? "null"
                : name.length() > 64 ? name.substring(0, 64) + "...(" + name.length() + " chars)" : "\"" + name + "\"")
                + ", allowed=1.." + maxLength + " characters; give the object a non-empty, shorter name");
    }
}
