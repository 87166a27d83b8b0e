package io.membus.collections;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A name is bound to a structure of another type than the one asked for (another
 * kind, element codec, length or capacity), or to something that is not a
 * structure's root at all. Nothing is changed: the existing structure stays as it is.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public class CollectionTypeMismatchException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String name;
    private final String existing;
    private final String requested;

    public CollectionTypeMismatchException(String name, String existing, String requested) {
        super(ErrorCode.WRONG_TYPE, "collection type mismatch: name=" + name + ", existing=" + existing
                + ", requested=" + requested + ": open it with the existing type, or use another name");
        this.name = name;
        this.existing = existing;
        this.requested = requested;
    }

    /** The structure's name. */
    public String name() {
        return name;
    }

    /** The type the name is bound to (kind and descriptor), or what was found instead of a root. */
    public String existing() {
        return existing;
    }

    /** The type that was asked for. */
    public String requested() {
        return requested;
    }
}
