package io.membus.core;

/**
 * Packs and unpacks remote pointers: one {@code long} that names a byte in the
 * memory of a Membus cluster, so that a pointer can itself be stored in remote
 * memory and swapped with a single compare-and-swap.
 *
 * <pre>
 *   63                48 47        40 39                                         0
 *  +--------------------+------------+--------------------------------------------+
 *  |   node id (16)     | segment(8) |              byte offset (40)              |
 *  +--------------------+------------+--------------------------------------------+
 * </pre>
 *
 * <ul>
 *   <li>node id: 1..65535; node id 0 is never assigned, so the pointer {@code 0}
 *       is {@link #NULL} and points nowhere;</li>
 *   <li>segment: the index of one of the node's exported segments, 0..255;</li>
 *   <li>offset: a byte offset inside that segment's data area, up to 1 TiB.</li>
 * </ul>
 *
 * A pointer does not carry the node's incarnation: the incarnation is part of
 * the connection (a connection is opened to {@code node id + incarnation}), and
 * of every {@link SegmentDescriptor}; a pointer used against a node that has
 * restarted is refused by the connection with
 * {@link io.membus.core.error.StaleIncarnationException}.
 *
 * <p><b>Note:</b> stateless and thread-safe.
 */
public final class RemotePtr {
    /** The pointer that points nowhere. */
    public static final long NULL = 0L;

    public static final int OFFSET_BITS = 40;
    public static final int SEGMENT_BITS = 8;
    public static final int NODE_BITS = 16;

    public static final int SEGMENT_SHIFT = OFFSET_BITS;
    public static final int NODE_SHIFT = OFFSET_BITS + SEGMENT_BITS;

    public static final long OFFSET_MASK = (1L << OFFSET_BITS) - 1;
    public static final int SEGMENT_MASK = (1 << SEGMENT_BITS) - 1;
    public static final int NODE_MASK = (1 << NODE_BITS) - 1;

    /** Largest node id a pointer can hold. */
    public static final int MAX_NODE_ID = NODE_MASK;
    /** Largest segment index a pointer can hold. */
    public static final int MAX_SEGMENT_INDEX = SEGMENT_MASK;
    /** Largest byte offset a pointer can hold (1 TiB - 1). */
    public static final long MAX_OFFSET = OFFSET_MASK;

    private RemotePtr() {
    }

    /**
     * Packs a pointer.
     *
     * @throws IllegalArgumentException when a field does not fit its bits, or the node id is 0
     */
    public static long pack(int nodeId, int segmentIndex, long offset) {
        if (nodeId < 1 || nodeId > MAX_NODE_ID) {
            throw new IllegalArgumentException("node id out of range: nodeId=" + nodeId + ", allowed=1.." + MAX_NODE_ID);
        }
        if (segmentIndex < 0 || segmentIndex > MAX_SEGMENT_INDEX) {
            throw new IllegalArgumentException("segment index out of range: segment=" + segmentIndex
                    + ", allowed=0.." + MAX_SEGMENT_INDEX);
        }
        if (offset < 0 || offset > MAX_OFFSET) {
            throw new IllegalArgumentException("offset out of range: offset=" + offset + ", allowed=0.." + MAX_OFFSET);
        }
        return ((long) nodeId << NODE_SHIFT) | ((long) segmentIndex << SEGMENT_SHIFT) | offset;
    }

    public static int nodeId(long ptr) {
        return (int) (ptr >>> NODE_SHIFT) & NODE_MASK;
    }

    public static int segmentIndex(long ptr) {
        return (int) (ptr >>> SEGMENT_SHIFT) & SEGMENT_MASK;
    }

    public static long offset(long ptr) {
        return ptr & OFFSET_MASK;
    }

    public static boolean isNull(long ptr) {
        return ptr == NULL;
    }

    /**
     * The pointer {@code delta} bytes further in the same segment.
     *
     * @throws IllegalArgumentException when the result leaves the offset field
     */
    public static long plus(long ptr, long delta) {
        long offset = offset(ptr) + delta;
        if (offset < 0 || offset > MAX_OFFSET) {
            throw new IllegalArgumentException("pointer arithmetic leaves the segment: ptr=" + toString(ptr)
                    + ", delta=" + delta);
        }
        return (ptr & ~OFFSET_MASK) | offset;
    }

    /** {@code node:segment+offset}, e.g. {@code 3:0+0x1f40}; {@code null} for {@link #NULL}. */
    public static String toString(long ptr) {
        if (ptr == NULL) {
            return "null";
        }
        return nodeId(ptr) + ":" + segmentIndex(ptr) + "+0x" + Long.toHexString(offset(ptr));
    }
}
