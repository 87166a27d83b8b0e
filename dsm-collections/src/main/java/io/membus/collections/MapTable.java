package io.membus.collections;

import java.util.concurrent.atomic.AtomicBoolean;

import static io.membus.collections.MapLayout.TABLE_SLOTS;
import static io.membus.collections.MapLayout.inlineOffset;

/**
 * One hash table of a {@link DsmMap} as this node knows it: the immutable fields of its
 * header ({@link MapLayout}: size, sequence number, seed, inline areas) and, once seen,
 * its successor in the chain; the addresses of its slot words and inline areas.
 *
 * <p><b>Note:</b> thread-safe: the header fields are final; {@link #next} and
 * {@link #stalledSince} are volatile hints any thread may set (a table's NEXT word
 * changes once, from 0, so every value set is the one the remote word holds);
 * {@link #repairedTo} belongs to the thread holding {@link #repairing} (its compare-and-set
 * and release order the field's reads and writes between successive holders).
 */
final class MapTable {
    final long ptr;
    final int log2;
    final long seq;
    final long seed;
    final int window;
    /** Bytes of each slot's inline area (0: none). */
    final int inline;
    volatile long next;
    /** When this node first saw every range claimed but the migration unfinished (0: not seen). */
    volatile long stalledSince;
    /**
     * This node's repair sweep of a stalled migration (see {@code MapMigration.repairIfStalled}):
     * the slots before it were swept after the stall was seen. Read and written only by the
     * thread holding {@link #repairing}.
     */
    int repairedTo;
    /** Held by the one thread of this node sweeping the table in a repair. */
    final AtomicBoolean repairing = new AtomicBoolean();

    MapTable(long ptr, int log2, long seq, long seed, int window, int inline, long next) {
        this.inline = inline;
        this.ptr = ptr;
        this.log2 = log2;
        this.seq = seq;
        this.seed = seed;
        this.window = window;
        this.next = next;
    }

    int homes() {
        return 1 << log2;
    }

    int total() {
        return homes() + window - 1;
    }

    long slot(int i) {
        return ptr + TABLE_SLOTS + 8L * i;
    }

    /** The inline area beside slot {@code i} (a table with inline areas only). */
    long inlineArea(int i) {
        return ptr + inlineOffset(total(), inline, i);
    }
}
