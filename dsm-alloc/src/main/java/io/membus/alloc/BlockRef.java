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
     * {@link #header()}, with the capacity the allocator reported for it.
     * Nothing is checked here; every use checks the header against the block's.
     */
    public static BlockRef of(long ptr, long header, long capacity) {
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
