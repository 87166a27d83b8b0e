package io.membus.alloc;

/**
 * The bytes of a heap segment: a header, a chunk table and the chunks. Offsets are
 * from byte 0 of the segment's data area; every word is little-endian and every
 * word that is CASed or fetch-and-added is 8-byte aligned.
 *
 * <h2>Segment header (64 bytes at offset 0)</h2>
 * <pre>
 *   0                   8                   16                  24                  32                  40
 *  +-------------------+---------+---------+-------------------+-------------------+-------------------+---- - -
 *  | magic "MBHEAP01"  | version | chunk   | chunk count       | data start        | check word        | reserved
 *  |                   | (32)    | shift   |                   | (offset of chunk  | (mix of the words |
 *  |                   |         | (32)    |                   |  0, 64-aligned)   |  before it)       |
 *  +-------------------+---------+---------+-------------------+-------------------+-------------------+---- - -
 *
 *  0        64                                  hintsOffset          dataStart
 *  +--------+-----------------------------------+--------------------+---------+---------+- - -
 *  | header | chunk table (32 bytes per chunk)  | hint bitmap (1 bit | chunk 0 | chunk 1 |
 *  |        |                                   |  per chunk, words) |         |         |
 *  +--------+-----------------------------------+--------------------+---------+---------+- - -
 * </pre>
 * The magic word is written last when formatting: a reader that sees it sees the
 * rest. A header with the magic but a wrong version, check word or geometry is
 * corrupted ({@link HeapCorruptedException}).
 *
 * <h2>Chunk table (32 bytes per chunk, from offset 64)</h2>
 * <pre>
 *   word 0  STATE     63    60 59       52 51            36 35  32 31                              0
 *                    +--------+-----------+----------------+------+--------------------------------+
 *                    | state  | class (8) | owner node (16)| P rsv|         epoch (32)             |
 *                    +--------+-----------+----------------+------+--------------------------------+
 *                    state: 0 FREE, 1 SMALL (blocks of one size class), 2 LARGE_HEAD, 3 LARGE_TAIL
 *                    P (bit 32): a SMALL claim not finished yet: the other words may still be the
 *                    previous claim's; only the owner touches the entry, and it either finishes the
 *                    claim or rolls it back to FREE (a claim whose CAS or reset timed out)
 *                    epoch: +1 on every claim; kept when a chunk goes back to FREE or is adopted
 *   word 1  BUMP      blocks carved from the chunk so far (fetch-and-add by the owner; may pass the capacity)
 *   word 2  FREE_HEAD 63      40 39                            0
 *                    +----------+-------------------------------+
 *                    | tag (24) | block index + 1 (40), 0 = empty|   a tagged Treiber stack
 *                    +----------+-------------------------------+
 *   word 3  COUNT     SMALL: blocks on the free list (+1 by a freer after its push, -n by the owner after a pop-all)
 *                    LARGE_HEAD: the number of chunks the object spans
 * </pre>
 *
 * <h2>Free-list hints (one bit per chunk, after the table)</h2>
 * A freer that pushes onto an empty free list sets its chunk's bit (CAS on the
 * bitmap word); the owner clears the bit before it takes the list. A set bit means
 * "the list may be non-empty": the owner finds freed blocks by reading the bitmap
 * (chunkCount / 8 bytes) instead of the whole table. The bits are hints only: no
 * safety property depends on them.
 *
 * <h2>Block header (8 bytes at the start of every block, sealed: see below)</h2>
 * <pre>
 *   63                                      24 23              8 7        0
 *  +------------------------------------------+-----------------+----------+
 *  | generation (40) = epoch (20) | count (20)| class or 0xFFFF | kind     |
 *  +------------------------------------------+-----------------+----------+
 *   kind: 0xA5 small block, 0x5A large object; the payload follows the header
 * </pre>
 * A fresh block of a chunk claimed at epoch {@code e} starts at generation
 * {@code e << 20}; every free adds one. A {@link BlockRef} carries the whole
 * header word it was allocated with.
 *
 * <p>The word in memory is the header <em>sealed</em> with its own address
 * ({@link #seal}: XOR with a mix of the pointer). A header value stored as data
 * (a reference kept in a collection's block) therefore never passes for a header at
 * any address: a stale reference whose address now lies inside another block's
 * payload cannot be validated by a copy of its own header sitting there.
 *
 * <p><b>Note:</b> constants and pure functions; thread-safe, no shared state, so no
 * memory ordering applies. The words it describes are ordered by the verbs on them.
 */
public final class HeapLayout {
    public static final long MAGIC = 0x3130504145484d42L; // "MBHEAP01" little-endian
    public static final int LAYOUT_VERSION = 2;

    public static final int MAGIC_OFFSET = 0;
    public static final int VERSION_OFFSET = 8;
    public static final int CHUNK_SHIFT_OFFSET = 12;
    public static final int CHUNK_COUNT_OFFSET = 16;
    public static final int DATA_START_OFFSET = 24;
    public static final int CHECK_OFFSET = 32;
    public static final int HEADER_LENGTH = 64;

    public static final int TABLE_OFFSET = HEADER_LENGTH;
    public static final int ENTRY_LENGTH = 32;
    public static final int STATE_WORD = 0;
    public static final int BUMP_WORD = 8;
    public static final int FREE_HEAD_WORD = 16;
    public static final int COUNT_WORD = 24;

    public static final int FREE = 0;
    public static final int SMALL = 1;
    public static final int LARGE_HEAD = 2;
    public static final int LARGE_TAIL = 3;

    public static final int BLOCK_HEADER_LENGTH = 8;
    public static final int KIND_SMALL = 0xA5;
    public static final int KIND_LARGE = 0x5A;
    public static final int LARGE_CLASS = 0xFFFF;
    public static final int GENERATION_COUNT_BITS = 20;
    public static final long GENERATION_COUNT_MASK = (1L << GENERATION_COUNT_BITS) - 1;
    public static final long GENERATION_MASK = (1L << 40) - 1;
    public static final long EPOCH_MASK = 0xFFFF_FFFFL;
    /** STATE word bit: a claim in progress (the BUMP/FREE_HEAD/COUNT words are not reset yet). */
    public static final long PENDING = 1L << 32;

    public static final int MIN_CHUNK_SHIFT = 12;
    public static final int MAX_CHUNK_SHIFT = 30;

    private static final int TAG_SHIFT = 40;
    private static final long INDEX_MASK = (1L << TAG_SHIFT) - 1;

    private HeapLayout() {
    }

    // ---- chunk table entry, STATE word

    public static long state(int state, int sizeClass, int owner, long epoch) {
        return ((long) state << 60) | ((long) (sizeClass & 0xff) << 52) | ((long) (owner & 0xffff) << 36)
                | (epoch & EPOCH_MASK);
    }

    public static int stateOf(long word) {
        return (int) (word >>> 60);
    }

    public static int classOf(long word) {
        return (int) (word >>> 52) & 0xff;
    }

    public static int ownerOf(long word) {
        return (int) (word >>> 36) & 0xffff;
    }

    public static boolean isPending(long word) {
        return (word & PENDING) != 0;
    }

    public static long epochOf(long word) {
        return word & EPOCH_MASK;
    }

    /** Offset of chunk {@code chunk}'s table entry. */
    public static long entryOffset(int chunk) {
        return TABLE_OFFSET + (long) chunk * ENTRY_LENGTH;
    }

    // ---- FREE_HEAD word

    public static long head(long tag, long blockIndexPlusOne) {
        return ((tag & 0xFF_FFFFL) << TAG_SHIFT) | (blockIndexPlusOne & INDEX_MASK);
    }

    public static long headTag(long head) {
        return head >>> TAG_SHIFT;
    }

    /** Block index + 1 of the top of the stack; 0 when empty. */
    public static long headIndex(long head) {
        return head & INDEX_MASK;
    }

    // ---- block header

    public static long blockHeader(long generation, int sizeClass, int kind) {
        return ((generation & GENERATION_MASK) << 24) | ((long) (sizeClass & 0xffff) << 8) | (kind & 0xff);
    }

    public static long generationOf(long header) {
        return header >>> 24;
    }

    public static int blockClassOf(long header) {
        return (int) (header >>> 8) & 0xffff;
    }

    public static int kindOf(long header) {
        return (int) header & 0xff;
    }

    /** The header word as stored at block address {@code ptr}. */
    public static long seal(long header, long ptr) {
        return header ^ addressMask(ptr);
    }

    /** The header held by the word {@code raw} stored at block address {@code ptr}. */
    public static long unseal(long raw, long ptr) {
        return raw ^ addressMask(ptr);
    }

    private static long addressMask(long ptr) {
        long z = (ptr ^ 0x4D42484541503032L) * 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 31)) * 0xBF58476D1CE4E5B9L;
        return z ^ (z >>> 29);
    }

    /** The first generation of a block carved from a chunk claimed at {@code epoch}. */
    public static long firstGeneration(long epoch) {
        return (epoch & 0xF_FFFFL) << GENERATION_COUNT_BITS;
    }

    /** The header after one more free; the class and kind stay. */
    public static long nextHeader(long header) {
        return blockHeader(generationOf(header) + 1, blockClassOf(header), kindOf(header));
    }

    /**
     * Whether a freed block's new header has used up its generation counts: such a
     * block is retired (never reused), so a generation never runs into the next epoch's.
     */
    public static boolean generationExhausted(long freedHeader) {
        return (generationOf(freedHeader) & GENERATION_COUNT_MASK) == GENERATION_COUNT_MASK;
    }

    // ---- header check word

    public static long checkWord(int version, int chunkShift, long chunkCount, long dataStart) {
        long h = MAGIC ^ ((long) version << 32 | chunkShift);
        h = h * 0x9E3779B97F4A7C15L + chunkCount;
        h = h * 0x9E3779B97F4A7C15L + dataStart;
        return h ^ (h >>> 29);
    }

    /** Chunks that fit in a data area of {@code size} bytes with chunks of {@code 1 << shift}. */
    public static int chunkCount(long size, int shift) {
        long chunk = 1L << shift;
        long n = Math.max(0, (size - HEADER_LENGTH) / (chunk + ENTRY_LENGTH + 1));
        while (dataStart(n + 1) + (n + 1) * chunk <= size) {
            n++;
        }
        while (n > 0 && dataStart(n) + n * chunk > size) {
            n--;
        }
        return (int) Math.min(n, Integer.MAX_VALUE);
    }

    /** Offset of the free-list hint bitmap, right after a table of {@code chunkCount} entries. */
    public static long hintsOffset(long chunkCount) {
        return TABLE_OFFSET + chunkCount * ENTRY_LENGTH;
    }

    /** 8-byte words of the hint bitmap: one bit per chunk. */
    public static int hintWords(long chunkCount) {
        return (int) ((chunkCount + 63) / 64);
    }

    /** Offset of chunk 0 for a table of {@code chunkCount} entries (after the hint bitmap, 64-aligned). */
    public static long dataStart(long chunkCount) {
        return (hintsOffset(chunkCount) + (long) hintWords(chunkCount) * 8 + 63) & ~63L;
    }
}
