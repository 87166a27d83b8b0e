package io.membus.collections;

import io.membus.coherence.CoherentHeap;
import io.membus.coherence.RemoteRef;

import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;

/**
 * The leased read cache of a {@link DsmMap} with leased reads ({@link MapLeases}): key to
 * value, each kept under the version of the key's stripe it was read under, served with no
 * verb while this node holds that stripe cached at that version in the coherence layer.
 * No change of the stripe's keys can have run since: each runs under the stripe's lock,
 * which invalidates this node's copy first. A miss caches the stripe (a fill), looks the
 * key up in the table and keeps the value if the version held throughout.
 *
 * <p><b>Note:</b> thread-safe: the {@link LeasedCache} is concurrent, the counters are
 * adders (a lookup is counted in the calling thread's own cell, see
 * {@link #leasedLookups}). Memory ordering is the coherence layer's: a kept copy is served
 * only while the heap says its lease and version hold.
 */
final class MapLeasedReads {
    /** A map's lookup in its table: the value bytes of a key, or null. */
    interface Lookup {
        byte[] lookup(byte[] key, long hash);
    }

    /** The lease stripes of the map, or null (no leased reads: nothing is ever cached here). */
    private final MapLeases leases;
    /**
     * Leased read cache, or null (no leased reads, or no read cache): key (the key object
     * for key types whose equal objects encode to equal bytes, see {@link DsmMap}; else its
     * bytes, wrapped) to the value ({@link LeasedCache#ABSENT}: absent) and the stripe's
     * version it was read under.
     */
    private final LeasedCache<CoherentHeap.CachedCopy> leased;
    /** Decodes a value once for every caller of the leased cache (values of an immutable type), or null: never. */
    private volatile Function<byte[], Object> sharedDecoder;
    /**
     * Lookups in the leased cache, and those that missed: the leased hits are the
     * difference. Counted so because a leased hit costs tens of nanoseconds: the lookup is
     * counted before it starts (its count overlaps the lookup's memory reads, where a count
     * after the hit would wait for the clock read that ends it), into a cell of the calling
     * thread's own (no atomic instruction), and a miss, which goes on to read remote
     * memory, is counted by a {@link LongAdder}.
     */
    final OwnedCounter leasedLookups = new OwnedCounter();
    private final LongAdder leasedMisses = new LongAdder();

    /**
     * @param objectKeyType the key type whose objects key the cache (see {@link DsmMap}), or
     *                      null when keys are cached as their bytes
     */
    MapLeasedReads(MapLeases leases, int cacheMax, Class<?> objectKeyType) {
        this.leases = leases;
        this.leased = leases != null && cacheMax > 0
                ? new LeasedCache<>(leases.heap::versionIfValid, leases.heap.clock(), MapLeases.STRIPES, cacheMax,
                objectKeyType) : null;
    }

    /** Leased hits so far (read the misses first: a lookup counted later cannot make the difference too high). */
    long hits() {
        long misses = leasedMisses.sum(); // before the lookups: a lookup counted later cannot make the sum too high
        return leasedLookups.sum() - misses;
    }

    /** Makes the leased cache keep every value decoded by {@code decoder}, handed to every caller (immutable values). */
    void shareDecoded(Function<byte[], Object> decoder) {
        this.sharedDecoder = decoder;
    }

    /**
     * The cache's entry for {@code cacheKey} when it may be served (no verb, no encoding, no
     * hashing of bytes: the cache lookup, and the heap's check of the kept copy, its drop
     * flag and a clock read); null otherwise.
     */
    Object hit(Object cacheKey, boolean decodedForm) {
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
     * The miss path of a leased get: cache the stripe (a fill), look the key up with
     * {@code table}, and keep the value under {@code cacheKey} if the stripe's version held
     * throughout. Returns the value as {@link #hit} would.
     */
    Object fill(byte[] key, long hash, Object cacheKey, boolean decodedForm, Lookup table) {
        RemoteRef<Long> stripe = leases.stripe(hash);
        long version = leases.heap.cacheVersion(stripe);
        byte[] value = table.lookup(key, hash);
        Function<byte[], Object> decoder = sharedDecoder;
        CoherentHeap.CachedCopy copy = leases.heap.cachedCopy(stripe);
        Object decoded = value == null || decoder == null ? null : decoder.apply(value);
        if (leased != null && version >= 0 && leases.heap.versionIfValid(copy) == version) {
            leased.keep(cacheKey, MapLeases.stripeIndex(hash), version, copy, value, decoded);
        }
        return value == null ? LeasedCache.ABSENT : decodedForm ? decoded : value;
    }
}
