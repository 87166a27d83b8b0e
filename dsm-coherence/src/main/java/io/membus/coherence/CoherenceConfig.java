package io.membus.coherence;

import io.membus.core.error.DsmConfigException;

import java.time.Duration;

/**
 * Settings of a {@link CoherentHeap}.
 *
 * @param caching       whether objects are cached under leases by default (per object it can be turned off)
 * @param clockBound    ε: how far apart the nodes' wall clocks may be; a lease is trusted only until
 *                      its expiry minus ε, and a writer that cannot reach a sharer waits until expiry plus ε
 * @param minLease      the shortest lease (objects written often)
 * @param maxLease      the longest lease (objects rarely written)
 * @param lockTimeout   how long a write lock may be seen held, by one observer, before it is presumed
 *                      abandoned and recovered (its owner died or hangs)
 * @param timeout       the deadline of every operation of the heap
 * @param checkSkew     whether the node measures its clock against its peers' and stops caching when the
 *                      measured skew is proven beyond ε in 3 checks in a row (switch it off only to
 *                      demonstrate what happens without it)
 * @param skewInterval  how often the skew is measured (at most every 100 ms while a verdict is pending)
 * @param cacheMaxEntries the most objects this node keeps cached copies of (at least 1); past it, filling a
 *                      copy first drops others
 * @param cacheMaxBytes the most bytes of cached values (the sum of the encoded values' lengths) this node
 *                      keeps (at least 1); a value longer than this is read validated and not cached
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public record CoherenceConfig(boolean caching, Duration clockBound, Duration minLease, Duration maxLease,
                              Duration lockTimeout, Duration timeout, boolean checkSkew, Duration skewInterval,
                              int cacheMaxEntries, long cacheMaxBytes) {
    /** The default bound of the cache of copies: 65,536 objects. */
    public static final int DEFAULT_CACHE_MAX_ENTRIES = 65_536;
    /** The default bound of the cache of copies: 64 MiB of values. */
    public static final long DEFAULT_CACHE_MAX_BYTES = 64L << 20;

    public CoherenceConfig {
        if (clockBound.isNegative()) {
            throw new DsmConfigException("coherence clockBound", clockBound, "a duration of 0 or more");
        }
        positive("coherence minLease", minLease);
        if (maxLease.compareTo(minLease) < 0) {
            throw new DsmConfigException("coherence maxLease", maxLease, "at least minLease (" + minLease + ")");
        }
        positive("coherence lockTimeout", lockTimeout);
        positive("coherence timeout", timeout);
        positive("coherence skewInterval", skewInterval);
        // block of the cache bound (issue 24): typed, naming the key a node's config sets
        if (cacheMaxEntries < 1) {
            throw new DsmConfigException("membus.coherence.cache-max-entries", cacheMaxEntries,
                    "a count of objects from 1 to " + Integer.MAX_VALUE + " (CoherenceConfig.withCacheBound)");
        }
        if (cacheMaxBytes < 1) {
            throw new DsmConfigException("membus.coherence.cache-max-bytes", cacheMaxBytes,
                    "a size of at least 1 byte, e.g. 64MiB (CoherenceConfig.withCacheBound)");
        }
    }

    /** The settings before the cache bound existed, with the default bound. */
    public CoherenceConfig(boolean caching, Duration clockBound, Duration minLease, Duration maxLease,
                           Duration lockTimeout, Duration timeout, boolean checkSkew, Duration skewInterval) {
        this(caching, clockBound, minLease, maxLease, lockTimeout, timeout, checkSkew, skewInterval,
                DEFAULT_CACHE_MAX_ENTRIES, DEFAULT_CACHE_MAX_BYTES);
    }

    /**
     * Caching on, ε = 5 ms, leases 2–500 ms, locks recovered after 10 s, 5 s per operation,
     * skew checked every 5 s, at most 65,536 cached objects and 64 MiB of cached values.
     * ε = 5 ms is what NTP keeps hosts of one LAN within with room to spare (typically below
     * 1 ms); the cost of a larger ε is only that a writer that cannot reach a sharer waits ε
     * longer.
     */
    public static CoherenceConfig defaults() {
        return new CoherenceConfig(true, Duration.ofMillis(5), Duration.ofMillis(2), Duration.ofMillis(500),
                Duration.ofSeconds(10), Duration.ofSeconds(5), true, Duration.ofSeconds(5));
    }

    public CoherenceConfig withCaching(boolean on) {
        return new CoherenceConfig(on, clockBound, minLease, maxLease, lockTimeout, timeout, checkSkew, skewInterval,
                cacheMaxEntries, cacheMaxBytes);
    }

    public CoherenceConfig withClockBound(Duration bound) {
        return new CoherenceConfig(caching, bound, minLease, maxLease, lockTimeout, timeout, checkSkew, skewInterval,
                cacheMaxEntries, cacheMaxBytes);
    }

    public CoherenceConfig withLeases(Duration min, Duration max) {
        return new CoherenceConfig(caching, clockBound, min, max, lockTimeout, timeout, checkSkew, skewInterval,
                cacheMaxEntries, cacheMaxBytes);
    }

    public CoherenceConfig withLockTimeout(Duration d) {
        return new CoherenceConfig(caching, clockBound, minLease, maxLease, d, timeout, checkSkew, skewInterval,
                cacheMaxEntries, cacheMaxBytes);
    }

    public CoherenceConfig withTimeout(Duration d) {
        return new CoherenceConfig(caching, clockBound, minLease, maxLease, lockTimeout, d, checkSkew, skewInterval,
                cacheMaxEntries, cacheMaxBytes);
    }

    public CoherenceConfig withSkewCheck(boolean on, Duration interval) {
        return new CoherenceConfig(caching, clockBound, minLease, maxLease, lockTimeout, timeout, on, interval,
                cacheMaxEntries, cacheMaxBytes);
    }

    /**
     * The bound of this node's cache of copies: at most {@code maxEntries} objects and
     * {@code maxBytes} bytes of values (both at least 1; a bad value is a
     * {@link DsmConfigException} naming its key).
     */
    public CoherenceConfig withCacheBound(int maxEntries, long maxBytes) {
        return new CoherenceConfig(caching, clockBound, minLease, maxLease, lockTimeout, timeout, checkSkew,
                skewInterval, maxEntries, maxBytes);
    }

    private static void positive(String key, Duration d) {
        if (d.isNegative() || d.isZero()) {
            throw new DsmConfigException(key, d, "a positive duration");
        }
    }
}
