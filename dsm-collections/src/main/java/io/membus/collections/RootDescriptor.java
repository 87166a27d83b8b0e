package io.membus.collections;

/**
 * Layout of a named structure's root: the payload of one allocator block, bound
 * by name in the {@link io.membus.core.directory.NameRegistry} (the name maps to
 * the block's header pointer). Written completely before the name is bound, never
 * changed afterwards except inside the body.
 *
 * <pre>
 *   0                   8                   16                  24        28        32
 *   +-------------------+-------------------+-------------------+---------+---------+
 *   | MAGIC "MBROOT01"  | block header word | block capacity    | kind    | descLen |
 *   +-------------------+-------------------+-------------------+---------+---------+
 *   | descriptor: descLen bytes of UTF-8, zero-padded to a multiple of 8             |
 *   +--------------------------------------------------------------------------------+
 *   | body (from bodyOffset(descLen), 8-aligned): the structure's own words          |
 *   +--------------------------------------------------------------------------------+
 * </pre>
 * All words little-endian. The header word and capacity let any node rebuild the
 * root's {@code BlockRef} from the bound pointer alone.
 *
 * <p><b>Note:</b> constants only; thread-safe.
 */
public final class RootDescriptor {
    /** "MBROOT01" read as a little-endian long. */
    public static final long MAGIC = 0x3130544f4f52424dL;
    /**
     * "MBDEAD01" read as a little-endian long: the magic word of a root that was destroyed
     * (CASed from {@link #MAGIC} by the one destroyer; its blocks are freed a grace later).
     */
    public static final long TOMBSTONE = 0x313044414544424dL;
    public static final int MAGIC_OFFSET = 0;
    public static final int BLOCK_HEADER_OFFSET = 8;
    public static final int CAPACITY_OFFSET = 16;
    public static final int KIND_OFFSET = 24;
    public static final int DESCRIPTOR_LENGTH_OFFSET = 28;
    public static final int DESCRIPTOR_OFFSET = 32;
    /** The longest descriptor a root holds, in UTF-8 bytes. */
    public static final int MAX_DESCRIPTOR_LENGTH = 4096;

    private RootDescriptor() {
    }

    /** Offset of the body for a descriptor of {@code descriptorLength} bytes. */
    public static int bodyOffset(int descriptorLength) {
        return DESCRIPTOR_OFFSET + ((descriptorLength + 7) & ~7);
    }
}
