package io.membus.coherence;

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
 *                      measured skew exceeds ε (switch it off only to demonstrate what happens without it)
 * @param skewInterval  how often the skew is measured
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public record CoherenceConfig(boolean caching, Duration clockBound, Duration minLease, Duration maxLease,
                              Duration lockTimeout, Duration timeout, boolean checkSkew, Duration skewInterval) {

    public CoherenceConfig {
        if (clockBound.isNegative() || minLease.isNegative() || minLease.isZero() || maxLease.compareTo(minLease) < 0
                || lockTimeout.isNegative() || lockTimeout.isZero() || timeout.isNegative() || timeout.isZero()
                || skewInterval.isNegative() || skewInterval.isZero()) {
            throw new IllegalArgumentException("coherence config: clockBound=" + clockBound + ", minLease=" + minLease
                    + ", maxLease=" + maxLease + ", lockTimeout=" + lockTimeout + ", timeout=" + timeout
                    + ", skewInterval=" + skewInterval + ": durations must be positive (clockBound may be 0)"
                    + " and maxLease >= minLease");
        }
    }

    /**
     * Caching on, ε = 5 ms, leases 2–500 ms, locks recovered after 10 s, 5 s per operation,
     * skew checked every 5 s. ε = 5 ms is what NTP keeps hosts of one LAN within with room to
     * spare (typically below 1 ms); the cost of a larger ε is only that a writer that cannot
     * reach a sharer waits ε longer.
     */
    public static CoherenceConfig defaults() {
        return new CoherenceConfig(true, Duration.ofMillis(5), Duration.ofMillis(2), Duration.ofMillis(500),
                Duration.ofSeconds(10), Duration.ofSeconds(5), true, Duration.ofSeconds(5));
    }

    public CoherenceConfig withCaching(boolean on) {
        return new CoherenceConfig(on, clockBound, minLease, maxLease, lockTimeout, timeout, checkSkew, skewInterval);
    }

    public CoherenceConfig withClockBound(Duration bound) {
        return new CoherenceConfig(caching, bound, minLease, maxLease, lockTimeout, timeout, checkSkew, skewInterval);
    }

    public CoherenceConfig withLeases(Duration min, Duration max) {
        return new CoherenceConfig(caching, clockBound, min, max, lockTimeout, timeout, checkSkew, skewInterval);
    }

    public CoherenceConfig withLockTimeout(Duration d) {
        return new CoherenceConfig(caching, clockBound, minLease, maxLease, d, timeout, checkSkew, skewInterval);
    }

    public CoherenceConfig withTimeout(Duration d) {
        return new CoherenceConfig(caching, clockBound, minLease, maxLease, lockTimeout, d, checkSkew, skewInterval);
    }

    public CoherenceConfig withSkewCheck(boolean on, Duration interval) {
        return new CoherenceConfig(caching, clockBound, minLease, maxLease, lockTimeout, timeout, on, interval);
    }
}
