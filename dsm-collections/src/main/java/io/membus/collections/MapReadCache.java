package io.membus.collections;

import io.membus.core.RemoteMemory;

import java.nio.ByteBuffer;
import java.util.Iterator;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * The validated read cache of a {@link DsmMap} without leased reads: key bytes to the slot
 * word and value last seen. A hit costs one 8-byte read of the slot word: entries never
 * change and a replaced entry's block is not reused within a grace period, so an unchanged
 * word read less than half a grace after the operation that cached it names the same
 * entry, and the value is current (linearized at that read). A change may also start from
 * the cached word ({@link #hint}): its CAS proves the word still held.
 *
 * <p><b>Note:</b> thread-safe: a concurrent map of immutable records; a full cache drops
 * whichever entry its iteration meets first. No memory ordering of its own: a hit is as
 * fresh as the slot read that validates it.
 */
final class MapReadCache {
    /** A key's slot word (slot {@code index} of {@code table}) and value as seen by an operation that started at {@code at}. */
    record Cached(MapTable table, int index, long word, byte[] value, long at) {
        long slotPtr() {
            return table.slot(index);
        }
    }

    private final RemoteMemory mem;
    private final long graceNanos;
    private final int cacheMax;
    /** False for a map with leased reads, whose values are cached by {@link MapLeasedReads} instead. */
    private final boolean enabled;
    private final ConcurrentHashMap<ByteBuffer, Cached> cache = new ConcurrentHashMap<>();
    /** Gets served by this cache. */
    private final LongAdder hits = new LongAdder();

    MapReadCache(RemoteMemory mem, long graceNanos, int cacheMax, boolean leasedReads) {
        this.mem = mem;
        this.graceNanos = graceNanos;
        this.cacheMax = cacheMax;
        this.enabled = cacheMax > 0 && !leasedReads;
    }

    /** Whether gets look here first (a read cache, and no leased reads). */
    boolean enabled() {
        return enabled;
    }

    /**
     * The cached value of {@code key} when its slot word is still the one cached: one
     * 8-byte read instead of a window and an entry. Null on a miss.
     */
    byte[] get(ByteBuffer k) {
        Cached c = cache.get(k);
        if (c == null) {
            return null;
        }
        if (System.nanoTime() - c.at < graceNanos / 2) {
            long w = mem.readLong(c.slotPtr());
            if (w == c.word && System.nanoTime() - c.at < graceNanos / 2) {
                hits.increment();
                return c.value;
            }
        }
        cache.remove(k, c);
        return null;
    }

    /** What the cache holds for {@code key} (no verb), for a change that starts from the cached word; or null. */
    Cached hint(byte[] key) {
        return enabled ? cache.get(ByteBuffer.wrap(key)) : null;
    }

    void remember(byte[] key, MapTable table, int index, long word, byte[] value, long at) {
        if (!enabled) {
            return;
        }
        makeRoom();
        cache.put(ByteBuffer.wrap(key), new Cached(table, index, word, value, at));
    }

    /** Drops one entry of a full read cache (whichever the map's iteration meets first). */
    private void makeRoom() {
        if (cache.size() >= cacheMax) {
            Iterator<?> it = cache.keySet().iterator();
            if (it.hasNext()) {
                it.next();
                it.remove();
            }
        }
    }

    void forget(byte[] key) {
        if (cacheMax > 0) {
            cache.remove(ByteBuffer.wrap(key));
        }
    }

    /** Drops a cached word that could not be changed (it stays if it was replaced meanwhile); returns null. */
    Cached dropHint(byte[] key, Cached hint) {
        cache.remove(ByteBuffer.wrap(key), hint);
        return null;
    }

    /** Gets served by this cache so far. */
    long hits() {
        return hits.sum();
    }
}
