package io.membus.collections;

import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;

import java.util.List;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

import static io.membus.collections.MapLayout.*;

/**
 * Growth of a {@link DsmMap} without stopping anyone: making the next table (one CAS on
 * the full table's NEXT word decides whose table it is), migrating ranges of slots into it
 * (a range claimed by fetch-and-add on the table's CURSOR; each slot frozen by one CAS,
 * its live key copied on), repairing a migration whose claimer died, moving the root's
 * TABLE word past fully migrated tables, and freeing every table of a destroyed map.
 * docs/collections.md, "Growth without stopping anyone", has the argument.
 *
 * <p><b>Note:</b> thread-safe: any number of threads on any number of nodes migrate at
 * once; every decision is a remote CAS or fetch-and-add (freezing and copying are
 * idempotent, so a range swept twice is harmless). This node's view of a table's successor
 * and stall time are volatile hints on {@link MapTable}; its repair progress there belongs
 * to the one thread of the node holding the table's repair flag. Migrating is work an
 * operation takes on only while enough of its deadline is left ({@link #helpIfTimeLeft});
 * every remote wait is one verb under the caller's operation deadline.
 */
final class MapMigration {
    /**
     * Slots per claim of the CURSOR: what one helping operation migrates. A range costs about
     * one round trip per slot (its freeze) and four or five per live key (read, copy), so 16 slots
     * are some 60 round trips: one range may be taken on by a put with half its deadline left on a
     * loaded machine. (It was 64, some 250 round trips: at load averages near 30 with 1 ms more per
     * verb a range took 0.4-1 s, and a put that helped with one on top of its own change outlived a
     * 3 s deadline, DsmMapGrowthDeadlineTest.)
     */
    static final int MIGRATE_RANGE = 16;

    private final GlobalAllocator heap;
    private final RemoteMemory mem;
    private final MapTables tables;
    private final SlotScan slots;
    private final Reclaimer reclaimer;
    private final long rootBlock;
    /** Pointer of the root layout ({@link MapLayout}). */
    private final long root;
    private final long graceNanos;
    private final int window;
    private final int inline;
    /** The map's live keys (the sum of the nodes' counters), which size the next table. */
    private final LongSupplier liveKeys;
    private final LongAdder repairs = new LongAdder();

    MapMigration(GlobalAllocator heap, MapTables tables, SlotScan slots, Reclaimer reclaimer, long rootBlock,
                 long root, long graceNanos, int window, int inline, LongSupplier liveKeys) {
        this.heap = heap;
        this.mem = heap.memory();
        this.tables = tables;
        this.slots = slots;
        this.reclaimer = reclaimer;
        this.rootBlock = rootBlock;
        this.root = root;
        this.graceNanos = graceNanos;
        this.window = window;
        this.inline = inline;
        this.liveKeys = liveKeys;
    }

    /**
     * Puts {@code word} (a frozen key's entry, whose value is {@code value}) into {@code t}
     * unless the key already reached it; the slot's inline area is written first.
     */
    void copyInto(MapTable t, byte[] key, long hash, long word, byte[] value) {
        long start = System.nanoTime();
        while (true) {
            SlotScan.Scan s;
            try {
                s = slots.scan(t, key, hash, start);
            } catch (SlotScan.Restart r) {
                start = System.nanoTime();
                continue;
            }
            switch (s.kind()) {
                case FOUND:
                    return;
                case EMPTY:
                    if (tables.install(t, s.index(), 0, word, key, value) == 0) {
                        return;
                    }
                    continue;
                case MOVED_EMPTY:
                    t = tables.mustNext(t);
                    continue;
                default:
                    if (tables.nextOf(t) == null) {
                        startResize(t);
                    }
                    t = tables.mustNext(t);
            }
        }
    }

    /** Makes the table after {@code t} (twice as large unless the live keys fill under a quarter of it). */
    void startResize(MapTable t) {
        if (tables.nextOf(t) != null) {
            return;
        }
        long live = liveKeys.getAsLong();
        int log2 = live * 4 >= t.homes() ? t.log2 + 1 : t.log2;
        // spread tables over the nodes with heaps (this node may have none)
        long fresh = MapTables.newTable(heap, log2, window, inline, t.seq + 1,
                Placement.byKey(MapLayout.mix(rootBlock ^ t.seq)));
        long witness = mem.compareAndSwap(t.ptr + TABLE_NEXT, 0, fresh);
        if (witness != 0) {
            tables.freeTable(fresh); // another node's table won
            t.next = witness;
        } else {
            t.next = fresh;
        }
    }

    /**
     * The resize's starter migrates ranges of {@code t} while more than three quarters of
     * its operation's deadline are left (checked before each range is claimed, so a starter
     * already late migrates none), then goes on with its own change in the next table; the
     * ranges left are migrated by the operations that meet a frozen slot, one range each
     * while half their deadline is left ({@link #helpIfTimeLeft}; docs/collections.md, "Growth
     * without stopping anyone").
     * Migrating every range in the starter's call made one put carry four or five round
     * trips per live key of the table: a large map's growth outlived the put's deadline
     * (seen with one backup, where every change costs more).
     *
     * @return the ranges this call migrated
     */
    int migrateWhileTimeLeft(MapTable t) {
        long keep = mem.operationTimeout().toNanos() * 3 / 4; // a range may take a while: stop early
        int ranges = 0;
        while (OperationDeadline.remainingNanos(Long.MAX_VALUE / 4) > keep && helpMigrate(t)) {
            ranges++;
        }
        return ranges;
    }

    /**
     * Helps the migration of {@code t} with one range when more than half of the calling
     * operation's deadline is left; an operation already that late (slow verbs, restarts) helps
     * with none and leaves the range to the next one, so helping never spends the time its own
     * change needs. Every range is migrated by some operation that had the time (or a repair).
     *
     * @return whether a range was migrated
     */
    boolean helpIfTimeLeft(MapTable t) {
        long keep = mem.operationTimeout().toNanos() / 2;
        return OperationDeadline.remainingNanos(Long.MAX_VALUE / 4) > keep && helpMigrate(t);
    }

    /** Migrates ranges of {@code t} until none is left to claim. */
    void migrateAll(MapTable t) {
        while (helpMigrate(t)) {
            // keep going
        }
    }

    /** Claims and migrates one range of {@code t}'s slots; false when every range was claimed. */
    boolean helpMigrate(MapTable t) {
        if (tables.nextOf(t) == null) {
            return false;
        }
        int total = t.total();
        long claim = mem.fetchAndAdd(t.ptr + TABLE_CURSOR, MIGRATE_RANGE);
        if (claim >= total) {
            repairIfStalled(t);
            return false;
        }
        int from = (int) claim;
        int to = (int) Math.min(total, claim + MIGRATE_RANGE);
        long[] w = tables.readWords(t.slot(from), to - from);
        for (int i = from; i < to; i++) {
            migrateSlot(t, i, w[i - from]);
        }
        long done = mem.fetchAndAdd(t.ptr + TABLE_DONE, to - from) + (to - from);
        if (done >= total) {
            advanceRoot();
        }
        return true;
    }

    /**
     * Freezes slot {@code i} of {@code t} (holding {@code w} when read) and copies a live
     * key into the next table. Idempotent: a slot frozen before is only (re-)copied, so
     * a repair sweep may run it again over a range whose claimer died.
     */
    private void migrateSlot(MapTable t, int i, long w) {
        while (!isMoved(w)) {
            long frozen = w == 0 ? MOVED : w | MOVED;
            long witness = mem.compareAndSwap(t.slot(i), w, frozen);
            if (witness != w) {
                w = witness;
                continue;
            }
            if (isTomb(w)) {
                reclaimer.retireAfterTable(t.seq, pointerOf(w)); // only the freezer retires it
                return;
            }
            w = frozen;
        }
        if (!hasKey(w) || isTomb(w)) {
            return;
        }
        int failures = 0;
        while (true) {
            try {
                SlotScan.Entry e = slots.readEntry(w, System.nanoTime());
                copyInto(tables.mustNext(t), e.key(), e.hash(), identity(w) | COPIED, e.value());
                return;
            } catch (SlotScan.Restart r) {
                // a frozen live entry is not retired before the root passes t: a restart here is a slow read
                if (++failures > SlotScan.MAX_RESTARTS) {
                    throw DsmMapException.corrupted(RemotePtr.toString(t.slot(i)), "frozen entry never checks");
                }
            }
        }
    }

    /**
     * Every range of {@code t} was claimed but the migrated count stays short: a
     * claimer died (or its verbs failed) part-way. After a while (four graces, so a
     * slow but live claimer usually finishes first), sweep the whole table again —
     * freezing and copying are idempotent — then declare it migrated.
     *
     * <p>The sweep is spread over this node's operations like the migration itself: one
     * thread of the node at a time sweeps ranges from where the node's last sweep stopped
     * ({@link MapTable#repairedTo}), while more than half of its operation's deadline is left,
     * and the operation that sweeps the last range sets DONE. A slot swept by an earlier
     * operation stays swept (a frozen slot is final and its key was copied), so the sweep
     * covers every slot after the stall was seen, as one operation's would. (One operation
     * swept the whole table: the whole-table migration on one put, which a large table's
     * slowed verbs made outlive the put's deadline.)
     */
    private void repairIfStalled(MapTable t) {
        int total = t.total();
        long done = mem.readLong(t.ptr + TABLE_DONE);
        if (done >= total) {
            return;
        }
        long now = System.nanoTime();
        if (t.stalledSince == 0) {
            t.stalledSince = now;
            return;
        }
        if (now - t.stalledSince < 4 * graceNanos || !t.repairing.compareAndSet(false, true)) {
            return;
        }
        try {
            long keep = mem.operationTimeout().toNanos() / 2;
            while (t.repairedTo < total && OperationDeadline.remainingNanos(Long.MAX_VALUE / 4) > keep) {
                int from = t.repairedTo;
                int to = Math.min(total, from + MIGRATE_RANGE);
                long[] w = tables.readWords(t.slot(from), to - from);
                for (int i = from; i < to; i++) {
                    migrateSlot(t, i, w[i - from]);
                }
                t.repairedTo = to; // only once the range was swept: a failed sweep is taken up again there
            }
            if (t.repairedTo < total) {
                return; // the next operation of this node that finds the table stalled goes on
            }
        } finally {
            t.repairing.set(false);
        }
        while (done < total) {
            long witness = mem.compareAndSwap(t.ptr + TABLE_DONE, done, total);
            if (witness == done) {
                break;
            }
            done = witness;
        }
        repairs.increment();
        advanceRoot();
    }

    /** Migrations finished by a repair sweep (see {@link #repairIfStalled}). */
    long repairs() {
        return repairs.sum();
    }

    /** {@link #advanceRoot} and the root table this node then sees. */
    MapTable advanceRootAndGet() {
        advanceRoot();
        return tables.rootTable();
    }

    /** Moves the root's TABLE along the chain past every fully migrated table. */
    void advanceRoot() {
        while (true) {
            long r = mem.readLong(root + ROOT_TABLE);
            MapTable tr = tables.table(r);
            MapTable n = tables.nextOf(tr);
            if (n == null || mem.readLong(tr.ptr + TABLE_DONE) < tr.total()) {
                break;
            }
            mem.compareAndSwap(root + ROOT_TABLE, r, n.ptr);
        }
        tables.refreshRoot(System.nanoTime());
    }

    /**
     * Frees every entry block and every table (the map must be quiescent: no other
     * node uses it). Finishes any migration first, so the last table names every entry.
     */
    void destroyTables() {
        List<Long> all = tables.allTables();
        for (long p : all) {
            migrateAll(tables.table(p));
        }
        MapTable last = tables.table(all.get(all.size() - 1));
        for (int from = 0; from < last.total(); from += 1024) {
            int n = Math.min(1024, last.total() - from);
            long[] w = tables.readWords(last.slot(from), n);
            for (long word : w) {
                if (pointerOf(word) != 0) {
                    reclaimer.retire(pointerOf(word));
                }
            }
        }
        reclaimer.rootAdvanced(Long.MAX_VALUE);
        reclaimer.drainAll();
        for (long t : all) {
            tables.freeTable(t);
        }
    }
}
