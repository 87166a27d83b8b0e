package io.membus.coherence;

/**
 * The layout of a coherent object inside its allocator block (offsets from the
 * block's payload; the allocator's own 8-byte block header, with its generation, sits
 * just before offset 0).
 *
 * <pre>
 *   block ptr -> +---------------------------------------------------------------+
 *                | allocator block header (sealed generation | class | kind)     |
 *   payload+0    +---+----------------+---+-------------------------------------+
 *     HEADER     | L |  owner node 16 | S |            version 45               |
 *                +---+----------------+---+-------------------------------------+
 *     LEASE      |           lease expiry, wall-clock microseconds (UTC)         |
 *     SHARERS    |   bitmap: bit (n-1) set = node n may cache it (nodes 1..64)   |
 *     META       |   magic "MBCO" 32           |       slot capacity 32          |
 *     LOCKED_AT  |   wall-clock microseconds the current lock was taken at      |
 *   payload+40   +---------------------------------------------------------------+
 *     SLOT 0     | length 32 | flags 32 | bytes ... (slot capacity)             |
 *     SLOT 1     | length 32 | flags 32 | bytes ... (slot capacity)             |
 *                +---------------------------------------------------------------+
 * </pre>
 *
 * <ul>
 *   <li>{@code L}: the write lock (bit 63). {@code owner}: the node holding it.
 *       {@code S}: which slot is current. {@code version}: grows by one on every
 *       publish (and on every lock release or recovery), starting from a value
 *       derived from the block's allocator generation, so a reused block never
 *       repeats the header words of its previous object.</li>
 *   <li>A slot holds the value inline ({@code flags} = 0) when it fits the slot
 *       capacity, else ({@code flags} = 1) the two words of a separate allocator
 *       block ({@code ptr}, {@code header}) followed by its capacity: values larger
 *       than one block work.</li>
 * </ul>
 *
 * <p><b>Note:</b> constants and pure functions; thread-safe.
 */
public final class ObjectLayout {
    public static final int HEADER = 0;
    public static final int LEASE = 8;
    public static final int SHARERS = 16;
    public static final int META = 24;
    public static final int LOCKED_AT = 32;
    public static final int SLOTS = 40;
    /** Bytes before a slot's data: length (4) and flags (4). */
    public static final int SLOT_PREFIX = 8;
    /** Flags of a slot whose value lives in a block of its own. */
    public static final int OUT_OF_LINE = 1;
    /** Data bytes of an out-of-line slot: ptr, header, capacity. */
    public static final int OUT_OF_LINE_BYTES = 24;
    public static final int MAGIC = 0x4d42434f; // "MBCO"
    /** Nodes whose id is at most this can be sharers (one bit each). */
    public static final int MAX_SHARER_NODE = 64;

    private static final long LOCK = 1L << 63;
    private static final int OWNER_SHIFT = 47;
    private static final long OWNER_MASK = 0xffffL;
    private static final long SLOT_BIT = 1L << 46;
    private static final long VERSION_MASK = SLOT_BIT - 1;

    private ObjectLayout() {
    }

    public static boolean locked(long header) {
        return header < 0;
    }

    public static int owner(long header) {
        return (int) ((header >>> OWNER_SHIFT) & OWNER_MASK);
    }

    public static int slot(long header) {
        return (header & SLOT_BIT) != 0 ? 1 : 0;
    }

    public static long version(long header) {
        return header & VERSION_MASK;
    }

    public static long unlocked(int slot, long version) {
        return (slot == 1 ? SLOT_BIT : 0) | (version & VERSION_MASK);
    }

    /** {@code header} locked by {@code node}: same slot and version. */
    public static long lockedBy(long header, int node) {
        return LOCK | ((long) node & OWNER_MASK) << OWNER_SHIFT | (header & (SLOT_BIT | VERSION_MASK));
    }

    /** The first version of an object in a block of allocator generation {@code generation}. */
    public static long firstVersion(long generation) {
        return (generation & 0x3fffffL) << 23;
    }

    public static long meta(int slotCapacity) {
        return (long) MAGIC << 32 | (slotCapacity & 0xffffffffL);
    }

    public static int slotCapacityOf(long meta) {
        return (int) meta;
    }

    public static boolean isMeta(long meta) {
        return (int) (meta >>> 32) == MAGIC && (int) meta > 0;
    }

    /** Offset of slot {@code s}'s prefix, for slots of {@code slotCapacity} data bytes. */
    public static int slotOffset(int s, int slotCapacity) {
        return SLOTS + s * (SLOT_PREFIX + slotCapacity);
    }

    /** Payload bytes an object with this slot capacity needs. */
    public static int objectSize(int slotCapacity) {
        return SLOTS + 2 * (SLOT_PREFIX + slotCapacity);
    }

    /** The sharer bit of {@code node}, or 0 when the node is past the bitmap. */
    public static long sharerBit(int node) {
        return node >= 1 && node <= MAX_SHARER_NODE ? 1L << (node - 1) : 0;
    }
}
