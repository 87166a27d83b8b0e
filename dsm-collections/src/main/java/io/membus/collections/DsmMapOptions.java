package io.membus.collections;

import io.membus.coherence.CoherentHeap;
import io.membus.core.error.DsmConfigException;

import java.time.Duration;

/**
 * How a {@link DsmMap} is created: the size of its first table and the grace period
 * after which a removed entry's block is freed (both written into the map's root, so
 * every node uses the values the creator chose), and the size of a handle's local
 * read cache.
 *
 * <p>The grace period bounds how long one map operation may take: a lookup that
 * took longer than half of it starts over (its entry block might have been freed
 * and reused meanwhile). Longer graces hold removed entries longer (memory), shorter
 * ones make slow operations retry.
 *
 * <p><b>Leased reads.</b> A map created with {@link #leasedReads(boolean)} serves a
 * repeated {@code get} from this node's memory, with no verb, while this node holds a
 * lease of the coherence layer on the key's stripe (one of {@value MapLeases#STRIPES}
 * coherent objects); every change of a key first takes its stripe's write lock, which
 * invalidates the nodes caching it (or waits out their leases). Reads never see a stale
 * value; changes cost the lock (about five more verbs, and an invalidation round trip
 * per node caching the stripe). Every handle of such a map needs this node's
 * {@link CoherentHeap} ({@link #coherentHeap}; {@link DsmCollections} built with a heap
 * passes it). A cached get hands every caller the same value object when the value type
 * is immutable (boxed primitives, {@code String}, {@code UUID}, enums) and a freshly
 * decoded one otherwise, so a caller that mutates a value it got changes nobody else's.
 *
 * <p><b>Inline entries.</b> {@link #inlineEntryBytes(int)}: entries of up to 262 bytes of key
 * and value (by default) sit beside their table slots, so an uncached get of one, and a
 * put's read of it, is a single round trip.
 *
 * <p><b>Note:</b> immutable value; thread-safe.
 */
public final class DsmMapOptions {
    /**
     * The default inline area per slot: 272 bytes, so an entry of key + value up to 262 bytes
     * (each at most 255) is read with its slot: every entry of up to 256 bytes but one of an
     * empty key or value and 256 bytes for the other. Costs 280 bytes per table slot (the
     * word and the area) where 48-byte areas cost 56: docs/collections.md, "Entries beside
     * their slots", weighs it.
     */
    public static final int DEFAULT_INLINE_BYTES = 272;
    private final int initialSlots;
    private final Duration grace;
    private final int readCacheEntries;
    private final boolean leasedReads;
    private final CoherentHeap coherentHeap;
    private final int inlineBytes;
    private final EntryPlacement entryPlacement;

    /**
     * Where a handle allocates the entry blocks of the keys it writes (a choice of each
     * handle, not kept in the map: every placement names blocks every node can read).
     */
    public enum EntryPlacement {
        /**
         * This node's heap while it has room, then the other members in the key's order
         * ({@link io.membus.alloc.Placement#localFirst}): a put writes its entry with a
         * memory copy and the block it replaced is freed (when this node wrote it too) with a
         * local CAS, so a put costs two round trips to the table's node (the window's read and
         * the install). Readers do not care where a small entry lives (they read its inline
         * copy beside the slot). The default.
         *
         * <p>A node without a heap (a client) has no heap of its own: a plain {@code put}
         * places its entry on the node of the key's table (the other members in the key's
         * order when that heap is full or gone), and the entry's write travels in the round
         * trip that reads the key's window, so a client's put is two round trips too (issue
         * 28); its other changes ({@code putIfAbsent}, {@code compute}, ..., whose value
         * depends on what the lookup finds) place it as above and write it after the lookup.
         */
        WRITER,
        /**
         * The node the key's hash picks ({@link io.membus.alloc.Placement#byKey(long)}):
         * entries spread evenly over the members whoever writes them, at the cost of the
         * entry's write and the old entry's free crossing the network for the keys placed
         * elsewhere (about 3.5 round trips per put on two nodes).
         */
        KEY
    }

    private DsmMapOptions(int initialSlots, Duration grace, int readCacheEntries, boolean leasedReads,
                          CoherentHeap coherentHeap) {
        this(initialSlots, grace, readCacheEntries, leasedReads, coherentHeap, DEFAULT_INLINE_BYTES,
                EntryPlacement.WRITER);
    }

    private DsmMapOptions(int initialSlots, Duration grace, int readCacheEntries, boolean leasedReads,
                          CoherentHeap coherentHeap, int inlineBytes, EntryPlacement entryPlacement) {
        this.inlineBytes = inlineBytes;
        this.entryPlacement = entryPlacement;
        this.initialSlots = initialSlots;
        this.grace = grace;
        this.readCacheEntries = readCacheEntries;
        this.leasedReads = leasedReads;
        this.coherentHeap = coherentHeap;
    }

    private DsmMapOptions(int initialSlots, Duration grace, int readCacheEntries) {
        this(initialSlots, grace, readCacheEntries, false, null);
    }

    /**
     * 256 home slots, a grace of one second, a read cache of 1024 entries, no leased reads,
     * 272-byte inline areas (entries of up to 262 bytes read with their slot), entries on the
     * writer's node.
     */
    public static DsmMapOptions defaults() {
        return new DsmMapOptions(256, Duration.ofSeconds(1), 1024);
    }

    /**
     * Whether a map created with these options serves repeated gets under leases of the
     * coherence layer (see the class comment). Chosen at creation and kept in the map's
     * root: every node then follows it. Needs {@link #coherentHeap}.
     */
    public DsmMapOptions leasedReads(boolean on) {
        return new DsmMapOptions(initialSlots, grace, readCacheEntries, on, coherentHeap, inlineBytes, entryPlacement);
    }

    public boolean leasedReads() {
        return leasedReads;
    }

    /** This node's coherent heap: what a handle of a map with leased reads locks and caches through. */
    public DsmMapOptions coherentHeap(CoherentHeap heap) {
        return new DsmMapOptions(initialSlots, grace, readCacheEntries, leasedReads, heap, inlineBytes, entryPlacement);
    }

    /** The heap given by {@link #coherentHeap(CoherentHeap)}, or null. */
    public CoherentHeap coherentHeap() {
        return coherentHeap;
    }

    /**
     * Entries this node's handle keeps in its validated read cache (0: none). A cached
     * get reads only the key's slot word (8 bytes, one verb) and returns the cached value
     * when the word is unchanged; it never returns a stale value. A change of a cached key
     * ({@code put}, {@code replace}, {@code remove}, {@code compute*}, {@code merge}) installs on the cached
     * word with no lookup (one round trip), and looks the key up only when that CAS finds
     * the word changed. Local to the handle.
     */
    public DsmMapOptions readCacheEntries(int entries) {
        if (entries < 0 || entries > (1 << 24)) {
            throw new DsmConfigException("readCacheEntries", String.valueOf(entries), "0 .. 16777216");
        }
        return new DsmMapOptions(initialSlots, grace, entries, leasedReads, coherentHeap, inlineBytes, entryPlacement);
    }

    public int readCacheEntries() {
        return readCacheEntries;
    }

    /** Home slots of the first table: rounded up to a power of two, 16 .. 2^26. */
    public DsmMapOptions initialSlots(int slots) {
        if (slots < 1 || slots > (1 << 26)) {
            throw new DsmConfigException("initialSlots", String.valueOf(slots), "1 .. 67108864");
        }
        int n = Math.max(16, Integer.highestOneBit(slots - 1) << 1);
        return new DsmMapOptions(n, grace, readCacheEntries, leasedReads, coherentHeap, inlineBytes, entryPlacement);
    }

    /**
     * Bytes of the <b>inline area</b> beside each table slot, where a copy of the slot's
     * entry sits when key and value together take at most {@code bytes - 10}: an uncached
     * get of such a key is one round trip (the window's slot words and its inline areas,
     * two reads issued together) instead of two; key and value may take at most 255 bytes
     * each. 0 turns it off (every slot is one word); else a multiple of 8 from 16 to
     * {@value MapLayout#MAX_INLINE}. Costs {@code bytes} more per slot in every table, the
     * areas of the first slots of a window on every lookup over the network
     * ({@code 8 * bytes}), and one more write (linked to the slot's CAS) per change. Chosen
     * at creation and kept in the map's root. Default {@value #DEFAULT_INLINE_BYTES}: every
     * entry of up to 256 bytes (but an empty key or value beside 256 bytes) in one round
     * trip; a map of small entries that is short of memory may choose less.
     */
    public DsmMapOptions inlineEntryBytes(int bytes) {
        if (bytes != 0 && (bytes < 16 || bytes > MapLayout.MAX_INLINE || bytes % 8 != 0)) {
            throw new DsmConfigException("inlineEntryBytes", String.valueOf(bytes),
                    "0 (off), or a multiple of 8 from 16 to " + MapLayout.MAX_INLINE);
        }
        return new DsmMapOptions(initialSlots, grace, readCacheEntries, leasedReads, coherentHeap, bytes,
                entryPlacement);
    }

    public int inlineEntryBytes() {
        return inlineBytes;
    }

    /** Where this handle allocates the entries it writes ({@link EntryPlacement}); default {@link EntryPlacement#WRITER}. */
    public DsmMapOptions entryPlacement(EntryPlacement placement) {
        if (placement == null) {
            throw new DsmConfigException("entryPlacement", "null", "WRITER or KEY");
        }
        return new DsmMapOptions(initialSlots, grace, readCacheEntries, leasedReads, coherentHeap, inlineBytes,
                placement);
    }

    public EntryPlacement entryPlacement() {
        return entryPlacement;
    }

    /** The grace period: 10 ms .. 1 hour. */
    public DsmMapOptions grace(Duration grace) {
        if (grace == null || grace.toMillis() < 10 || grace.toHours() > 1) {
            throw new DsmConfigException("grace", String.valueOf(grace), "10 ms .. 1 h");
        }
        return new DsmMapOptions(initialSlots, grace, readCacheEntries, leasedReads, coherentHeap, inlineBytes,
                entryPlacement);
    }

    public int initialSlots() {
        return initialSlots;
    }

    public Duration grace() {
        return grace;
    }
}
