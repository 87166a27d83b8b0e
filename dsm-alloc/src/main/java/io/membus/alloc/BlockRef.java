package io.membus.alloc;

import io.membus.core.RemotePtr;

/**
 * A reference to one allocated block: the remote pointer of its header, the exact
 * header word it was allocated with (which holds its generation), and its capacity
 * in payload bytes. The two words {@link #ptr()} and {@link #header()} are what to
 * store in remote memory to keep a reference there; {@link #of} rebuilds it.
 *
 * <p>A reference stays valid until its block is freed: from then on every read,
 * write or free through it fails ({@link UseAfterFreeException},
 * {@link DoubleFreeException}), on every node, because the block's header
 * generation has moved on.
 *
 * <p><b>Note:</b> immutable value; thread-safe: every field is final, so any
 * publication makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class BlockRef {
    private final long ptr;
    private final long header;
    private final long capacity;

    BlockRef(long ptr, long header, long capacity) {
        this.ptr = ptr;
        this.header = header;
        this.capacity = capacity;
    }

    /**
     * Rebuilds a reference from the two words stored by {@link #ptr()} and
     * {@link #header()}, with the capacity the allocator reported for it. Every use
     * checks the header against the block's. The capacity bounds every read and write
     * through the reference: for a small block it is checked here against what its
     * size class holds; for a large object it is trusted (pass the reported one).
     *
     * @throws InvalidBlockException when the capacity is negative or larger than the
     *                               block's size class holds
     */
    public static BlockRef of(long ptr, long header, long capacity) {
        if (capacity < 0) {
            throw new InvalidBlockException(ptr, "capacity=" + capacity + " is negative");
        }
        if (HeapLayout.kindOf(header) == HeapLayout.KIND_SMALL) {
            int cls = HeapLayout.blockClassOf(header);
            long max = cls < SizeClasses.count() ? SizeClasses.blockSize(cls) - HeapLayout.BLOCK_HEADER_LENGTH : -1;
            if (capacity > max) {
                throw new InvalidBlockException(ptr, "capacity=" + capacity + " is more than a block of class " + cls
                        + " holds (" + Math.max(0, max) + " bytes): pass the capacity allocate reported");
            }
        }
        return new BlockRef(ptr, header, capacity);
    }

    /** Remote pointer of the block's 8-byte header. */
    public long ptr() {
        return ptr;
    }

    /** Remote pointer of payload byte 0 (the header's pointer + 8). */
    public long payload() {
        return ptr + HeapLayout.BLOCK_HEADER_LENGTH;
    }

    /** The block header word this reference was allocated with. */
    public long header() {
        return header;
    }

    /** The generation this reference was allocated with. */
    public long generation() {
        return HeapLayout.generationOf(header);
    }

    /** Payload bytes: at least the size asked for. */
    public long capacity() {
        return capacity;
    }

    public int nodeId() {
        return RemotePtr.nodeId(ptr);
    }

    public int segmentIndex() {
        return RemotePtr.segmentIndex(ptr);
    }

    public boolean isLarge() {
        return HeapLayout.kindOf(header) == HeapLayout.KIND_LARGE;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof BlockRef r && r.ptr == ptr && r.header == header;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(ptr * 31 + header);
    }

    @Override
    public String toString() {
        return "BlockRef{" + RemotePtr.toString(ptr) + ", generation=" + generation() + ", capacity=" + capacity + "}";
    }
}
