package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.AllocationSizeException;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.Placement;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;

import static io.membus.collections.MapLayout.*;

/**
 * The one-sided hash table behind a {@link DsmMap}, on encoded keys and values: the
 * lookup, the per-key CAS loop every mutation runs, online migration into a new
 * table, and a weakly consistent scan. Every decision other nodes must agree on is
 * one CAS on a slot word, a table's NEXT word or the root's TABLE word (see
 * {@link MapLayout} for the bytes and docs/collections.md for the argument).
 *
 * <p><b>Time bound.</b> A lookup notes when it started; an entry read that ends more
 * than half the grace period after that start is thrown away and the operation
 * starts over, and this node re-reads the root's table pointer whenever its copy is
 * older than half the grace. Retired entries are freed a whole grace after the CAS
 * that retired them ({@link Reclaimer}), so a read that is kept never ran into a
 * free: a kept entry's bytes are the ones its slot word was installed with.
 *
 * <p><b>Note:</b> thread-safe: any number of threads on any number of nodes run every
 * operation at once. Each operation is linearizable per key: its linearization point
 * is the read of the key's slot word (lookups) or the successful slot CAS (changes).
 */
final class MapStore {
    /** What a mutation function returns to leave the key as it is. */
    static final byte[] KEEP = new byte[0];
    private static final int MIGRATE_RANGE = 64;
    static final int MAX_RESTARTS = 10_000;
    /**
     * Slots of a window a lookup over the network reads first (their words and inline
     * areas: 8 * (8 + inline) bytes, 2,240 with the default 272-byte areas, where the whole
     * window of 32 is 8,960). Linear probing keeps a key near its home slot: at a load of 0.75 a
     * lookup probes 2.5 slots on average and rarely more than 8, so the rest of the window
     * is read (a second round trip) only for the few keys past them.
     */
    static final int FIRST_READ_SLOTS = 8;
    private static final int ZERO_CHUNK = 64 << 10;

    /** A change of one key: from its current value bytes (null when absent) to new bytes, null (remove) or {@link #KEEP}. */
    interface Mutation {
        byte[] apply(byte[] current);
    }

    /** What a mutation found and did. */
    record Outcome(byte[] previous, boolean changed) {
    }

    /** An entry as read: its key and value bytes. */
    record RawEntry(byte[] key, byte[] value) {
    }

    /** Thrown (without a stack) to start an operation over: a read outlived the time bound or met a reused block. */
    static final class Restart extends RuntimeException {
        private static final long serialVersionUID = 1L;
        static final Restart INSTANCE = new Restart();

        private Restart() {
            super("restart", null, false, false);
        }
    }

    /** A table as this node knows it: its immutable header fields and, once set, its successor. */
    static final class Table {
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

        Table(long ptr, int log2, long seq, long seed, int window, int inline, long next) {
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

    private record RootView(Table table, long readAt) {
    }

    private enum Kind { FOUND, EMPTY, MOVED_EMPTY, FULL }

    private record Scan(Kind kind, int index, long word, Entry entry) {
    }

    /** An entry read from its block and checked. */
    record Entry(long ptr, long hash, byte[] bytes, int keyOffset, int keyLength, int valueLength) {
        boolean keyEquals(byte[] key) {
            return keyLength == key.length
                    && Arrays.equals(bytes, keyOffset, keyOffset + keyLength, key, 0, key.length);
        }

        byte[] key() {
            return Arrays.copyOfRange(bytes, keyOffset, keyOffset + keyLength);
        }

        byte[] value() {
            return Arrays.copyOfRange(bytes, keyOffset + keyLength, keyOffset + keyLength + valueLength);
        }
    }

    final GlobalAllocator heap;
    final RemoteMemory mem;
    /** Pointer of the root block's header. */
    final long rootBlock;
    /** Pointer of the root layout ({@link MapLayout}): the root block's payload, or the body of a named root. */
    final long root;
    final long graceNanos;
    final int window;
    /** Bytes of the inline area beside each slot (0: the map has none). */
    final int inline;
    final Reclaimer reclaimer;
    /** The lease stripes of a map with leased reads, or null. */
    final MapLeases leases;
    /**
     * Leased read cache, or null (no leased reads, or no read cache): key (the key object
     * for key types whose equal objects encode to equal bytes, see {@link DsmMap}; else its
     * bytes, wrapped) to the value ({@link LeasedCache#ABSENT}: absent) and the stripe's
     * version it was read under.
     */
    private final LeasedCache<io.membus.coherence.CoherentHeap.CachedCopy> leased;
    /** Decodes a value once for every caller of the leased cache (values of an immutable type), or null: never. */
    private volatile java.util.function.Function<byte[], Object> sharedDecoder;
    private final ConcurrentHashMap<Long, Table> tables = new ConcurrentHashMap<>();
    private final long counter;
    private volatile RootView rootView;
    /** Validated read cache: key bytes to the slot word and value last seen (see {@link #cachedGet}). */
    private final ConcurrentHashMap<ByteBuffer, Cached> cache = new ConcurrentHashMap<>();
    private final int cacheMax;
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
    /** Gets served by the validated read cache. */
    private final java.util.concurrent.atomic.LongAdder cacheHits = new java.util.concurrent.atomic.LongAdder();
    /**
     * Lookups in the leased cache, and those that missed: the leased hits are the
     * difference. Counted so because a leased hit costs tens of nanoseconds: the lookup is
     * counted before it starts (its count overlaps the lookup's memory reads, where a count
     * after the hit would wait for the clock read that ends it), into a cell of the calling
     * thread's own (no atomic instruction), and a miss, which goes on to read remote
     * memory, is counted by a {@link java.util.concurrent.atomic.LongAdder}.
     */
    private final OwnedCounter leasedLookups = new OwnedCounter();
    private final java.util.concurrent.atomic.LongAdder leasedMisses = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder repairs = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder inlineHits = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder restartCount = new java.util.concurrent.atomic.LongAdder();
    /** Changes installed on the slot word of the read cache, with no lookup. */
    private final java.util.concurrent.atomic.LongAdder speculated = new java.util.concurrent.atomic.LongAdder();

    /** A key's slot word (slot {@code index} of {@code table}) and value as seen by an operation that started at {@code at}. */
    private record Cached(Table table, int index, long word, byte[] value, long at) {
        long slotPtr() {
            return table.slot(index);
        }
    }

    /**
     * @param objectKeyType with leased reads: the key type whose objects key the leased cache
     *                      (see {@link DsmMap}), or null when keys are cached as their bytes
     */
    MapStore(GlobalAllocator heap, long rootBlock, long root, long graceNanos, int window, int inline, int cacheMax,
             MapLeases leases, Class<?> objectKeyType, DsmMapOptions.EntryPlacement entryPlacement) {
        this.entriesOnWriter = entryPlacement == DsmMapOptions.EntryPlacement.WRITER;
        this.inline = inline;
        this.cacheMax = cacheMax;
        this.leases = leases;
        this.leased = leases != null && cacheMax > 0
                ? new LeasedCache<>(leases.heap::versionIfValid, leases.heap.clock(), MapLeases.STRIPES, cacheMax,
                objectKeyType) : null;
        this.heap = heap;
        this.mem = heap.memory();
        this.rootBlock = rootBlock;
        this.root = root;
        this.graceNanos = graceNanos;
        this.window = window;
        this.reclaimer = new Reclaimer(heap, graceNanos);
        this.counter = root + ROOT_COUNTERS + 8L * (mem.localNodeId() % STRIPES);
    }

    // ================================================================ creation

    /**
     * Allocates and zeroes a table of {@code 1 << log2} home slots with their inline areas
     * (not yet reachable). A table that would be larger than the heap's largest object with
     * the map's {@code inline} areas gets the largest areas that fit (a multiple of 8, at least
     * 16 bytes), or none: a large map keeps growing, and only its entries that no longer fit
     * inline take a second round trip per uncached get. The table's header records its areas
     * ({@code TABLE_INLINE}).
     */
    static long newTable(GlobalAllocator heap, int log2, int window, int inline, long seq, Placement placement) {
        int total = (1 << log2) + window - 1;
        BlockRef ref;
        try {
            ref = heap.allocate(tableBytes(total, inline), placement);
        } catch (AllocationSizeException tooLarge) {
            if (inline == 0) {
                throw tooLarge;
            }
            long room = (tooLarge.max() - TABLE_SLOTS) / total - 8; // bytes per slot beside its word
            int fits = (int) Math.min(inline, Math.max(0, room)) & ~7;
            inline = fits >= 16 ? fits : 0;
            ref = heap.allocate(tableBytes(total, inline), placement);
        }
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

    // ================================================================ tables and the root

    Table table(long ptr) {
        Table t = tables.get(ptr);
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
        t = new Table(ptr, log2, getLong(h, TABLE_SEQ), getLong(h, TABLE_SEED), window, areas, getLong(h, TABLE_NEXT));
        Table prev = tables.putIfAbsent(ptr, t);
        return prev != null ? prev : t;
    }

    /** The root's table, re-read when this node's copy is older than half the grace. */
    Table rootTable() {
        RootView v = rootView;
        long now = System.nanoTime();
        if (v != null && now - v.readAt < graceNanos / 2) {
            return v.table;
        }
        return refreshRoot(now);
    }

    private Table refreshRoot(long now) {
        Table t = table(mem.readLong(root + ROOT_TABLE));
        rootView = new RootView(t, now);
        reclaimer.rootAdvanced(t.seq);
        return t;
    }

    /** The table after {@code t}; 0-free: {@code null} when none was made yet. */
    Table nextOf(Table t) {
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

    Table mustNext(Table t) {
        Table n = nextOf(t);
        if (n == null) {
            throw DsmMapException.corrupted(RemotePtr.toString(t.ptr), "a frozen slot but no next table");
        }
        return n;
    }

    // ================================================================ reads

    private void checkTime(long start) {
        if (System.nanoTime() - start >= graceNanos / 2) {
            throw Restart.INSTANCE;
        }
    }

    long[] readWords(long ptr, int count) {
        byte[] b = mem.read(ptr, count * 8);
        long[] w = new long[count];
        for (int i = 0; i < count; i++) {
            w[i] = getLong(b, i * 8);
        }
        return w;
    }

    /** Reads and checks the entry {@code word} names; {@link Restart} when it is not (any more) that entry. */
    Entry readEntry(long word, long start) {
        long ptr = pointerOf(word);
        int cls = classOf(word);
        int len = blockBytes(cls);
        byte[] b = mem.read(ptr, len);
        long header = unsealHeader(getLong(b, 0), ptr);
        int p = HeapLayout.BLOCK_HEADER_LENGTH;
        if (header != getLong(b, p + ENTRY_HEADER_COPY)) {
            throw Restart.INSTANCE; // freed (and maybe reused) since the slot word was read
        }
        int kl = getInt(b, p + ENTRY_KEY_LENGTH);
        int vl = getInt(b, p + ENTRY_VALUE_LENGTH);
        long total = (long) p + ENTRY_DATA + kl + vl;
        if (kl < 0 || vl < 0 || (cls != LARGE_CLASS && total > len)) {
            throw Restart.INSTANCE;
        }
        if (total > len) {
            byte[] all = Arrays.copyOf(b, (int) total);
            byte[] rest = mem.read(ptr + len, (int) (total - len));
            System.arraycopy(rest, 0, all, len, rest.length);
            b = all;
        }
        long hash = getLong(b, p + ENTRY_HASH);
        if (check(header, hash, b, p + ENTRY_DATA, kl + vl) != getLong(b, p + ENTRY_CHECK)) {
            throw Restart.INSTANCE; // torn by a reuse racing this read
        }
        checkTime(start);
        return new Entry(ptr, hash, b, p + ENTRY_DATA, kl, vl);
    }

    private Scan scan(Table t, byte[] key, long hash, long start) {
        int home = home(hash, t.seed, t.log2);
        if (t.inline > 0) {
            return scanInline(t, key, hash, start, home);
        }
        long[] w = readWords(t.slot(home), window);
        int fp = fingerprint(hash);
        for (int i = 0; i < window; i++) {
            long word = w[i];
            if (word == 0) {
                return new Scan(Kind.EMPTY, home + i, 0, null);
            }
            if (isMovedEmpty(word)) {
                return new Scan(Kind.MOVED_EMPTY, home + i, word, null);
            }
            if (fingerprintOf(word) != fp) {
                continue;
            }
            Entry e = readEntry(word, start);
            if (e.hash == hash && e.keyEquals(key)) {
                return new Scan(Kind.FOUND, home + i, word, e);
            }
        }
        return new Scan(Kind.FULL, -1, 0, null);
    }

    /**
     * {@link #scan} of a table with inline areas: the window's slot words, then their inline
     * areas (a second read issued with the first on the same connection, so it runs after
     * it: one round trip; on a memory path, where there is no round trip to save, only a
     * candidate's own area, read after the words). A candidate slot whose inline area checks against the word read
     * before it is decided from that copy; only a candidate without a valid copy (a large
     * entry, a copy being rewritten) costs the read of its entry.
     *
     * <p>Why a copy that checks is the entry the word names (docs/collections.md has the
     * whole argument): the check binds the copy to the word's identity (fingerprint, size
     * class, entry pointer); whoever installs an identity in a slot wrote the slot's inline
     * area first (a copy, or a check word of 0), and a block is reused only after a grace
     * period once no slot names it. So the area, read after the word, holds either the copy
     * the word's installer wrote, or a later write — a copy for another identity, which
     * fails the check, or (after the word was replaced, the block freed a grace later and
     * reused under the same identity) a copy of the reused block, which cannot happen
     * within the half grace the read is bounded by ({@link #checkTime} below).
     */
    private Scan scanInline(Table t, byte[] key, long hash, long start, int home) {
        // on a network path the window is read in two parts: its first FIRST_READ_SLOTS slots, where a key almost
        // always is (or an empty slot that says it is absent), and the rest only when neither was there
        // on a memory path (this node's memory, shm) there is no round trip to save: read the words, then
        // only a candidate's own area (after the words, as the argument needs), not all 32 areas
        boolean direct = mem.runsDirect(t.slot(home));
        byte[] words;
        byte[] areas = null;
        int first = 0; // the window's slot that words[0] (and areas[0]) holds
        int loaded; // slots read so far
        if (direct) {
            words = mem.read(t.slot(home), 8 * window);
            loaded = window;
        } else {
            loaded = Math.min(window, FIRST_READ_SLOTS);
            byte[][] read = readWindow(t, home, loaded);
            words = read[0];
            areas = read[1];
        }
        checkTime(start);
        int fp = fingerprint(hash);
        for (int i = 0; i < window; i++) {
            if (i == loaded) { // neither the key nor an empty slot in the part read: read the rest of the window
                first = loaded;
                loaded = window;
                byte[][] read = readWindow(t, home + first, window - first);
                words = read[0];
                areas = read[1];
                checkTime(start);
            }
            long word = getLong(words, 8 * (i - first));
            if (word == 0) {
                return new Scan(Kind.EMPTY, home + i, 0, null);
            }
            if (isMovedEmpty(word)) {
                return new Scan(Kind.MOVED_EMPTY, home + i, word, null);
            }
            if (fingerprintOf(word) != fp) {
                continue;
            }
            Entry e;
            if (areas != null) {
                e = inlineEntry(word, areas, (i - first) * t.inline, t.inline, hash);
            } else {
                byte[] area = mem.read(t.inlineArea(home + i), t.inline);
                checkTime(start);
                e = inlineEntry(word, area, 0, t.inline, hash);
            }
            if (e != null) {
                inlineHits.increment();
                if (e.keyEquals(key)) {
                    return new Scan(Kind.FOUND, home + i, word, e);
                }
                continue;
            }
            e = readEntry(word, start);
            if (e.hash == hash && e.keyEquals(key)) {
                return new Scan(Kind.FOUND, home + i, word, e);
            }
        }
        return new Scan(Kind.FULL, -1, 0, null);
    }

    /**
     * Slots {@code [from, from + slots)} of {@code t}: their words, and then their inline areas.
     * The areas are read after the words ({@link RemoteMemory#readInOrder}: one round trip
     * on a network path, a tcp lane call or two reads posted in issue order on one
     * connection; one read after the other on a memory path), which {@link #scanInline}'s
     * argument needs: one read of both would copy its bytes in no promised order.
     */
    private byte[][] readWindow(Table t, int from, int slots) {
        byte[] words = new byte[8 * slots];
        byte[] areas = new byte[t.inline * slots];
        mem.readInOrder(t.slot(from), words, t.inlineArea(from), areas);
        return new byte[][] {words, areas};
    }

    /**
     * The entry in the inline area at {@code areas[at..]} when it is a copy of the entry
     * {@code word} names (its check matches the word's identity), else null. Its hash is
     * {@code hash}, the caller's key's: meaningful only if its key is the caller's.
     */
    private static Entry inlineEntry(long word, byte[] areas, int at, int inline, long hash) {
        int kl = areas[at + INLINE_KEY_LENGTH] & 0xff;
        int vl = areas[at + INLINE_VALUE_LENGTH] & 0xff;
        if (INLINE_PREFIX + kl + vl > inline) {
            return null;
        }
        if (inlineCheck(identity(word), areas, at + INLINE_DATA, kl, vl) != getLong(areas, at + INLINE_CHECK)) {
            return null;
        }
        return new Entry(pointerOf(word), hash, areas, at + INLINE_DATA, kl, vl);
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

    /** Candidates decided from their inline copy (no entry read) by this handle so far. */
    long inlineHits() {
        return inlineHits.sum();
    }

    /**
     * The cached value of {@code key} when its slot word is still the one cached: one
     * 8-byte read instead of a window and an entry. Entries never change and a replaced
     * entry's block is not reused within a grace period, so an unchanged word read less
     * than half a grace after the operation that cached it names the same entry: the
     * value is current (linearized at this read). Null on a miss.
     */
    private byte[] cachedGet(ByteBuffer k) {
        Cached c = cache.get(k);
        if (c == null) {
            return null;
        }
        if (System.nanoTime() - c.at < graceNanos / 2) {
            long w = mem.readLong(c.slotPtr());
            if (w == c.word && System.nanoTime() - c.at < graceNanos / 2) {
                cacheHits.increment();
                return c.value;
            }
        }
        cache.remove(k, c);
        return null;
    }

    private void remember(byte[] key, Table table, int index, long word, byte[] value, long at) {
        if (cacheMax <= 0 || leases != null) {
            return;
        }
        makeRoom(cache);
        cache.put(ByteBuffer.wrap(key), new Cached(table, index, word, value, at));
    }

    /** Drops one entry of a full read cache (whichever the map's iteration meets first). */
    private void makeRoom(ConcurrentHashMap<?, ?> c) {
        if (c.size() >= cacheMax) {
            Iterator<?> it = c.keySet().iterator();
            if (it.hasNext()) {
                it.next();
                it.remove();
            }
        }
    }

    private void forget(byte[] key) {
        if (cacheMax > 0) {
            cache.remove(ByteBuffer.wrap(key));
        }
    }

    /** Gets served by the read cache so far. */
    long cacheHits() {
        long misses = leasedMisses.sum(); // before the lookups: a lookup counted later cannot make the sum too high
        return cacheHits.sum() + leasedLookups.sum() - misses;
    }

    /** Makes the leased cache keep every value decoded by {@code decoder}, handed to every caller (immutable values). */
    void shareDecoded(java.util.function.Function<byte[], Object> decoder) {
        this.sharedDecoder = decoder;
    }

    /**
     * The leased cache's entry for {@code cacheKey} when it may be served: this node holds
     * the entry's stripe cached at the version the value was read under (no change of the
     * stripe's keys can have run since: each runs under the stripe's lock, which
     * invalidates this node's copy first). No verb, no encoding, no hashing of bytes: the
     * cache lookup, and the heap's check of the kept copy (its drop flag and a clock read).
     * Null otherwise. Looks only at the known verdict of the map's life (no root read, no
     * clock): a destroy elsewhere is seen by the next miss, fill or change.
     */
    Object leasedHit(Object cacheKey, boolean decodedForm) {
        handle.checkDead(); // no verb is issued here: the known verdict only, no clock (see Lifecycle)
        if (leased == null) {
            return null;
        }
        leasedLookups.increment();
        Object v = leased.hit(cacheKey, decodedForm);
        if (v == null) {
            leasedMisses.increment();
        }
        return v;
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

    /**
     * The miss path of a leased get: cache the stripe (a fill), look the key up, and keep
     * the value under {@code cacheKey} if the stripe's version held throughout. Returns
     * the value as {@link #leasedHit} would.
     */
    Object leasedFill(byte[] key, long hash, Object cacheKey, boolean decodedForm) {
        live();
        io.membus.coherence.RemoteRef<Long> stripe = leases.stripe(hash);
        long version = leases.heap.cacheVersion(stripe);
        byte[] value = lookup(key, hash);
        java.util.function.Function<byte[], Object> decoder = sharedDecoder;
        io.membus.coherence.CoherentHeap.CachedCopy copy = leases.heap.cachedCopy(stripe);
        Object decoded = value == null || decoder == null ? null : decoder.apply(value);
        if (leased != null && version >= 0 && leases.heap.versionIfValid(copy) == version) {
            leased.keep(cacheKey, MapLeases.stripeIndex(hash), version, copy, value, decoded);
        }
        return value == null ? LeasedCache.ABSENT : decodedForm ? decoded : value;
    }

    /** The value bytes of {@code key}, or null. At most two verbs when the key's window holds it, one when cached. */
    byte[] get(byte[] key, long hash) {
        live();
        if (leases != null) {
            Object v = leasedGet(key, hash, false);
            return v == LeasedCache.ABSENT ? null : (byte[]) v;
        }
        if (cacheMax > 0) {
            byte[] v = cachedGet(ByteBuffer.wrap(key));
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
                Table t = rootTable();
                while (true) {
                    Scan s = scan(t, key, hash, start);
                    switch (s.kind) {
                        case FOUND:
                            if (isMoved(s.word)) {
                                if (!isTomb(s.word)) {
                                    copyInto(mustNext(t), key, hash, identity(s.word) | COPIED, s.entry.value());
                                }
                                t = mustNext(t);
                                continue;
                            }
                            if (isTomb(s.word)) {
                                return null;
                            }
                            byte[] value = s.entry.value();
                            remember(key, t, s.index, s.word, value, start);
                            return value;
                        case EMPTY:
                            return null;
                        case MOVED_EMPTY:
                            t = mustNext(t);
                            continue;
                        default:
                            Table n = nextOf(t);
                            if (n == null) {
                                return null;
                            }
                            t = n;
                    }
                }
            } catch (Restart r) {
                restarts = restarted(restarts);
                if (OperationDeadline.expired()) {
                    // a restarted attempt changed nothing
                    throw DsmTimeoutException.notSent("map operation on root " + RemotePtr.toString(rootBlock)
                            + " (restarted " + restarts + " times)", RemotePtr.nodeId(rootBlock), mem.operationTimeout());
                }
            }
        }
    }

    /**
     * The node holding the entry block of {@code key} in the newest table, 0 when the key is
     * not there (absent, removed, or still in a table being migrated from): a diagnostic for a
     * quiescent map (tests of the placement), not an operation of the map.
     */
    int entryNode(byte[] key, long hash) {
        live();
        Scan s = scan(rootTable(), key, hash, System.nanoTime());
        return s.kind == Kind.FOUND && !isTomb(s.word) && !isMoved(s.word) ? RemotePtr.nodeId(pointerOf(s.word)) : 0;
    }

    /**
     * How far past its home slot {@code key} sits in the newest table (0: in its home slot),
     * -1 when it is not there: a diagnostic for a quiescent map (tests counting the round trips
     * of a lookup, whose first read covers {@value #FIRST_READ_SLOTS} slots), not an operation.
     */
    int windowOffset(byte[] key, long hash) {
        live();
        Table t = rootTable();
        Scan s = scan(t, key, hash, System.nanoTime());
        return s.kind == Kind.FOUND && !isMoved(s.word) ? s.index - home(hash, t.seed, t.log2) : -1;
    }

    /** Changes this handle installed on the slot word its read cache held for the key (one round trip, no lookup). */
    long speculated() {
        return speculated.sum();
    }

    /** Operations this handle started over (a read outlived half the grace or met a reused entry). */
    long restarts() {
        return restartCount.sum();
    }

    private int restarted(int restarts) {
        restartCount.increment();
        if (restarts + 1 > MAX_RESTARTS) {
            throw new DsmMapException(ErrorCode.TIMEOUT, "restarts", "map operation kept restarting: restarts="
                    + MAX_RESTARTS + ", graceMillis=" + graceNanos / 1_000_000 + ", root=" + RemotePtr.toString(rootBlock)
                    + "; every attempt outlived half the grace period or met a reused entry: give the map a longer grace"
                    + " (DsmMapOptions.grace) or unload the nodes");
        }
        return restarts + 1;
    }

    // ================================================================ changes

    /**
     * Applies {@code m} to {@code key} atomically: the function sees the current value
     * and its result is installed by one CAS on the key's slot word, or the function is
     * applied again to the value that won.
     */
    Outcome mutate(byte[] key, long hash, Mutation m) {
        // one deadline for the whole change, whatever its verbs, allocations and restarts (OperationDeadline)
        long scope = OperationDeadline.enter(mem.operationTimeout());
        try {
            live();
            reclaimer.drain();
            if (leases == null) {
                return mutate(key, hash, m, Long.MAX_VALUE);
            }
            return leases.heap.exclusive(leases.stripe(hash), lastChange -> mutate(key, hash, m, lastChange));
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    private Outcome mutate(byte[] key, long hash, Mutation m, long lastChange) {
        int restarts = 0;
        while (true) {
            long start = System.nanoTime();
            try {
                return attempt(key, hash, m, start, lastChange);
            } catch (Restart r) {
                restarts = restarted(restarts);
                if (OperationDeadline.expired()) {
                    // a restarted attempt changed nothing
                    throw DsmTimeoutException.notSent("map operation on root " + RemotePtr.toString(rootBlock)
                            + " (restarted " + restarts + " times)", RemotePtr.nodeId(rootBlock), mem.operationTimeout());
                }
            }
        }
    }

    /**
     * One try of a change. {@code lastChange}: the {@code System.nanoTime()} after which
     * its slot CAS must not be issued (the stripe lock of a map with leased reads may be
     * broken by then), {@code Long.MAX_VALUE} for none.
     */
    private Outcome attempt(byte[] key, long hash, Mutation m, long start, long lastChange) {
        Table t = rootTable();
        BlockRef fresh = null;
        byte[] freshValue = null;
        boolean helped = false;
        try {
            // the slot word this handle's read cache saw for the key, less than half a grace ago: the first try
            // changes it with no lookup. The CAS proves the slot still held that word, which (no block is reused
            // within a grace) still named the cached entry: the value the mutation saw was current.
            Cached hint = cacheMax > 0 && leases == null ? cache.get(ByteBuffer.wrap(key)) : null;
            if (hint != null && (hint.table != t || start - hint.at >= graceNanos / 2)) {
                hint = null;
            }
            while (true) {
                boolean onHint = hint != null;
                int index;
                long word; // the word the CAS expects: 0 for an empty slot
                byte[] current;
                if (onHint) {
                    index = hint.index;
                    word = hint.word;
                    current = hint.value;
                } else {
                    Scan s = scan(t, key, hash, start);
                    if (s.kind == Kind.MOVED_EMPTY || s.kind == Kind.FULL
                            || (s.kind == Kind.FOUND && isMoved(s.word))) {
                        if (s.kind == Kind.FOUND && !isTomb(s.word)) {
                            copyInto(mustNext(t), key, hash, identity(s.word) | COPIED, s.entry.value());
                        }
                        if (s.kind == Kind.FULL && nextOf(t) == null) {
                            startResize(t);
                            migrateWhileTimeLeft(t);
                        } else if (!helped) {
                            helped = true;
                            helpMigrate(t);
                        }
                        t = mustNext(t);
                        continue;
                    }
                    index = s.index;
                    word = s.kind == Kind.FOUND ? s.word : 0;
                    current = s.kind == Kind.FOUND && !isTomb(s.word) ? s.entry.value() : null;
                }
                byte[] next = m.apply(current);
                if (next == KEEP || (next == null && current == null)) {
                    if (onHint) { // a change of nothing is never decided on a cached value: look the key up
                        hint = dropHint(key, hint);
                        continue;
                    }
                    return new Outcome(current, false);
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
                if (onHint && System.nanoTime() - hint.at >= graceNanos / 2) {
                    hint = dropHint(key, hint); // too old by now to vouch for its entry
                    continue;
                }
                checkTime(start);
                if (lastChange != Long.MAX_VALUE && System.nanoTime() - lastChange > 0) {
                    throw new DsmMapException(ErrorCode.TIMEOUT, "stripe-lock", "map change too slow: root="
                            + RemotePtr.toString(rootBlock) + "; it held its stripe's lock so long that a survivor"
                            + " may break it, so it changed nothing (retry; a node this slow is overloaded)");
                }
                long witness;
                try {
                    witness = install(t, index, word, update, key, next);
                } catch (RuntimeException e) {
                    // the CAS may have landed (a timeout leaves it unknown): the entry may be installed, and its
                    // inline copy may still land, so it is never freed here (leaked if it was not installed);
                    // a failure refused before it was sent (mayHaveRun false) installed nothing: freed below
                    if (!(e instanceof io.membus.core.error.DsmException d && !d.mayHaveRun())) {
                        fresh = null;
                    }
                    throw e;
                }
                if (witness != word) {
                    if (onHint) {
                        hint = dropHint(key, hint); // changed since it was cached
                    }
                    continue; // another change won: look again and re-apply
                }
                if (onHint) {
                    speculated.increment();
                }
                if (next != null) {
                    fresh = null; // installed
                    if (word != 0) {
                        retireReplaced(t, word);
                    }
                    remember(key, t, index, update, next, start);
                } else {
                    forget(key);
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
                return new Outcome(current, true);
            }
        } finally {
            if (fresh != null) {
                heap.free(fresh); // never installed: nobody can have read it through a slot
            }
        }
    }

    /** Drops a cached word that could not be changed (it stays if it was replaced meanwhile); returns null. */
    private Cached dropHint(byte[] key, Cached hint) {
        cache.remove(ByteBuffer.wrap(key), hint);
        return null;
    }

    private static int entryClass(BlockRef ref) {
        return ref.isLarge() ? LARGE_CLASS : HeapLayout.blockClassOf(ref.header());
    }

    /** The entry named by {@code old} was replaced in table {@code t}. */
    private void retireReplaced(Table t, long old) {
        long ptr = pointerOf(old);
        if (isCopied(old)) {
            reclaimer.retireAfterTable(t.seq - 1, ptr); // a frozen slot of the table before still names it
        } else {
            reclaimer.retire(ptr);
        }
    }

    /**
     * Allocates and writes a new entry block. An entry larger than the handle's limit is
     * refused before anything is allocated ({@link io.membus.core.error.ValueTooLargeException}).
     * A write refused before it was sent ({@code mayHaveRun() == false}) frees the block;
     * any other failed write leaves it allocated (leaked): the write may still land, and a
     * late write to a block that was reused would change another entry.
     */
    private BlockRef writeEntry(byte[] key, long hash, byte[] value) {
        long size = (long) key.length + value.length;
        if (size > maxEntryBytes) { // before anything is claimed
            throw new io.membus.core.error.ValueTooLargeException(limitedAs + " entry (key " + key.length
                    + " B + value " + value.length + " B)", size, maxEntryBytes, limitSetting);
        }
        int payload = ENTRY_DATA + key.length + value.length;
        BlockRef ref = heap.allocate(payload, entriesOnWriter ? Placement.localFirst(hash) : Placement.byKey(hash));
        if (!fitsSlot(ref.ptr()) || (!ref.isLarge() && HeapLayout.blockClassOf(ref.header()) >= LARGE_CLASS)) {
            heap.free(ref);
            throw DsmMapException.placement(RemotePtr.toString(ref.ptr()), "node=" + ref.nodeId() + ", segment="
                    + ref.segmentIndex() + ", offset=" + RemotePtr.offset(ref.ptr()));
        }
        byte[] b = new byte[payload];
        putLong(b, ENTRY_HEADER_COPY, ref.header());
        putLong(b, ENTRY_HASH, hash);
        putInt(b, ENTRY_KEY_LENGTH, key.length);
        putInt(b, ENTRY_VALUE_LENGTH, value.length);
        System.arraycopy(key, 0, b, ENTRY_DATA, key.length);
        System.arraycopy(value, 0, b, ENTRY_DATA + key.length, value.length);
        putLong(b, ENTRY_CHECK, check(ref.header(), hash, b, ENTRY_DATA, key.length + value.length));
        try {
            mem.write(ref.payload(), b);
        } catch (io.membus.core.error.DsmException e) {
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
     * Sets the largest entry (encoded key + value bytes) this handle writes; {@code as}
     * names the map in the error, {@code setting} where the limit comes from.
     */
    /**
     * The map handle's root, life and operation counts ({@link Handle}; its life is set by
     * {@link DsmCollections} when it opens a named map: every operation checks it, see
     * {@link Lifecycle}). Set once by {@link DsmMap#openAt} before the map is built: the
     * map's final field {@code store} publishes it (a plain field: no extra volatile read on
     * a leased hit).
     */
    Handle handle;

    void handle(Handle h) {
        h.stats().timed(DsmMap.GET, DsmMap.PUT, DsmMap.REMOVE, DsmMap.CHANGE);
        h.stats().alsoCount(DsmMap.GET, leasedLookups::sum);
        this.handle = h;
    }

    /**
     * Fails with a {@link StructureGoneException} once the named map is known to be
     * destroyed (reading its root when the last look is stale): misses, fills, changes.
     */
    private void live() {
        handle.check();
    }

    void limitEntries(long maxBytes, String as, String setting) {
        this.limitedAs = as;
        this.limitSetting = setting;
        this.maxEntryBytes = maxBytes;
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
    private long install(Table t, int index, long expected, long update, byte[] key, byte[] value) {
        if (t.inline == 0 || value == null) {
            return mem.compareAndSwap(t.slot(index), expected, update);
        }
        return mem.writeThenCompareAndSwap(t.inlineArea(index), inlineBytes(t.inline, update, key, value), t.slot(index),
                expected, update);
    }

    /**
     * Puts {@code word} (a frozen key's entry, whose value is {@code value}) into {@code t}
     * unless the key already reached it; the slot's inline area is written first.
     */
    void copyInto(Table t, byte[] key, long hash, long word, byte[] value) {
        long start = System.nanoTime();
        while (true) {
            Scan s;
            try {
                s = scan(t, key, hash, start);
            } catch (Restart r) {
                start = System.nanoTime();
                continue;
            }
            switch (s.kind) {
                case FOUND:
                    return;
                case EMPTY:
                    if (install(t, s.index, 0, word, key, value) == 0) {
                        return;
                    }
                    continue;
                case MOVED_EMPTY:
                    t = mustNext(t);
                    continue;
                default:
                    if (nextOf(t) == null) {
                        startResize(t);
                    }
                    t = mustNext(t);
            }
        }
    }

    // ================================================================ growth

    /** Makes the table after {@code t} (twice as large unless the live keys fill under a quarter of it). */
    void startResize(Table t) {
        if (nextOf(t) != null) {
            return;
        }
        long live = size();
        int log2 = live * 4 >= t.homes() ? t.log2 + 1 : t.log2;
        // spread tables over the nodes with heaps (this node may have none)
        long fresh = newTable(heap, log2, window, inline, t.seq + 1, Placement.byKey(MapLayout.mix(rootBlock ^ t.seq)));
        long witness = mem.compareAndSwap(t.ptr + TABLE_NEXT, 0, fresh);
        if (witness != 0) {
            freeTable(fresh); // another node's table won
            t.next = witness;
        } else {
            t.next = fresh;
        }
    }

    private void freeTable(long payload) {
        long ptr = payload - HeapLayout.BLOCK_HEADER_LENGTH;
        long header = mem.readLong(payload + TABLE_BLOCK_HEADER);
        heap.free(BlockRef.of(ptr, header, 0));
    }

    /**
     * The resize's starter migrates ranges of {@code t} while more than three quarters of
     * its operation's deadline are left (at least one range), then goes on with its own change
     * in the next table; the ranges left are migrated by the operations that meet a frozen
     * slot, one range each (docs/collections.md, "Growth without stopping anyone"). Migrating
     * every range in the starter's call made one put carry four or five round trips per live
     * key of the table: a large map's growth outlived the put's deadline (seen with one
     * backup, where every change costs more).
     */
    private void migrateWhileTimeLeft(Table t) {
        long keep = mem.operationTimeout().toNanos() * 3 / 4; // a range may take a while: stop early
        while (helpMigrate(t) && OperationDeadline.remainingNanos(Long.MAX_VALUE / 4) > keep) {
            // keep going
        }
    }

    /** Migrates ranges of {@code t} until none is left to claim. */
    void migrateAll(Table t) {
        while (helpMigrate(t)) {
            // keep going
        }
    }

    /** Claims and migrates one range of {@code t}'s slots; false when every range was claimed. */
    boolean helpMigrate(Table t) {
        if (nextOf(t) == null) {
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
        long[] w = readWords(t.slot(from), to - from);
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
    private void migrateSlot(Table t, int i, long w) {
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
                Entry e = readEntry(w, System.nanoTime());
                copyInto(mustNext(t), e.key(), e.hash, identity(w) | COPIED, e.value());
                return;
            } catch (Restart r) {
                // a frozen live entry is not retired before the root passes t: a restart here is a slow read
                if (++failures > MAX_RESTARTS) {
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
     */
    private void repairIfStalled(Table t) {
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
        if (now - t.stalledSince < 4 * graceNanos) {
            return;
        }
        for (int from = 0; from < total; from += MIGRATE_RANGE) {
            int to = Math.min(total, from + MIGRATE_RANGE);
            long[] w = readWords(t.slot(from), to - from);
            for (int i = from; i < to; i++) {
                migrateSlot(t, i, w[i - from]);
            }
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
    Table advanceRootAndGet() {
        advanceRoot();
        return rootTable();
    }

    /** Moves the root's TABLE along the chain past every fully migrated table. */
    void advanceRoot() {
        while (true) {
            long r = mem.readLong(root + ROOT_TABLE);
            Table tr = table(r);
            Table n = nextOf(tr);
            if (n == null || mem.readLong(tr.ptr + TABLE_DONE) < tr.total()) {
                break;
            }
            mem.compareAndSwap(root + ROOT_TABLE, r, n.ptr);
        }
        refreshRoot(System.nanoTime());
    }

    // ================================================================ size and scans

    /** The sum of every node's counter: exact when no change is in flight. */
    long size() {
        live();
        long[] w = readWords(root + ROOT_COUNTERS, STRIPES);
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
        return new MapScanIterator(this, rootTable());
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

    /**
     * Frees every entry block and every table (the map must be quiescent: no other
     * node uses it). Finishes any migration first, so the last table names every entry.
     */
    void destroyTables() {
        List<Long> all = allTables();
        for (long p : all) {
            migrateAll(table(p));
        }
        Table last = table(all.get(all.size() - 1));
        for (int from = 0; from < last.total(); from += 1024) {
            int n = Math.min(1024, last.total() - from);
            long[] w = readWords(last.slot(from), n);
            for (long word : w) {
                if (pointerOf(word) != 0) {
                    reclaimer.retire(pointerOf(word));
                }
            }
        }
        reclaimer.rootAdvanced(Long.MAX_VALUE);
        reclaimer.drainAll();
        for (long t : all) {
            freeTable(t);
        }
    }
}
