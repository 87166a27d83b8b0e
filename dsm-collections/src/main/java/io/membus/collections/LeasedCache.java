package io.membus.collections;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;
import java.util.Objects;
import io.membus.core.time.Clock;

/**
 * The leased read cache of a {@link DsmMap} handle: key to the value read under a lease
 * stripe's version, and the hit check that serves it with no verb.
 *
 * <p><b>Why a table of its own.</b> A leased hit costs one clock read (the lease rule)
 * and this lookup, and on x86 the clock read is ordered after every load before it
 * ({@code rdtscp} in the vDSO): the lookup's cache misses are not overlapped with
 * anything, so each dependent miss adds its full latency to the get. A
 * {@code ConcurrentHashMap<Object, Entry>} hit follows four dependent pointers (bin, node,
 * stored key, entry); this table is flat: a slot's key bits, version and state are four
 * words of one {@code long[]}, the value is at the same index of a parallel array, so a
 * hit of a key of a boxed integral type ({@code Long}, {@code Integer}, {@code Short},
 * {@code Byte}, {@code Character}, {@code Boolean}), kept as its bits, costs the slot's
 * line and the value's, loaded side by side. Other keys (strings, UUIDs, the wrapped
 * bytes of any key) are kept with their hash in the slot and compared with
 * {@code equals}.
 *
 * <p><b>The hit check.</b> A slot keeps the index of the key's lease stripe and the
 * stripe's version the value was read under; the cache keeps the last cached copy of
 * each stripe it was handed ({@link #keep}; {@code C}: a
 * {@link io.membus.coherence.CoherentHeap.CachedCopy} in a map). A hit is served when
 * that copy was served at that version at the time the hit read the clock, before it
 * looked the key up, and has not been dropped since
 * ({@link io.membus.coherence.CoherentHeap#versionIfValid(io.membus.coherence.CoherentHeap.CachedCopy, long)}):
 * every change of a key runs under its stripe's lock, which drops this node's copy (or
 * waits out its lease) and gives the stripe a new version, so the value was current at
 * some instant within the get: at that clock reading, or, for a value kept by a fill
 * that ran after it, when that fill read it (docs/collections.md, "Leased reads", gives
 * the whole argument). A copy at the same version that is not the one kept only makes a
 * miss, never a wrong hit.
 *
 * <p><b>Layout and changes.</b> Open addressing with linear probing in a power-of-two
 * table; an evicted key leaves a tombstone, and the table is rebuilt (grown up
 * to twice the bound, or at its size to drop tombstones) into new arrays that are then
 * published. Changes are serialised by the cache's monitor (they follow a lookup of the
 * key in remote memory, which costs far more); each writes its slot under the slot's
 * sequence word (odd while it writes). A reader reads the sequence, the slot and the
 * value, and the sequence again: a slot being written, or rewritten in between, is a
 * miss, so a hit never pairs one key with another key's value or version. A reader on a
 * table that was replaced reads values that were right for their version: the version
 * check decides, as for any other entry.
 *
 * <p><b>Note:</b> thread-safe: reads are lock-free and allocate nothing; changes hold the
 * monitor. Memory ordering: a slot's words are written with opaque stores between the
 * sequence's odd store (followed by a store-store fence) and its release store; the
 * reader loads the sequence, then (after an acquire fence) the slot and the value with
 * plain loads, then (after a load-load fence) the sequence again, and uses what it read
 * only when the sequence was even and unchanged: the seqlock protocol, as
 * {@link java.util.concurrent.locks.StampedLock}'s optimistic reads do it. The table is
 * published through a volatile field; copies of stripes are read without ordering (see
 * {@code copies}).
 */
final class LeasedCache<C> {
    /** What {@link #hit} returns for a key cached as absent from the map. */
    static final Object ABSENT = new Object() {
        @Override
        public String toString() {
            return "ABSENT";
        }
    };

    private static final VarHandle WORDS = MethodHandles.arrayElementVarHandle(long[].class);
    private static final int MAX_SLOTS = 1 << 21;
    private static final int MIN_SLOTS = 16;
    /** Words per slot: sequence, key bits (or hash), version, meta. */
    private static final int SLOT = 4;

    /** Slot states (meta bits 0-1). */
    private static final int EMPTY = 0;
    private static final int LIVE = 1;
    private static final int TOMB = 2;

    /** Kinds of key (meta bits 8-15): compared by the bits kept in the slot, or by {@code equals}; {@link #INTEGRAL} order. */
    private static final int OBJECT = 0;
    private static final int LONG = 1;
    private static final int INT = 2;
    private static final int SHORT = 3;
    private static final int BYTE = 4;
    private static final int CHAR = 5;
    private static final int BOOL = 6;

    /** The arrays of one table; replaced whole by a rebuild. */
    private static final class Table {
        final long[] words;
        final Object[] keys;
        final Object[] values;
        final Object[] decoded;
        final int mask;
        /** Slots not empty (live or tombstones); written under the monitor. */
        int used;

        Table(int slots) {
            words = new long[slots * SLOT];
            keys = new Object[slots];
            values = new Object[slots];
            decoded = new Object[slots];
            mask = slots - 1;
        }
    }

    /** Whether a copy of a stripe was served at a time: its version if so, else -1. */
    @FunctionalInterface
    interface Validity<C> {
        /** {@code copy}'s version if it was served at {@code nowMicrosAtLeast} and is not dropped, else -1 (null: -1). */
        long versionIfValid(C copy, long nowMicrosAtLeast);
    }

    private final Validity<? super C> validity;
    private final Clock clock;
    /**
     * The last cached copy of each stripe handed to {@link #keep}, by stripe index. Read
     * without ordering: a copy is safely published (final fields, a volatile drop flag),
     * and an older copy than the last only makes a miss.
     */
    private final Object[] copies;
    private final int max;
    private final int maxSlots;
    private final int keyKind;
    private final Class<?> keyType;
    private volatile Table table = new Table(MIN_SLOTS);
    /** Live keys; written under the monitor. */
    private int live;
    private int evictCursor;

    /**
     * @param validity whether a copy is served at a time ({@code CoherentHeap::versionIfValid})
     * @param clock    the clock that time is read from (the heap's)
     * @param stripes  number of lease stripes
     * @param max     keys kept at most (at least 1; above 2<sup>20</sup>, 2<sup>20</sup>)
     * @param keyType the map's key type when the cache is keyed by key objects of that type, or null
     */
    LeasedCache(Validity<? super C> validity, Clock clock, int stripes, int max, Class<?> keyType) {
        if (max < 1) {
            throw new IllegalArgumentException("a leased cache keeps at least one key: max=" + max);
        }
        this.validity = Objects.requireNonNull(validity, "validity");
        this.clock = Objects.requireNonNull(clock, "clock");
        this.copies = new Object[stripes];
        this.maxSlots = Math.max(MIN_SLOTS, Math.min(MAX_SLOTS, Integer.highestOneBit(Math.min(max, MAX_SLOTS)) << 2));
        this.max = Math.min(max, maxSlots / 2); // at most half the slots live: probes stay short, and end
        this.keyKind = kindOf(keyType);
        this.keyType = keyType;
    }

    /** The integral key types, at their kind minus one. */
    private static final List<Class<?>> INTEGRAL = List.of(Long.class, Integer.class, Short.class, Byte.class,
            Character.class, Boolean.class);

    private static int kindOf(Class<?> type) {
        return type == null ? OBJECT : INTEGRAL.indexOf(type) + 1; // OBJECT (0) when it is none of them
    }

    /** The kind {@code key} is kept as: the map's integral kind for an object of that type, else {@link #OBJECT}. */
    private int kind(Object key) {
        return keyKind != OBJECT && key.getClass() == keyType ? keyKind : OBJECT;
    }

    /** The bits a key of {@code kind} is kept as: its value for an integral kind, its hash for an object. */
    private static long bits(Object key, int kind) {
        switch (kind) {
            case LONG:
                return (Long) key;
            case INT:
                return (Integer) key;
            case SHORT:
                return (Short) key;
            case BYTE:
                return (Byte) key;
            case CHAR:
                return (Character) key;
            case BOOL:
                return (Boolean) key ? 1 : 0;
            default:
                return key.hashCode();
        }
    }

    /** The home slot of key bits in a table of {@code mask + 1} slots. */
    static int home(long bits, int mask) {
        return (int) ((bits * 0x9E3779B97F4A7C15L) >>> 40) & mask;
    }

    private static long meta(int state, int kind, int stripe) {
        return state | (long) kind << 8 | (long) stripe << 16;
    }

    /** Whether a slot's meta word is that of a live key of {@code kind}. */
    private static boolean liveOfKind(long meta, int kind) {
        return (meta & 0xff03) == (LIVE | kind << 8);
    }

    /**
     * The value of {@code key} when a kept one may be served now (see the class comment):
     * its decoded form when {@code decodedForm} (kept only when a decoded value was handed
     * to {@link #keep}), else its bytes; {@link #ABSENT} for a key kept as absent. Null: a
     * miss — nothing kept, a slot being written, or a stripe copy that is no longer served.
     * No allocation, no lock.
     */
    @SuppressWarnings("unchecked")
    Object hit(Object key, boolean decodedForm) {
        // the clock first: the lookup's reads may then overlap the end of the clock read, where
        // after it they would all have to complete before the clock read could start (lfence)
        long now = clock.nowMicrosAtLeast();
        Table t = table;
        int kind = kind(key);
        long bits = bits(key, kind);
        long[] w = t.words;
        int mask = t.mask;
        for (int i = home(bits, mask), probe = 0; probe <= mask; probe++, i = (i + 1) & mask) {
            int b = i * SLOT;
            long seq = w[b];
            VarHandle.acquireFence(); // the slot's words and value are read after its sequence
            long meta = w[b + 3];
            if ((meta & 3) == EMPTY || (seq & 1) != 0) {
                return null;
            }
            if (!liveOfKind(meta, kind) || w[b + 1] != bits) {
                continue;
            }
            long version = w[b + 2];
            Object k = kind == OBJECT ? t.keys[i] : null;
            Object v = decodedForm ? t.decoded[i] : t.values[i];
            VarHandle.loadLoadFence(); // ... and before it again
            if (w[b] != seq || v == null) {
                return null;
            }
            if (kind == OBJECT && !key.equals(k)) {
                continue;
            }
            return validity.versionIfValid((C) copies[(int) (meta >>> 16)], now) == version ? v : null;
        }
        return null;
    }

    /**
     * Keeps the value of {@code key} read under {@code copy} (of stripe {@code stripe}) at
     * {@code version}, in place of what the key had: {@code value} its bytes or null for
     * absent, {@code decoded} its decoded form or null. Evicts another key when the cache
     * holds its bound.
     */
    synchronized void keep(Object key, int stripe, long version, C copy, byte[] value,
                           Object decoded) {
        Objects.requireNonNull(key, "key");
        copies[stripe] = copy;
        int kind = kind(key);
        long bits = bits(key, kind);
        Table t = table;
        int at = find(t, key, kind, bits);
        if (at < 0) {
            if (live >= max) {
                evict(t);
            }
            if (t.used + 1 > (t.mask + 1) / 4 * 3) {
                t = rebuild(live + 1 > (t.mask + 1) / 2 ? Math.min(maxSlots, (t.mask + 1) * 2) : t.mask + 1);
            }
            at = freeSlot(t, bits);
            if ((t.words[at * SLOT + 3] & 3) == EMPTY) {
                t.used++;
            }
            live++;
        }
        Object v = value == null ? ABSENT : value;
        Object d = value == null ? ABSENT : decoded;
        write(t, at, bits, version, meta(LIVE, kind, stripe), kind == OBJECT ? key : null, v, d);
    }

    /** Keys kept now. */
    synchronized int size() {
        return live;
    }

    /** The slot of a live key, or -1. Under the monitor. */
    private static int find(Table t, Object key, int kind, long bits) {
        long[] w = t.words;
        for (int i = home(bits, t.mask), probe = 0; probe <= t.mask; probe++, i = (i + 1) & t.mask) {
            long meta = w[i * SLOT + 3];
            if ((meta & 3) == EMPTY) {
                return -1;
            }
            if (liveOfKind(meta, kind) && w[i * SLOT + 1] == bits
                    && (kind != OBJECT || key.equals(t.keys[i]))) {
                return i;
            }
        }
        return -1;
    }

    /** The first empty or tombstone slot of {@code bits}'s probe sequence (the table has one). Under the monitor. */
    private static int freeSlot(Table t, long bits) {
        for (int i = home(bits, t.mask); ; i = (i + 1) & t.mask) {
            if ((t.words[i * SLOT + 3] & 3) != LIVE) {
                return i;
            }
        }
    }

    /** Turns the next live slot after the cursor into a tombstone. Under the monitor. */
    private void evict(Table t) {
        for (int k = 0; k <= t.mask; k++) {
            int i = (evictCursor + k) & t.mask;
            if ((t.words[i * SLOT + 3] & 3) == LIVE) {
                write(t, i, 0, 0, meta(TOMB, 0, 0), null, null, null);
                live--;
                evictCursor = i + 1;
                return;
            }
        }
    }

    /** Copies the live keys into a new table of {@code slots} slots and publishes it. Under the monitor. */
    private Table rebuild(int slots) {
        Table old = table;
        Table t = new Table(slots);
        for (int i = 0; i <= old.mask; i++) {
            int b = i * SLOT;
            long meta = old.words[b + 3];
            if ((meta & 3) == LIVE) {
                int at = freeSlot(t, old.words[b + 1]);
                write(t, at, old.words[b + 1], old.words[b + 2], meta, old.keys[i], old.values[i], old.decoded[i]);
                t.used++;
            }
        }
        table = t;
        return t;
    }

    /** Writes one slot under its sequence word. Under the monitor. */
    private static void write(Table t, int i, long bits, long version, long meta, Object key, Object value,
                              Object decoded) {
        int b = i * SLOT;
        long seq = t.words[b];
        WORDS.setOpaque(t.words, b, seq + 1);
        VarHandle.storeStoreFence();
        WORDS.setOpaque(t.words, b + 1, bits);
        WORDS.setOpaque(t.words, b + 2, version);
        WORDS.setOpaque(t.words, b + 3, meta);
        t.keys[i] = key;
        t.values[i] = value;
        t.decoded[i] = decoded;
        WORDS.setRelease(t.words, b, seq + 2);
    }
}
