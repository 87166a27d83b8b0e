package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.Placement;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;

import static io.membus.collections.MapLayout.*;

/**
 * A map's chain of tables as this node knows it, and the slot words in them: making a
 * table, reading a table's header once ({@link MapTable}), the root's current table
 * (re-read when this node's copy is older than half the grace), a table's successor,
 * reads of slot words, and the one write a slot ever gets: {@link #install}, a CAS of
 * its word after its inline area was written. Whoever decides which word a slot gets
 * ({@link MapMutation}, {@link MapMigration}) calls {@link #install}.
 *
 * <p><b>Note:</b> thread-safe: tables are cached in a concurrent map (a header never
 * changes once written, so two threads reading it agree); the root view is one volatile
 * record, replaced whole. Memory ordering is that of the verbs: an install's inline write
 * completes before its CAS is issued ({@link RemoteMemory#writeThenCompareAndSwap}).
 */
final class MapTables {
    private static final int ZERO_CHUNK = 64 << 10;

    private record RootView(MapTable table, long readAt) {
    }

    private final GlobalAllocator heap;
    private final RemoteMemory mem;
    /** Pointer of the root layout ({@link MapLayout}). */
    private final long root;
    private final long graceNanos;
    private final int window;
    /** Bytes of the inline area beside each slot of a table whose header names none (0: the map has none). */
    private final int inline;
    private final Reclaimer reclaimer;
    private final ConcurrentHashMap<Long, MapTable> tables = new ConcurrentHashMap<>();
    private volatile RootView rootView;

    MapTables(GlobalAllocator heap, long root, long graceNanos, int window, int inline, Reclaimer reclaimer) {
        this.heap = heap;
        this.mem = heap.memory();
        this.root = root;
        this.graceNanos = graceNanos;
        this.window = window;
        this.inline = inline;
        this.reclaimer = reclaimer;
    }

    /**
     * Allocates and zeroes a table of {@code 1 << log2} home slots with their inline areas
     * (not yet reachable). A table that would be larger than the heap's largest object
     * ({@link GlobalAllocator#largestObject()}) with the map's {@code inline} areas gets the
     * largest areas that fit (a multiple of 8, at least 16 bytes), or none: a large map keeps
     * growing, and only its entries that no longer fit inline take a second round trip per
     * uncached get. The table's header records its areas ({@code TABLE_INLINE}).
     */
    static long newTable(GlobalAllocator heap, int log2, int window, int inline, long seq, Placement placement) {
        int total = (1 << log2) + window - 1;
        if (inline > 0) {
            long largest = heap.largestObject();
            if (tableBytes(total, inline) > largest) {
                long room = (largest - TABLE_SLOTS) / total - 8; // bytes per slot beside its word
                int fits = (int) Math.min(inline, Math.max(0, room)) & ~7;
                inline = fits >= 16 ? fits : 0;
            }
        }
        BlockRef ref = heap.allocate(tableBytes(total, inline), placement);
        long bytes = tableBytes(total, inline);
        RemoteMemory mem = heap.memory();
        byte[] zeros = new byte[(int) Math.min(ZERO_CHUNK, bytes)];
        for (long off = 0; off < bytes; off += zeros.length) {
            int n = (int) Math.min(zeros.length, bytes - off);
            mem.write(ref.payload() + off, zeros, 0, n);
        }
        byte[] h = new byte[TABLE_SLOTS];
        putLong(h, TABLE_LOG2, log2);
        putLong(h, TABLE_SEQ, seq);
        putLong(h, TABLE_BLOCK_HEADER, ref.header());
        putLong(h, TABLE_SEED, ThreadLocalRandom.current().nextLong());
        putLong(h, TABLE_INLINE, inline + 1L);
        mem.write(ref.payload(), h);
        return ref.payload();
    }

    /** Frees the table whose payload is at {@code payload}. */
    void freeTable(long payload) {
        long ptr = payload - HeapLayout.BLOCK_HEADER_LENGTH;
        long header = mem.readLong(payload + TABLE_BLOCK_HEADER);
        heap.free(BlockRef.of(ptr, header, 0));
    }

    MapTable table(long ptr) {
        MapTable t = tables.get(ptr);
        if (t != null) {
            return t;
        }
        byte[] h = mem.read(ptr, TABLE_SLOTS);
        int log2 = (int) getLong(h, TABLE_LOG2);
        if (log2 < 1 || log2 > 40) {
            throw DsmMapException.corrupted(RemotePtr.toString(ptr), "tableLog2=" + log2);
        }
        long own = getLong(h, TABLE_INLINE);
        if (own < 0 || own > MapLayout.MAX_INLINE + 1L) {
            throw DsmMapException.corrupted(RemotePtr.toString(ptr), "tableInline=" + (own - 1));
        }
        int areas = own == 0 ? inline : (int) own - 1;
        t = new MapTable(ptr, log2, getLong(h, TABLE_SEQ), getLong(h, TABLE_SEED), window, areas,
                getLong(h, TABLE_NEXT));
        MapTable prev = tables.putIfAbsent(ptr, t);
        return prev != null ? prev : t;
    }

    /** The root's table, re-read when this node's copy is older than half the grace. */
    MapTable rootTable() {
        RootView v = rootView;
        long now = System.nanoTime();
        if (v != null && now - v.readAt < graceNanos / 2) {
            return v.table;
        }
        return refreshRoot(now);
    }

    /** Reads the root's TABLE word now (the reclaimer learns how far the root has moved). */
    MapTable refreshRoot(long now) {
        MapTable t = table(mem.readLong(root + ROOT_TABLE));
        rootView = new RootView(t, now);
        reclaimer.rootAdvanced(t.seq);
        return t;
    }

    /** The table after {@code t}; 0-free: {@code null} when none was made yet. */
    MapTable nextOf(MapTable t) {
        long n = t.next;
        if (n == 0) {
            n = mem.readLong(t.ptr + TABLE_NEXT);
            if (n == 0) {
                return null;
            }
            t.next = n;
        }
        return table(n);
    }

    MapTable mustNext(MapTable t) {
        MapTable n = nextOf(t);
        if (n == null) {
            throw DsmMapException.corrupted(RemotePtr.toString(t.ptr), "a frozen slot but no next table");
        }
        return n;
    }

    /** Every table of the chain from the first, for destroy. */
    List<Long> allTables() {
        List<Long> out = new ArrayList<>();
        long p = mem.readLong(root + ROOT_FIRST_TABLE);
        while (p != 0) {
            out.add(p);
            p = mem.readLong(p + TABLE_NEXT);
        }
        return out;
    }

    long[] readWords(long ptr, int count) {
        byte[] b = mem.read(ptr, count * 8);
        long[] w = new long[count];
        for (int i = 0; i < count; i++) {
            w[i] = getLong(b, i * 8);
        }
        return w;
    }

    /**
     * CASes slot {@code index} of {@code t} from {@code expected} to {@code update}, which
     * names the entry of {@code key} and {@code value} (null for a removal, whose TOMB
     * changes no inline area). In a map with inline areas the slot's area is written
     * first — the copy for {@code update}, or a check word of 0 for an entry too large —
     * and the CAS runs only once that write is done: one lane round trip over tcp, the
     * CAS linked to its write ({@link RemoteMemory#writeThenCompareAndSwap}). Returns the
     * word the CAS found.
     */
    long install(MapTable t, int index, long expected, long update, byte[] key, byte[] value) {
        if (t.inline == 0 || value == null) {
            return mem.compareAndSwap(t.slot(index), expected, update);
        }
        return mem.writeThenCompareAndSwap(t.inlineArea(index), inlineBytes(t.inline, update, key, value), t.slot(index),
                expected, update);
    }

    /** The bytes of slot {@code word}'s inline area: a copy of the entry when it fits, else a check word of 0. */
    private static byte[] inlineBytes(int inline, long word, byte[] key, byte[] value) {
        if (!fitsInline(inline, key.length, value.length)) {
            return new byte[8]; // a check word no copy has (but with probability 2^-64): "no copy here"
        }
        byte[] b = new byte[INLINE_PREFIX + key.length + value.length];
        b[INLINE_KEY_LENGTH] = (byte) key.length;
        b[INLINE_VALUE_LENGTH] = (byte) value.length;
        System.arraycopy(key, 0, b, INLINE_DATA, key.length);
        System.arraycopy(value, 0, b, INLINE_DATA + key.length, value.length);
        putLong(b, INLINE_CHECK, inlineCheck(identity(word), b, INLINE_DATA, key.length, value.length));
        return b;
    }
}
