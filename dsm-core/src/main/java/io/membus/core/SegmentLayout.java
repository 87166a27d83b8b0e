package io.membus.core;

/**
 * Layout of the header page at the start of a file-backed segment (a file under
 * /dev/shm for the {@code shm} transport, or any file for persistence). The data
 * area, which remote pointers address, starts at {@link #DATA_OFFSET}, so it is
 * page aligned. Native (non-file) segments have no header.
 *
 * <pre>
 *   0                   8                   16                  24
 *  +-------------------+---------+---------+---------+---------+
 *  | MAGIC "MBSEG001"  | version | flags   | node id | index   |
 *  +-------------------+---------+---------+---------+---------+
 *  24                  32                  40                  48
 *  +-------------------+-------------------+-------------------+
 *  | incarnation       | size (data bytes) | remote key        |
 *  +-------------------+-------------------+-------------------+
 *  48                  56                  64 ............ 4096
 *  +-------------------+-------------------+------------------+
 *  | owner pid         | state             | reserved (zeros) |
 *  +-------------------+-------------------+------------------+
 * </pre>
 *
 * All words little-endian. {@code state} is written last with a release store
 * ({@link #STATE_READY}) once the rest of the header is in place, and read with
 * an acquire load by peers that map the file.
 *
 * <p><b>Note:</b> constants only; thread-safe.
 */
public final class SegmentLayout {
    public static final long MAGIC = 0x313030474553424dL; // "MBSEG001" little-endian
    public static final int LAYOUT_VERSION = 1;

    public static final int MAGIC_OFFSET = 0;
    public static final int VERSION_OFFSET = 8;
    public static final int FLAGS_OFFSET = 12;
    public static final int NODE_ID_OFFSET = 16;
    public static final int INDEX_OFFSET = 20;
    public static final int INCARNATION_OFFSET = 24;
    public static final int SIZE_OFFSET = 32;
    public static final int REMOTE_KEY_OFFSET = 40;
    public static final int OWNER_PID_OFFSET = 48;
    public static final int STATE_OFFSET = 56;

    /** Header page size; the data area starts here. */
    public static final int DATA_OFFSET = 4096;

    public static final long STATE_INITIALISING = 0;
    public static final long STATE_READY = 1;
    public static final long STATE_CLOSED = 2;

    private SegmentLayout() {
    }
}
