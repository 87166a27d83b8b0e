package io.membus.collections;

import io.membus.alloc.HeapLayout;
import io.membus.alloc.SizeClasses;
import io.membus.core.RemotePtr;

/**
 * The bytes of a {@link DsmMap} in remote memory: its root block, its tables, the
 * slot words in them and the entry blocks they point to. Every word is
 * little-endian; every word that is CASed or fetch-and-added is 8-byte aligned.
 * docs/collections.md explains the protocol these bytes serve.
 *
 * <h2>Root block (payload of one allocator block; its pointer is the map's name)</h2>
 * <pre>
 *   0          8                 16               24               32             40            48            56          64
 *  +----------+--------+--------+----------------+----------------+--------------+-------------+-------------+-----------+
 *  | magic    | version| window | key codec hash | value codec    | grace (µs)   | TABLE       | FIRST TABLE | LEASES    |
 *  | MBMAP001 | (32)   | (32)*  | (of its id)    | hash           |              | (CAS)       |             | (0: none) |
 *  +----------+--------+--------+----------------+----------------+--------------+-------------+-------------+-----------+
 *   64                                                             64 + 8 * STRIPES
 *  +--------------------------------------------------------------+
 *  | size counters: one word per stripe (fetch-and-add, summed)    |
 *  +--------------------------------------------------------------+
 * </pre>
 * (*) the window in the low 16 bits; version 2 keeps the inline area's size (bytes per
 * slot) in the high 16 bits.
 * TABLE is the payload pointer of the newest fully populated table; it only moves
 * forward along the tables' NEXT chain. FIRST TABLE is where that chain starts (so
 * {@code destroy} finds every table). LEASES points to the table of lease stripes of a
 * map with leased reads ({@link MapLeases}), or is 0.
 *
 * <h2>Table block (payload)</h2>
 * <pre>
 *   0          8          16         24         32         40            48        64
 *  +----------+----------+----------+----------+----------+-------------+---------+------------------------------+
 *  | log2(n)  | NEXT     | CURSOR   | DONE     | SEQ      | block header| SEED    | slot[0 .. n + window - 1)     |
 *  |          | (CAS)    | (FAA)    | (FAA)    |          | (to free it)|         | 8 bytes each                  |
 *  +----------+----------+----------+----------+----------+-------------+---------+------------------------------+
 * </pre>
 * A map of layout version 2 ({@link #VERSION_INLINE}) has, after the slot words, one
 * <b>inline area</b> per slot ({@code inline} bytes each, recorded in the root beside the
 * window), holding a copy of the slot's entry when the entry is small:
 * <pre>
 *   0            8          9            10
 *  +------------+----------+------------+-----------+-------------+--------+
 *  | check word | key len  | value len  | key bytes | value bytes | unused |
 *  +------------+----------+------------+-----------+-------------+--------+
 * </pre>
 * The check word ({@link #inlineCheck}) binds the copy to the identity of the slot word
 * it copies; a writer writes the area <em>before</em> the CAS that installs that word
 * (an entry too big for it gets a check word of 0 instead), and a reader reads the
 * window's words first and its inline areas after them (two verbs, issued together, that
 * execute in order). docs/collections.md has the argument why a copy that checks is the
 * entry the word named.
 *
 * <p>A key's home slot is {@code mix(hash ^ SEED) mod n}; it lives in the first slot of
 * the window {@code [home, home + window)} that holds it (linear probing in a
 * bounded window; the {@code window - 1} slots past {@code n} make every window
 * contiguous, so one read fetches it). NEXT is the table being migrated into;
 * CURSOR hands out ranges of slots to migrate; DONE counts migrated slots.
 *
 * <h2>Slot word</h2>
 * <pre>
 *   63   62    61     60        53 52     47 46          35 34   32 31                          0
 *  +----+-----+------+------------+---------+--------------+-------+-----------------------------+
 *  |TOMB|MOVED|COPIED| fingerprint| class   | node id (12) | seg(3)| byte offset / 16 (32)        |
 *  +----+-----+------+------------+---------+--------------+-------+-----------------------------+
 *   0               empty (never held a key)
 *   MOVED only      empty and frozen by a migration (insert in the next table)
 *   TOMB            the key was removed; the entry still names it (the slot stays the key's)
 *   MOVED + pointer frozen: the key's state here is final, the next table has it
 *   COPIED          the word was copied by a migration: a frozen slot of an older table
 *                   still points to the same entry
 * </pre>
 * Class is the entry block's size class (so one read fetches the whole block), or
 * {@link #LARGE_CLASS} for a large object. The pointer fields hold a block pointer
 * of node ids 1..4095, heap segments 0..7 and offsets below 64 GiB (blocks start
 * 16-byte aligned); a block outside that is refused when the entry is written.
 *
 * <h2>Entry block (payload, written once before its slot word is installed; never changed)</h2>
 * <pre>
 *   0                8              16          20            24            32
 *  +----------------+--------------+-----------+-------------+-------------+-----------+-------------+
 *  | block header   | key hash     | key length| value length| check word  | key bytes | value bytes |
 *  | (as allocated) |              | (32)      | (32)        |             |           |             |
 *  +----------------+--------------+-----------+-------------+-------------+-----------+-------------+
 * </pre>
 * The copy of the block header lets a reader that fetched header and payload in one
 * read check that the block is still the entry it was written as, and rebuild the
 * checked {@code BlockRef} (pointer + header) that frees it. The check word is a
 * 64-bit mix of everything else: a read torn by a racing reuse fails it.
 *
 * <p><b>Note:</b> constants and pure functions; thread-safe, no shared state, so no
 * memory ordering applies. The words it describes are ordered by the verbs on them.
 */
public final class MapLayout {
    public static final long MAGIC = 0x31303050414D424DL; // "MBMAP001" little-endian
    /** Layout version of a map without inline entries (every table slot is one word). */
    public static final int VERSION = 1;
    /** Layout version of a map whose tables keep an inline copy of small entries beside their slots. */
    public static final int VERSION_INLINE = 2;
    /** Bytes of an inline area before its key and value bytes: check word, key length, value length. */
    public static final int INLINE_PREFIX = 10;
    /**
     * The largest inline area a map may ask for (bytes per slot, beside its word): the prefix
     * and a key and a value of 255 bytes each (their lengths are one byte each); 520.
     */
    public static final int MAX_INLINE = INLINE_PREFIX + 2 * 255;

    // root
    public static final int ROOT_MAGIC = 0;
    public static final int ROOT_VERSION_WINDOW = 8;
    public static final int ROOT_KEY_CODEC = 16;
    public static final int ROOT_VALUE_CODEC = 24;
    public static final int ROOT_GRACE = 32;
    public static final int ROOT_TABLE = 40;
    public static final int ROOT_FIRST_TABLE = 48;
    /** Payload pointer of the lease stripes' table ({@link MapLeases}); 0: the map has no leased reads. */
    public static final int ROOT_LEASES = 56;
    public static final int ROOT_COUNTERS = 64;
    public static final int STRIPES = 64;
    public static final int ROOT_LENGTH = ROOT_COUNTERS + 8 * STRIPES;

    // table
    public static final int TABLE_LOG2 = 0;
    public static final int TABLE_NEXT = 8;
    public static final int TABLE_CURSOR = 16;
    public static final int TABLE_DONE = 24;
    public static final int TABLE_SEQ = 32;
    public static final int TABLE_BLOCK_HEADER = 40;
    public static final int TABLE_SEED = 48;
    /**
     * The table's own inline area per slot, plus one (0: a table written before this field,
     * whose areas are the map's). A table too large for one allocation with the map's areas
     * is made with smaller ones, or none ({@code MapTables.newTable}).
     */
    public static final int TABLE_INLINE = 56;
    public static final int TABLE_SLOTS = 64;

    // entry
    public static final int ENTRY_HEADER_COPY = 0;
    public static final int ENTRY_HASH = 8;
    public static final int ENTRY_KEY_LENGTH = 16;
    public static final int ENTRY_VALUE_LENGTH = 20;
    public static final int ENTRY_CHECK = 24;
    public static final int ENTRY_DATA = 32;

    // inline area (beside slot i: at the table's inline base + i * inline bytes)
    public static final int INLINE_CHECK = 0;
    public static final int INLINE_KEY_LENGTH = 8;
    public static final int INLINE_VALUE_LENGTH = 9;
    public static final int INLINE_DATA = INLINE_PREFIX;

    // slot word
    public static final long TOMB = 1L << 63;
    public static final long MOVED = 1L << 62;
    public static final long COPIED = 1L << 61;
    private static final int FP_SHIFT = 53;
    private static final int CLASS_SHIFT = 47;
    private static final int NODE_SHIFT = 35;
    private static final int SEG_SHIFT = 32;
    public static final int LARGE_CLASS = 63;
    public static final int MAX_NODE = (1 << 12) - 1;
    public static final int MAX_SEGMENT = 7;
    public static final long MAX_OFFSET = 1L << 36;

    private MapLayout() {
    }

    // ---------------------------------------------------------------- slot words

    /** Whether the block at {@code ptr} can be named by a slot word. */
    public static boolean fitsSlot(long ptr) {
        int node = RemotePtr.nodeId(ptr);
        int seg = RemotePtr.segmentIndex(ptr);
        long off = RemotePtr.offset(ptr);
        return node >= 1 && node <= MAX_NODE && seg <= MAX_SEGMENT && off < MAX_OFFSET && (off & 15) == 0;
    }

    /** The slot word naming the entry block at {@code ptr} (of size class {@code cls}) for a key of hash {@code hash}. */
    public static long slot(long hash, int cls, long ptr) {
        long off = RemotePtr.offset(ptr) >>> 4;
        return ((long) fingerprint(hash) << FP_SHIFT) | ((long) (cls & 63) << CLASS_SHIFT)
                | ((long) RemotePtr.nodeId(ptr) << NODE_SHIFT) | ((long) RemotePtr.segmentIndex(ptr) << SEG_SHIFT) | off;
    }

    public static int fingerprint(long hash) {
        return (int) (hash >>> 56);
    }

    public static int fingerprintOf(long word) {
        return (int) (word >>> FP_SHIFT) & 0xff;
    }

    public static int classOf(long word) {
        return (int) (word >>> CLASS_SHIFT) & 63;
    }

    /** The entry block's header pointer named by {@code word}; {@code 0} when it names none. */
    public static long pointerOf(long word) {
        int node = (int) (word >>> NODE_SHIFT) & MAX_NODE;
        if (node == 0) {
            return 0;
        }
        int seg = (int) (word >>> SEG_SHIFT) & MAX_SEGMENT;
        long off = (word & 0xFFFF_FFFFL) << 4;
        return RemotePtr.pack(node, seg, off);
    }

    /** The word without its TOMB / MOVED / COPIED flags: fingerprint, class and pointer. */
    public static long identity(long word) {
        return word & ~(TOMB | MOVED | COPIED);
    }

    public static boolean isEmpty(long word) {
        return word == 0;
    }

    public static boolean isMovedEmpty(long word) {
        return word == MOVED;
    }

    public static boolean isMoved(long word) {
        return (word & MOVED) != 0;
    }

    public static boolean isTomb(long word) {
        return (word & TOMB) != 0;
    }

    public static boolean isCopied(long word) {
        return (word & COPIED) != 0;
    }

    /** Whether the word names a key (live or removed, frozen or not). */
    public static boolean hasKey(long word) {
        return pointerOf(word) != 0;
    }

    /** Offset in a table's payload of slot {@code i}'s inline area, for a table of {@code total} slots. */
    public static long inlineOffset(int total, int inline, int i) {
        return TABLE_SLOTS + 8L * total + (long) inline * i;
    }

    /** Payload bytes of a table of {@code total} slots, each with an inline area of {@code inline} bytes (0: none). */
    public static long tableBytes(int total, int inline) {
        return TABLE_SLOTS + (8L + inline) * total;
    }

    /** Whether an entry of these key and value lengths fits an inline area of {@code inline} bytes. */
    public static boolean fitsInline(int inline, int keyLength, int valueLength) {
        return inline > 0 && keyLength <= 255 && valueLength <= 255 && INLINE_PREFIX + keyLength + valueLength <= inline;
    }

    /**
     * The check word of an inline copy: a mix of the identity of the slot word it copies
     * (fingerprint, size class, entry pointer; no flags), the lengths and the bytes. A reader
     * accepts an inline area only when this matches the slot word it read before the area:
     * a copy of another entry, a torn copy or the marker of a large entry fails it.
     */
    public static long inlineCheck(long identity, byte[] data, int offset, int keyLength, int valueLength) {
        long h = mix(identity ^ 0x496e6c696e65436bL);
        h = mix(h ^ ((long) keyLength << 8 | valueLength));
        return mixBytes(h, data, offset, keyLength + valueLength);
    }

    /** Bytes to read for an entry of size class {@code cls} (header included); a large entry reads a first page. */
    public static int blockBytes(int cls) {
        return cls == LARGE_CLASS ? 4096 : SizeClasses.blockSize(cls);
    }

    // ---------------------------------------------------------------- hashing

    /** The 64-bit hash of a key's encoded bytes: the same in every JVM. */
    public static long hash(byte[] key) {
        return mixBytes(0x6d656d6275734b45L, key, 0, key.length);
    }

    /** The home slot of {@code hash} in a table of {@code 1 << log2} home slots with seed {@code seed}. */
    public static int home(long hash, long seed, int log2) {
        long z = (hash ^ seed) * 0x9E3779B97F4A7C15L;
        z ^= z >>> 29;
        return (int) (z >>> (64 - log2));
    }

    /** The check word of an entry: a mix of its header copy, hash, lengths and bytes. */
    public static long check(long headerCopy, long hash, byte[] data, int offset, int length) {
        long h = mix(headerCopy ^ 0x436865636b576f72L);
        h = mix(h ^ hash);
        h = mix(h ^ length);
        return mixBytes(h, data, offset, length);
    }

    static long mixBytes(long seed, byte[] b, int off, int len) {
        long h = seed ^ (len * 0x9E3779B97F4A7C15L);
        int i = off;
        int end = off + len;
        while (i + 8 <= end) {
            h = mix(h ^ getLong(b, i));
            i += 8;
        }
        long tail = 0;
        for (int s = 0; i < end; i++, s += 8) {
            tail |= (b[i] & 0xffL) << s;
        }
        return mix(h ^ tail ^ 0xA5A5A5A5L);
    }

    static long mix(long z) {
        z = (z ^ (z >>> 33)) * 0xff51afd7ed558ccdL;
        z = (z ^ (z >>> 33)) * 0xc4ceb9fe1a85ec53L;
        return z ^ (z >>> 33);
    }

    static long getLong(byte[] b, int i) {
        return (b[i] & 0xffL) | (b[i + 1] & 0xffL) << 8 | (b[i + 2] & 0xffL) << 16 | (b[i + 3] & 0xffL) << 24
                | (b[i + 4] & 0xffL) << 32 | (b[i + 5] & 0xffL) << 40 | (b[i + 6] & 0xffL) << 48 | (b[i + 7] & 0xffL) << 56;
    }

    static int getInt(byte[] b, int i) {
        return (b[i] & 0xff) | (b[i + 1] & 0xff) << 8 | (b[i + 2] & 0xff) << 16 | (b[i + 3] & 0xff) << 24;
    }

    static void putLong(byte[] b, int i, long v) {
        for (int k = 0; k < 8; k++) {
            b[i + k] = (byte) (v >>> (8 * k));
        }
    }

    static void putInt(byte[] b, int i, int v) {
        for (int k = 0; k < 4; k++) {
            b[i + k] = (byte) (v >>> (8 * k));
        }
    }

    /** The block header a raw 8-byte word read at block address {@code ptr} holds. */
    static long unsealHeader(long raw, long ptr) {
        return HeapLayout.unseal(raw, ptr);
    }
}
