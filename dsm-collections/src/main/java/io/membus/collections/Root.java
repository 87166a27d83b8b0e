package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.core.RemotePtr;

/**
 * An opened root of a named structure: its name, block, kind, descriptor and where
 * its body starts. Structures address their words as {@code bodyPtr() + offset}.
 *
 * <p><b>Note:</b> immutable value; thread-safe.
 */
public final class Root {
    private final String name;
    private final BlockRef block;
    private final CollectionKind kind;
    private final String descriptor;
    private final int bodyOffset;

    Root(String name, BlockRef block, CollectionKind kind, String descriptor, int bodyOffset) {
        this.name = name;
        this.block = block;
        this.kind = kind;
        this.descriptor = descriptor;
        this.bodyOffset = bodyOffset;
    }

    public String name() {
        return name;
    }

    /** The root's block (the name is bound to its {@link BlockRef#ptr()}). */
    public BlockRef block() {
        return block;
    }

    public CollectionKind kind() {
        return kind;
    }

    /** The type descriptor, e.g. {@code longArray(length=1000)}. */
    public String descriptor() {
        return descriptor;
    }

    /** Remote pointer of body byte 0 (8-aligned). */
    public long bodyPtr() {
        return block.payload() + bodyOffset;
    }

    /** Payload offset of the body inside the root block. */
    public int bodyOffset() {
        return bodyOffset;
    }

    /** Body bytes available. */
    public long bodyLength() {
        return block.capacity() - bodyOffset;
    }

    /** "kind descriptor", as error messages show a type. */
    public String type() {
        return kind + " " + descriptor;
    }

    @Override
    public String toString() {
        return "Root{name=" + name + ", type=" + type() + ", at=" + RemotePtr.toString(block.ptr()) + "}";
    }
}
