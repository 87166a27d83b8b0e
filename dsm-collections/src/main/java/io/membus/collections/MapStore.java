package io.membus.collections;

import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;

import java.nio.ByteBuffer;
import java.util.Iterator;
import java.util.List;

import static io.membus.collections.MapLayout.*;

/**
 * The one-sided hash table behind a {@link DsmMap}, on encoded keys and values: the
 * lookup, the weakly consistent scan and the size, over the classes that do one job each
 * (docs/collections.md, "Where the map's code lives"):
 * <ul>
 *   <li>{@link MapTables}: the chain of tables as this node knows it, slot reads and the
 *       one slot write ({@link MapTables#install});</li>
 *   <li>{@link SlotScan}: finding a key in a table's window, and the time bound of every
 *       entry read ({@link SlotScan.Restart});</li>
 *   <li>{@link MapReadCache} and {@link MapLeasedReads}: the validated read cache and the
 *       leased one;</li>
 *   <li>{@link MapMutation}: the per-key CAS loop every change runs;</li>
 *   <li>{@link MapMigration}: growth into a new table, repair, and destroy.</li>
 * </ul>
 * Every decision other nodes must agree on is one CAS on a slot word, a table's NEXT word
 * or the root's TABLE word (see {@link MapLayout} for the bytes and docs/collections.md
 * for the argument).
 *
 * <p><b>Time bound.</b> A lookup notes when it started; an entry read that ends more
 * than half the grace period after that start is thrown away and the operation
 * starts over ({@link SlotScan}), and this node re-reads the root's table pointer whenever
 * its copy is older than half the grace ({@link MapTables#rootTable}).
 *
 * <p><b>Note:</b> thread-safe: any number of threads on any number of nodes run every
 * operation at once. Each operation is linearizable per key: its linearization point
 * is the read of the key's slot word (lookups) or the successful slot CAS (changes).
 */
final class MapStore {
    /** What a mutation function returns to leave the key as it is. */
    static final byte[] KEEP = new byte[0];

    /** A change of one key: from its current value bytes (null when absent) to new bytes, null (remove) or {@link #KEEP}. */
    interface Mutation {
        byte[] apply(byte[] current);
    }

    /**
     * The mutation of a plain put: {@code value} whatever the current value, known before
     * the key is looked up, so a put may write its new entry while it looks ({@link MapMutation}).
     */
    record Put(byte[] value) implements Mutation {
        @Override
        public byte[] apply(byte[] current) {
            return value;
        }
    }

    /** What a mutation found and did. */
    record Outcome(byte[] previous, boolean changed) {
    }

    /** An entry as read: its key and value bytes. */
    record RawEntry(byte[] key, byte[] value) {
    }

    final GlobalAllocator heap;
    final RemoteMemory mem;
    /** Pointer of the root block's header. */
    final long rootBlock;
    /** Pointer of the root layout ({@link MapLayout}): the root block's payload, or the body of a named root. */
    final long root;
    final long graceNanos;
    /** Bytes of the inline area beside each slot (0: the map has none). */
    final int inline;
    final Reclaimer reclaimer;
    /** The lease stripes of a map with leased reads, or null. */
    final MapLeases leases;
    final MapTables tables;
    final SlotScan slots;
    final MapMigration migration;
    private final MapReadCache cache;
    private final MapLeasedReads leased;
    private final MapMutation mutation;

    /**
     * @param objectKeyType with leased reads: the key type whose objects key the leased cache
     *                      (see {@link DsmMap}), or null when keys are cached as their bytes
     */
    MapStore(GlobalAllocator heap, long rootBlock, long root, long graceNanos, int window, int inline, int cacheMax,
             MapLeases leases, Class<?> objectKeyType, DsmMapOptions.EntryPlacement entryPlacement) {
        this.inline = inline;
        this.leases = leases;
        this.heap = heap;
        this.mem = heap.memory();
        this.rootBlock = rootBlock;
        this.root = root;
        this.graceNanos = graceNanos;
        this.reclaimer = new Reclaimer(heap, graceNanos);
        long counter = root + ROOT_COUNTERS + 8L * (mem.localNodeId() % STRIPES);
        this.tables = new MapTables(heap, root, graceNanos, window, inline, reclaimer);
        this.slots = new SlotScan(mem, tables, graceNanos, window, rootBlock);
        this.cache = new MapReadCache(mem, graceNanos, cacheMax, leases != null);
        this.leased = new MapLeasedReads(leases, cacheMax, objectKeyType);
        this.migration = new MapMigration(heap, tables, slots, reclaimer, rootBlock, root, graceNanos, window, inline,
                this::size);
        this.mutation = new MapMutation(heap, tables, slots, cache, migration, reclaimer, rootBlock, counter,
                graceNanos, entryPlacement);
    }

    /** {@link MapTables#newTable}: a new table, not yet reachable. */
    static long newTable(GlobalAllocator heap, int log2, int window, int inline, long seq, Placement placement) {
        return MapTables.newTable(heap, log2, window, inline, seq, placement);
    }

    /**
     * The map handle's root, life and operation counts ({@link Handle}; its life is set by
     * {@link DsmCollections} when it opens a named map: every operation checks it, see
     * {@link Lifecycle}). Set once by {@link MapRoot#open} before the map is built: the
     * map's final field {@code store} publishes it (a plain field: no extra volatile read on
     * a leased hit).
     */
    Handle handle;

    void handle(Handle h) {
        h.stats().timed(DsmMap.GET, DsmMap.PUT, DsmMap.REMOVE, DsmMap.CHANGE);
        h.stats().alsoCount(DsmMap.GET, leased.leasedLookups::sum);
        this.handle = h;
    }

    /**
     * Fails with a {@link StructureGoneException} once the named map is known to be
     * destroyed (reading its root when the last look is stale): misses, fills, changes.
     */
    private void live() {
        handle.check();
    }

    /** Sets the largest entry (encoded key + value bytes) this handle writes ({@link MapMutation#limitEntries}). */
    void limitEntries(long maxBytes, String as, String setting) {
        mutation.limitEntries(maxBytes, as, setting);
    }

    // ================================================================ reads

    /** The value bytes of {@code key}, or null. At most two verbs when the key's window holds it, one when cached. */
    byte[] get(byte[] key, long hash) {
        live();
        if (leases != null) {
            Object v = leasedGet(key, hash, false);
            return v == LeasedCache.ABSENT ? null : (byte[]) v;
        }
        if (cache.enabled()) {
            byte[] v = cache.get(ByteBuffer.wrap(key));
            if (v != null) {
                return v;
            }
        }
        return lookup(key, hash);
    }

    /** The value bytes of {@code key}, or null, from the table: at most two verbs when the key's window holds it. */
    private byte[] lookup(byte[] key, long hash) {
        int restarts = 0;
        while (true) {
            long start = System.nanoTime();
            try {
                MapTable t = tables.rootTable();
                while (true) {
                    SlotScan.Scan s = slots.scan(t, key, hash, start);
                    switch (s.kind()) {
                        case FOUND:
                            if (isMoved(s.word())) {
                                if (!isTomb(s.word())) {
                                    migration.copyInto(tables.mustNext(t), key, hash, identity(s.word()) | COPIED,
                                            s.entry().value());
                                }
                                t = tables.mustNext(t);
                                continue;
                            }
                            if (isTomb(s.word())) {
                                return null;
                            }
                            byte[] value = s.entry().value();
                            cache.remember(key, t, s.index(), s.word(), value, start);
                            return value;
                        case EMPTY:
                            return null;
                        case MOVED_EMPTY:
                            t = tables.mustNext(t);
                            continue;
                        default:
                            MapTable n = tables.nextOf(t);
                            if (n == null) {
                                return null;
                            }
                            t = n;
                    }
                }
            } catch (SlotScan.Restart r) {
                restarts = slots.restarted(restarts);
            }
        }
    }

    /** Gets served by the read cache so far (the validated one and the leased one). */
    long cacheHits() {
        long leasedHits = leased.hits(); // its misses before its lookups: a lookup counted later cannot make it too high
        return cache.hits() + leasedHits;
    }

    /** Makes the leased cache keep every value decoded by {@code decoder}, handed to every caller (immutable values). */
    void shareDecoded(java.util.function.Function<byte[], Object> decoder) {
        leased.shareDecoded(decoder);
    }

    /**
     * The leased cache's entry for {@code cacheKey} when it may be served ({@link MapLeasedReads#hit});
     * null otherwise. Looks only at the known verdict of the map's life (no root read, no
     * clock): a destroy elsewhere is seen by the next miss, fill or change.
     */
    Object leasedHit(Object cacheKey, boolean decodedForm) {
        handle.checkDead(); // no verb is issued here: the known verdict only, no clock (see Lifecycle)
        return leased.hit(cacheKey, decodedForm);
    }

    /**
     * A get of a map with leased reads whose cache is keyed by the key's bytes:
     * {@link #leasedHit} when it can, else {@link #leasedFill}.
     */
    Object leasedGet(byte[] key, long hash, boolean decodedForm) {
        live();
        ByteBuffer k = ByteBuffer.wrap(key);
        Object c = leasedHit(k, decodedForm);
        return c != null ? c : leasedFill(key, hash, k, decodedForm);
    }

    /** The miss path of a leased get ({@link MapLeasedReads#fill}): returns the value as {@link #leasedHit} would. */
    Object leasedFill(byte[] key, long hash, Object cacheKey, boolean decodedForm) {
        live();
        return leased.fill(key, hash, cacheKey, decodedForm, this::lookup);
    }

    /**
     * The node holding the entry block of {@code key} in the newest table, 0 when the key is
     * not there (absent, removed, or still in a table being migrated from): a diagnostic for a
     * quiescent map (tests of the placement), not an operation of the map.
     */
    int entryNode(byte[] key, long hash) {
        live();
        SlotScan.Scan s = slots.scan(tables.rootTable(), key, hash, System.nanoTime());
        return s.kind() == SlotScan.Kind.FOUND && !isTomb(s.word()) && !isMoved(s.word())
                ? RemotePtr.nodeId(pointerOf(s.word())) : 0;
    }

    /** Entries this handle's lookups read for a fingerprint twin of their key ({@link SlotScan#twinReads}). */
    long twinReads() {
        return slots.twinReads();
    }

    /**
     * How far past its home slot {@code key} sits in the newest table (0: in its home slot),
     * -1 when it is not there: a diagnostic for a quiescent map (tests counting the round trips
     * of a lookup, whose first read covers {@value SlotScan#FIRST_READ_SLOTS} slots), not an operation.
     */
    int windowOffset(byte[] key, long hash) {
        live();
        MapTable t = tables.rootTable();
        SlotScan.Scan s = slots.scan(t, key, hash, System.nanoTime());
        return s.kind() == SlotScan.Kind.FOUND && !isMoved(s.word()) ? s.index() - home(hash, t.seed, t.log2) : -1;
    }

    // ================================================================ changes

    /**
     * Applies {@code m} to {@code key} atomically: the function sees the current value
     * and its result is installed by one CAS on the key's slot word, or the function is
     * applied again to the value that won ({@link MapMutation}). A map with leased reads
     * changes a key under its stripe's lock, which invalidates the caching nodes first.
     */
    Outcome mutate(byte[] key, long hash, Mutation m) {
        // one deadline for the whole change, whatever its verbs, allocations and restarts (OperationDeadline)
        long scope = OperationDeadline.enter(mem.operationTimeout());
        try {
            // the time this change has (an application's shorter scope wins): what a growth may take of it is a share
            long budget = OperationDeadline.remainingNanos(mem.operationTimeout().toNanos());
            live();
            reclaimer.drain();
            reclaimer.admit(mem.operationTimeout().toNanos()); // a place for the entry it may retire (the bound)
            try {
                if (leases == null) {
                    return mutation.mutate(key, hash, m, Long.MAX_VALUE, budget);
                }
                return leases.heap.exclusive(leases.stripe(hash),
                        lastChange -> mutation.mutate(key, hash, m, lastChange, budget));
            } finally {
                reclaimer.release();
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    // ================================================================ size, scans, destroy

    /** The sum of every node's counter: exact when no change is in flight. */
    long size() {
        live();
        long[] w = tables.readWords(root + ROOT_COUNTERS, STRIPES);
        long s = 0;
        for (long x : w) {
            s += x;
        }
        return Math.max(0, s);
    }

    /**
     * A weakly consistent scan: every key present from the scan's start to its end is
     * returned once, with a value it had during the scan; keys added or removed
     * meanwhile may or may not be. Walks the root table and then every later table of
     * the chain, skipping keys already returned.
     */
    Iterator<RawEntry> scan() {
        live();
        return new MapScanIterator(this, tables.rootTable());
    }

    /** Frees every entry block and every table of a quiescent map ({@link MapMigration#destroyTables}). */
    void destroyTables() {
        migration.destroyTables();
    }

    // ================================================================ for tests and diagnostics

    MapTable rootTable() {
        return tables.rootTable();
    }

    MapTable nextOf(MapTable t) {
        return tables.nextOf(t);
    }

    List<Long> allTables() {
        return tables.allTables();
    }

    void startResize(MapTable t) {
        migration.startResize(t);
    }

    MapTable advanceRootAndGet() {
        return migration.advanceRootAndGet();
    }

    long repairs() {
        return migration.repairs();
    }

    long inlineHits() {
        return slots.inlineHits();
    }

    long restarts() {
        return slots.restarts();
    }

    long speculated() {
        return mutation.speculated();
    }

    long carried() {
        return mutation.carried();
    }
}
