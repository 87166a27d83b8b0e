package io.membus.collections;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A bad argument to a collection: a name that is empty or too long, a capacity or
 * length out of range, an index outside an array. Nothing is changed.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public class CollectionArgumentException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String argument;

    public CollectionArgumentException(String argument, Object value, String allowed) {
        super(ErrorCode.CONFIG, "bad collection argument: " + argument + "=" + value + ", allowed=" + allowed);
        this.argument = argument;
    }

    /** The argument's name. */
    public String argument() {
        return argument;
    }
}
