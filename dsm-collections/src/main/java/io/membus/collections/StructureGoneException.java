package io.membus.collections;

import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A named structure is gone: it was destroyed ({@code destroy}), or the memory that
 * held its root was lost (its node restarted without file-backed heap segments, so
 * the root's block is no longer allocated there). Thrown when a name is opened whose
 * root is gone, and by every operation of a handle whose structure was destroyed
 * (from at most {@link DsmCollections#destroyGrace() a quarter second} after the
 * destroy; never later than its blocks are freed). The message names the structure,
 * where its root was (node, segment, offset), why it is gone and what to do:
 * {@code destroy(name)} gives the name back, after which opening it creates a new,
 * empty structure.
 *
 * <p>Nothing was done: {@link #mayHaveRun()} is false.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class StructureGoneException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String name;
    private final long rootPtr;
    private final String reason;

    public StructureGoneException(String name, long rootPtr, String reason, String whatToDo) {
        super(ErrorCode.USE_AFTER_FREE, "structure gone: name=" + name + ", root=" + RemotePtr.toString(rootPtr)
                + " (node=" + RemotePtr.nodeId(rootPtr) + ", segment=" + RemotePtr.segmentIndex(rootPtr) + ", offset="
                + RemotePtr.offset(rootPtr) + "), reason=" + reason + "; " + whatToDo);
        this.name = name;
        this.rootPtr = rootPtr;
        this.reason = reason;
    }

    /** The structure's name. */
    public String name() {
        return name;
    }

    /** Where its root was. */
    public long rootPtr() {
        return rootPtr;
    }

    /** Why it is gone (destroyed, or what was found where its root was). */
    public String reason() {
        return reason;
    }

    /** Nothing was done. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
}
