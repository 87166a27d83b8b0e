package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.OutOfRemoteMemoryException;
import io.membus.alloc.Placement;
import io.membus.alloc.PlacementException;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.ValueTooLargeException;
import io.membus.core.metrics.OpEvents;

import java.util.Arrays;
import java.util.concurrent.atomic.LongAdder;

import static io.membus.collections.MapLayout.*;

/**
 * The change of one key of a {@link DsmMap}: the per-key CAS loop every mutation runs.
 * It finds the key's slot ({@link SlotScan}, or the word the read cache holds for it),
 * applies the mutation function to the current value, writes a new entry block, and
 * installs its word by one CAS on the slot ({@link MapTables#install}); a CAS that loses
 * looks again and applies the function again. A change that meets a full window or a
 * frozen slot starts or helps the migration ({@link MapMigration}) and goes on in the next
 * table. The replaced entry is retired ({@link Reclaimer}); the node's size counter is
 * moved once the change is made.
 *
 * <p>A plain put ({@link MapStore.Put}: its value does not depend on the lookup) from a node
 * without a heap places its entry on the node of the key's table and writes it in the round
 * trip that reads the key's window ({@link SlotScan.Carry}): the window and the entry, then
 * the install — two round trips where it took three (docs/collections.md, "The put's tail
 * at 8 threads").
 *
 * <p><b>Note:</b> thread-safe: any number of threads on any number of nodes change keys
 * at once; a change is linearized at its successful slot CAS. The entry block is written
 * before the CAS that publishes it is issued (the verbs' issue order on one caller).
 */
final class MapMutation {
    private final GlobalAllocator heap;
    private final RemoteMemory mem;
    private final MapTables tables;
    private final SlotScan slots;
    private final MapReadCache cache;
    private final MapMigration migration;
    private final Reclaimer reclaimer;
    private final long rootBlock;
    private final long graceNanos;
    /** This node's size counter in the root. */
    private final long counter;
    /** {@link DsmMapOptions.EntryPlacement#WRITER}: new entries go to this node's heap first. */
    private final boolean entriesOnWriter;
    /**
     * The largest entry (encoded key and value together) this handle writes, and what
     * error messages call the map and the setting; set once when the handle is opened
     * ({@link #limitEntries}), before the handle is published.
     */
    private volatile long maxEntryBytes = DsmCollections.DEFAULT_MAX_VALUE_SIZE;
    private volatile String limitedAs = "map";
    private volatile String limitSetting = DsmCollections.MAX_VALUE_SIZE_SETTING;
    /** How long a client's puts place no entry on a table's node whose heap was full or gone. */
    private static final long NODE_FULL_PAUSE_NANOS = 1_000_000_000L;
    /**
     * The last table node a client's entry could not be placed on, and when ({@code System.nanoTime()}):
     * a hint written racily (a lost or torn pair only costs one more failed allocation or one
     * entry placed elsewhere).
     */
    private volatile int fullNode;
    private volatile long fullSince;
    /** Changes installed on the slot word of the read cache, with no lookup. */
    private final LongAdder speculated = new LongAdder();
    /** Entries written in the round trip of their window's read (a client's puts). */
    private final LongAdder carried = new LongAdder();

    MapMutation(GlobalAllocator heap, MapTables tables, SlotScan slots, MapReadCache cache, MapMigration migration,
                Reclaimer reclaimer, long rootBlock, long counter, long graceNanos,
                DsmMapOptions.EntryPlacement entryPlacement) {
        this.heap = heap;
        this.mem = heap.memory();
        this.tables = tables;
        this.slots = slots;
        this.cache = cache;
        this.migration = migration;
        this.reclaimer = reclaimer;
        this.rootBlock = rootBlock;
        this.counter = counter;
        this.graceNanos = graceNanos;
        this.entriesOnWriter = entryPlacement == DsmMapOptions.EntryPlacement.WRITER;
    }

    /**
     * Sets the largest entry (encoded key + value bytes) this handle writes; {@code as}
     * names the map in the error, {@code setting} where the limit comes from.
     */
    void limitEntries(long maxBytes, String as, String setting) {
        this.limitedAs = as;
        this.limitSetting = setting;
        this.maxEntryBytes = maxBytes;
    }

    /** Changes this handle installed on the slot word its read cache held for the key (one round trip, no lookup). */
    long speculated() {
        return speculated.sum();
    }

    /** Entries this handle wrote in the round trip that read their key's window (a client's plain puts). */
    long carried() {
        return carried.sum();
    }

    /**
     * Applies {@code m} to {@code key} until one try's CAS wins, starting over after a
     * {@link SlotScan.Restart}. {@code lastChange}: see {@link #attempt}.
     */
    MapStore.Outcome mutate(byte[] key, long hash, MapStore.Mutation m, long lastChange) {
        int restarts = 0;
        while (true) {
            long start = System.nanoTime();
            try {
                return attempt(key, hash, m, start, lastChange);
            } catch (SlotScan.Restart r) {
                OpEvents.mark(OpEvents.TABLE_AGAIN);
                restarts = slots.restarted(restarts);
            }
        }
    }

    /**
     * One try of a change. {@code lastChange}: the {@code System.nanoTime()} after which
     * its slot CAS must not be issued (the stripe lock of a map with leased reads may be
     * broken by then), {@code Long.MAX_VALUE} for none.
     */
    private MapStore.Outcome attempt(byte[] key, long hash, MapStore.Mutation m, long start, long lastChange) {
        MapTable t = tables.rootTable();
        BlockRef fresh = null;
        byte[] freshValue = null;
        boolean helped = false;
        try {
            // the slot word this handle's read cache saw for the key, less than half a grace ago: the first try
            // changes it with no lookup. The CAS proves the slot still held that word, which (no block is reused
            // within a grace) still named the cached entry: the value the mutation saw was current.
            MapReadCache.Cached hint = cache.hint(key);
            if (hint != null && (hint.table() != t || start - hint.at() >= graceNanos / 2)) {
                hint = null;
            }
            while (true) {
                boolean onHint = hint != null;
                int index;
                long word; // the word the CAS expects: 0 for an empty slot
                byte[] current;
                long currentHeader = 0; // the current entry's block header, when it was read with the entry
                if (onHint) {
                    index = hint.index();
                    word = hint.word();
                    current = hint.value();
                } else {
                    // a plain put from a node without a heap writes its new entry on the window's node with the
                    // window's first read: one round trip for both, the install the second (docs/collections.md)
                    SlotScan.Carry carry = null;
                    if (fresh == null && m instanceof MapStore.Put p && entriesOnWriter && !hasLocalHeap()) {
                        fresh = allocateEntry(key, hash, p.value(), nearTable(t));
                        freshValue = p.value();
                        carry = new SlotScan.Carry(fresh.payload(), entryBytes(fresh, key, hash, p.value()));
                    }
                    SlotScan.Scan s;
                    try {
                        s = slots.scan(t, key, hash, start, carry);
                        if (carry != null) {
                            carried.increment();
                        }
                    } catch (RuntimeException e) {
                        if (carry != null && !carry.written && !(e instanceof DsmException d && !d.mayHaveRun())) {
                            fresh = null; // the write may still land: never freed (leaked), as writeEntry's
                        }
                        throw e;
                    }
                    SlotScan.Kind kind = s.kind();
                    if (kind == SlotScan.Kind.MOVED_EMPTY || kind == SlotScan.Kind.FULL
                            || (kind == SlotScan.Kind.FOUND && isMoved(s.word()))) {
                        if (kind == SlotScan.Kind.FOUND && !isTomb(s.word())) {
                            migration.copyInto(tables.mustNext(t), key, hash, identity(s.word()) | COPIED,
                                    s.entry().value());
                        }
                        if (kind == SlotScan.Kind.FULL && tables.nextOf(t) == null) {
                            migration.startResize(t);
                            migration.migrateWhileTimeLeft(t);
                        } else if (!helped) {
                            helped = true;
                            migration.helpIfTimeLeft(t);
                        }
                        OpEvents.mark(OpEvents.TABLE_AGAIN);
                        t = tables.mustNext(t);
                        continue;
                    }
                    index = s.index();
                    word = kind == SlotScan.Kind.FOUND ? s.word() : 0;
                    current = kind == SlotScan.Kind.FOUND && !isTomb(s.word()) ? s.entry().value() : null;
                    currentHeader = kind == SlotScan.Kind.FOUND && s.entry() != null ? s.entry().header() : 0;
                }
                byte[] next = m.apply(current);
                if (next == MapStore.KEEP || (next == null && current == null)) {
                    if (onHint) { // a change of nothing is never decided on a cached value: look the key up
                        hint = cache.dropHint(key, hint);
                        continue;
                    }
                    return new MapStore.Outcome(current, false);
                }
                long update;
                if (next == null) {
                    update = word | TOMB;
                } else {
                    if (fresh == null || !Arrays.equals(freshValue, next)) {
                        if (fresh != null) {
                            heap.free(fresh); // never installed (its inline copy landed before: a reuse rewrites the area first)
                            fresh = null;
                        }
                        fresh = writeEntry(key, hash, next);
                        freshValue = next;
                    }
                    update = slot(hash, entryClass(fresh), fresh.ptr());
                }
                if (onHint && System.nanoTime() - hint.at() >= graceNanos / 2) {
                    hint = cache.dropHint(key, hint); // too old by now to vouch for its entry
                    continue;
                }
                slots.checkTime(start);
                if (lastChange != Long.MAX_VALUE && System.nanoTime() - lastChange > 0) {
                    throw new DsmMapException(ErrorCode.TIMEOUT, "stripe-lock", "map change too slow: root="
                            + RemotePtr.toString(rootBlock) + "; it held its stripe's lock so long that a survivor"
                            + " may break it, so it changed nothing (retry; a node this slow is overloaded)");
                }
                long witness;
                try {
                    witness = tables.install(t, index, word, update, key, next);
                } catch (RuntimeException e) {
                    // the CAS may have landed (a timeout leaves it unknown): the entry may be installed, and its
                    // inline copy may still land, so it is never freed here (leaked if it was not installed);
                    // a failure refused before it was sent (mayHaveRun false) installed nothing: freed below
                    if (!(e instanceof DsmException d && !d.mayHaveRun())) {
                        fresh = null;
                    }
                    throw e;
                }
                if (witness != word) {
                    OpEvents.mark(OpEvents.CAS_RETRY);
                    if (onHint) {
                        hint = cache.dropHint(key, hint); // changed since it was cached
                    }
                    continue; // another change won: look again and re-apply
                }
                if (onHint) {
                    speculated.increment();
                }
                if (next != null) {
                    reclaimer.noteInstalled(fresh.ptr(), fresh.header());
                    fresh = null; // installed
                    if (word != 0) {
                        retireReplaced(t, word, currentHeader);
                    }
                    cache.remember(key, t, index, update, next, start);
                } else {
                    cache.forget(key);
                }
                long cleanup = OperationDeadline.enterCleanup(); // the change is made: count it even past the deadline
                try {
                    if (current == null) {
                        mem.fetchAndAdd(counter, 1);
                    } else if (next == null) {
                        mem.fetchAndAdd(counter, -1);
                    }
                } finally {
                    OperationDeadline.exit(cleanup);
                }
                return new MapStore.Outcome(current, true);
            }
        } finally {
            if (fresh != null) {
                heap.free(fresh); // never installed: nobody can have read it through a slot
            }
        }
    }

    private static int entryClass(BlockRef ref) {
        return ref.isLarge() ? LARGE_CLASS : HeapLayout.blockClassOf(ref.header());
    }

    /**
     * The entry named by {@code old} was replaced in table {@code t}; {@code header}: its block's
     * header when the change read it with the entry, else 0 (the reclaimer may know it).
     */
    private void retireReplaced(MapTable t, long old, long header) {
        long ptr = pointerOf(old);
        if (isCopied(old)) {
            reclaimer.retireAfterTable(t.seq - 1, ptr); // a frozen slot of the table before still names it
        } else {
            reclaimer.retire(ptr, header);
        }
    }

    /**
     * Whether this node exports a heap segment of the allocator (a memory node); a node
     * without one (a client) writes every entry on another node. Looks the segments up in
     * this node's segment table: a few array reads.
     */
    private boolean hasLocalHeap() {
        for (int seg : heap.config().heapSegments()) {
            if (mem.localSegment(seg) != null) {
                return true;
            }
        }
        return false;
    }

    /**
     * Where a client's put places its entry block: on the node of table {@code t}, whose
     * window the put reads in the same round trip ({@link #allocateEntry} falls back to
     * {@link Placement#localFirst} when that node's heap is full or it is not a live member,
     * and then skips it for {@link #NODE_FULL_PAUSE_NANOS}).
     */
    private Placement nearTable(MapTable t) {
        int node = RemotePtr.nodeId(t.ptr);
        return node == fullNode && System.nanoTime() - fullSince < NODE_FULL_PAUSE_NANOS ? null : Placement.node(node);
    }

    /**
     * Allocates and writes a new entry block. An entry larger than the handle's limit is
     * refused before anything is allocated ({@link ValueTooLargeException}).
     * A write refused before it was sent ({@code mayHaveRun() == false}) frees the block;
     * any other failed write leaves it allocated (leaked): the write may still land, and a
     * late write to a block that was reused would change another entry.
     */
    private BlockRef writeEntry(byte[] key, long hash, byte[] value) {
        BlockRef ref = allocateEntry(key, hash, value,
                entriesOnWriter ? Placement.localFirst(hash) : Placement.byKey(hash));
        byte[] b = entryBytes(ref, key, hash, value);
        try {
            mem.write(ref.payload(), b);
        } catch (DsmException e) {
            if (!e.mayHaveRun()) { // refused before it was sent (e.g. longer than a verb): it can never land
                try {
                    heap.free(ref);
                } catch (RuntimeException f) {
                    e.addSuppressed(f);
                }
            }
            throw e;
        }
        return ref;
    }

    /**
     * Allocates an entry block for {@code key} and {@code value} where {@code placement}
     * says (null, or a {@link Placement.Kind#NODE} placement whose node is full or gone: where
     * {@link Placement#localFirst} says); refuses an entry over the handle's limit before anything
     * is allocated ({@link ValueTooLargeException}) and a block a slot word cannot name
     * ({@link DsmMapException}, reason {@code placement}).
     */
    private BlockRef allocateEntry(byte[] key, long hash, byte[] value, Placement placement) {
        long size = (long) key.length + value.length;
        if (size > maxEntryBytes) { // before anything is claimed
            throw new ValueTooLargeException(limitedAs + " entry (key " + key.length
                    + " B + value " + value.length + " B)", size, maxEntryBytes, limitSetting);
        }
        int payload = ENTRY_DATA + key.length + value.length;
        BlockRef ref;
        if (placement == null) {
            ref = heap.allocate(payload, Placement.localFirst(hash));
        } else if (placement.kind() == Placement.Kind.NODE) {
            try {
                ref = heap.allocate(payload, placement);
            } catch (OutOfRemoteMemoryException | PlacementException e) {
                fullSince = System.nanoTime(); // before the node: a reader that sees the node sees a recent time
                fullNode = placement.nodeId();
                ref = heap.allocate(payload, Placement.localFirst(hash));
            }
        } else {
            ref = heap.allocate(payload, placement);
        }
        if (!fitsSlot(ref.ptr()) || (!ref.isLarge() && HeapLayout.blockClassOf(ref.header()) >= LARGE_CLASS)) {
            heap.free(ref);
            throw DsmMapException.placement(RemotePtr.toString(ref.ptr()), "node=" + ref.nodeId() + ", segment="
                    + ref.segmentIndex() + ", offset=" + RemotePtr.offset(ref.ptr()));
        }
        return ref;
    }

    /** The bytes of the entry block {@code ref} for {@code key} and {@code value}, from its payload's start. */
    private static byte[] entryBytes(BlockRef ref, byte[] key, long hash, byte[] value) {
        int payload = ENTRY_DATA + key.length + value.length;
        byte[] b = new byte[payload];
        putLong(b, ENTRY_HEADER_COPY, ref.header());
        putLong(b, ENTRY_HASH, hash);
        putInt(b, ENTRY_KEY_LENGTH, key.length);
        putInt(b, ENTRY_VALUE_LENGTH, value.length);
        System.arraycopy(key, 0, b, ENTRY_DATA, key.length);
        System.arraycopy(value, 0, b, ENTRY_DATA + key.length, value.length);
        putLong(b, ENTRY_CHECK, check(ref.header(), hash, b, ENTRY_DATA, key.length + value.length));
        return b;
    }
}
