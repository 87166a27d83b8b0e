package io.membus.coherence;

import io.membus.coherence.CoherentHeap.CachedCopy;
import io.membus.core.time.TimerWheel;

import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One node's cache of copies of coherent objects (see "The cache of copies" and (I5) in
 * {@code docs/coherence.md}): the copies by object, the per-stripe epochs that discard a
 * fill an invalidation overtook, the bound by objects and bytes (a clock hand evicts
 * before each install), the drop of expired copies (two per install, and a periodic sweep
 * on the JVM's shared {@link TimerWheel}), and the adaptive lease hints per object.
 *
 * <p>It decides nothing about when a copy may be made or served beyond its lease; the
 * read path ({@link ObjectReader}) fills it, the invalidations ({@link Invalidator}) and
 * writes empty it.
 *
 * <p><b>Note:</b> thread-safe. A lookup ({@link #servable}) takes no lock and allocates
 * nothing. Installs and invalidations of one object are serialized by the map's
 * {@code compute} for its key, which also publishes the copy (happens-before to every
 * later lookup); an invalidation bumps the stripe's epoch inside that compute, before the
 * writer is acknowledged. Installs, evictions and sweeps hold {@link #sweepLock} (never a
 * hit or an invalidation), so the bound holds at every instant. A dropped copy's
 * {@code dropped} flag is volatile and set inside the compute that removes it.
 */
final class CopyCache {
    private static final int STRIPES = 256;
    /** Cached copies an install looks at for an expired one to drop (the amortised sweep). */
    private static final int INSTALL_SWEEP = 2;
    /** Cached copies one tick of the periodic sweep looks at, at most (it runs on the shared timer wheel). */
    private static final int TICK_SWEEP = 1024;

    private final HeapContext ctx;
    /** ctx's ε, kept here: a lookup loads it with no hop. */
    private final long epsMicros;
    private final ConcurrentHashMap<Long, CachedCopy> cache = new ConcurrentHashMap<>();
    /** The adaptive lease per object (a hint: cleared whole past twice the cache's entry bound). */
    private final ConcurrentHashMap<Long, Long> leaseOf = new ConcurrentHashMap<>();
    /** Sum of the cached values' lengths; changed only inside the cache map's compute for the entry. */
    private final AtomicLong cachedBytes = new AtomicLong();
    /** Held by installs and sweeps (never by a hit or an invalidation): the bound holds at every instant. */
    private final ReentrantLock sweepLock = new ReentrantLock();
    /** Where sweeps and evictions go on (weakly consistent; guarded by sweepLock). */
    private Iterator<Map.Entry<Long, CachedCopy>> sweepCursor;
    private boolean sweepArmed; // guarded by sweepLock
    private final Sweeper sweeper = new Sweeper();
    private final AtomicLong evictions = new AtomicLong();
    private final AtomicLong expiredDropped = new AtomicLong();
    /** Per stripe of objects: raised by every invalidation, so a fill that met one is discarded. */
    private final AtomicLongArray epochs = new AtomicLongArray(STRIPES);

    CopyCache(HeapContext ctx) {
        this.ctx = ctx;
        this.epsMicros = ctx.epsMicros;
    }

    /**
     * The key of {@code ptr} in {@link #cache}: a bijection of the pointer whose
     * {@code Long.hashCode} spreads its offset bits. Pointers of blocks allocated together
     * differ only in a few middle bits, which {@code Long.hashCode} folds into few buckets:
     * the map's bins turned into trees and a cached read paid a tree search.
     */
    private static Long cacheKey(long ptr) {
        return ptr * 0x9E3779B97F4A7C15L;
    }

    static int stripe(long ptr) {
        return (int) ((ptr ^ (ptr >>> 17) ^ (ptr >>> 31)) & (STRIPES - 1));
    }

    /** The copy of {@code ptr} while its lease holds at {@code nowMicrosAtLeast} minus ε, else null. No lock. */
    CachedCopy servable(long ptr, long nowMicrosAtLeast) {
        CachedCopy e = cache.get(cacheKey(ptr));
        return e != null && nowMicrosAtLeast < e.expiryMicros - epsMicros ? e : null;
    }

    /** The copy of {@code ptr}, served or not (a fill's look at the version it replaces). */
    CachedCopy current(long ptr) {
        return cache.get(cacheKey(ptr));
    }

    /** The invalidation epoch of {@code stripe}: read before a fill, checked by {@link #installFill}. */
    long epoch(int stripe) {
        return epochs.get(stripe);
    }

    /**
     * Installs a fill's {@code copy} unless an invalidation of its stripe came since
     * {@code epoch} was read: first drops other copies until it fits the bound, then two
     * expired ones under the hand, and arms the periodic sweep. Returns whether it installed.
     */
    boolean installFill(long ptr, int stripe, long epoch, CachedCopy copy) {
        boolean installed;
        sweepLock.lock();
        try {
            makeRoom(copy.bytes.length);
            installed = install(ptr, stripe, epoch, copy);
            if (installed) {
                sweepStep(INSTALL_SWEEP, ctx.clock.nowMicros()); // amortised: drops copies whose lease ran out
                armSweeper();
            }
        } finally {
            sweepLock.unlock();
        }
        return installed;
    }

    /**
     * Installs {@code copy} (under {@link #sweepLock}) unless an invalidation of its stripe came
     * since the fill began: under the map's lock for this object, as invalidations remove, so an
     * invalidation either comes first (the epoch moved: no install) or after (it removes the
     * entry) — never a stale window.
     */
    private boolean install(long ptr, int stripe, long epoch, CachedCopy copy) {
        boolean[] installed = new boolean[1];
        cache.compute(cacheKey(ptr), (k, current) -> {
            if (epochs.get(stripe) != epoch) {
                return current;
            }
            installed[0] = true;
            long freed = 0;
            if (current != null) {
                current.dropped = true; // replaced: a holder of it looks again
                freed = current.bytes.length;
            }
            cachedBytes.addAndGet(copy.bytes.length - freed);
            return copy;
        });
        return installed[0];
    }

    /** Drops this node's copy of {@code ptr}; a fill in progress for it is discarded (its stripe's epoch moves). */
    void invalidate(long ptr) {
        int stripe = stripe(ptr);
        cache.compute(cacheKey(ptr), (k, current) -> {
            epochs.incrementAndGet(stripe);
            if (current != null) {
                current.dropped = true;
                cachedBytes.addAndGet(-current.bytes.length);
            }
            return null;
        });
    }

    /** Drops this node's copy of an object that was freed, and its lease hint. */
    void forget(long ptr) {
        invalidate(ptr);
        leaseOf.remove(ptr);
    }

    // ---- lease hints

    /** The lease a fill of {@code ptr} asks for: its hint, or {@code otherwise}. */
    long leaseHint(long ptr, long otherwise) {
        return leaseOf.getOrDefault(ptr, otherwise);
    }

    /** Records the lease the next fill of {@code ptr} asks for (the hints are cleared whole past twice the entry bound). */
    void adaptLease(long ptr, long micros) {
        if (leaseOf.size() >= 2L * ctx.config.cacheMaxEntries()) {
            leaseOf.clear(); // hints only: objects not cached for long start again at the default lease
        }
        leaseOf.put(ptr, micros);
    }

    // ---- the bound

    /**
     * Drops copies (under {@link #sweepLock}) until one more of {@code length} bytes fits the
     * bound: expired ones and live ones alike, in the order of the sweep's cursor (a clock hand
     * over the map: no order is kept on the hit path). Only installs add copies, all under the
     * lock, so the cache never holds more than the bound.
     */
    private void makeRoom(int length) {
        int maxEntries = ctx.config.cacheMaxEntries();
        long maxBytes = ctx.config.cacheMaxBytes();
        while ((cache.size() >= maxEntries || cachedBytes.get() + length > maxBytes) && !cache.isEmpty()) {
            Map.Entry<Long, CachedCopy> e = nextInSweep();
            if (e != null && drop(e.getKey(), e.getValue())) {
                evictions.incrementAndGet();
                leaseOf.remove(e.getValue().ptr); // evicted: its lease hint goes too (an expired copy keeps it)
            }
        }
    }

    /** Looks at up to {@code budget} copies (under {@link #sweepLock}) and drops those that can no longer be served. */
    private int sweepStep(int budget, long nowMicros) {
        int seen = 0;
        while (seen < budget) {
            Map.Entry<Long, CachedCopy> e = nextInSweep();
            if (e == null) {
                break; // a pass ended
            }
            seen++;
            CachedCopy c = e.getValue();
            if (nowMicros >= c.expiryMicros - epsMicros && drop(e.getKey(), c)) {
                expiredDropped.incrementAndGet();
            }
        }
        return seen;
    }

    /** The next entry of the sweep (under {@link #sweepLock}); null when a pass ended (the next call starts one). */
    private Map.Entry<Long, CachedCopy> nextInSweep() {
        if (sweepCursor == null) {
            sweepCursor = cache.entrySet().iterator();
        }
        if (!sweepCursor.hasNext()) {
            sweepCursor = null;
            return null;
        }
        return sweepCursor.next();
    }

    /** Removes {@code victim} if it is still the copy of {@code key} (marked dropped, its bytes uncounted). */
    private boolean drop(Long key, CachedCopy victim) {
        boolean[] dropped = new boolean[1];
        cache.computeIfPresent(key, (k, current) -> {
            if (current != victim) {
                return current;
            }
            current.dropped = true;
            cachedBytes.addAndGet(-current.bytes.length);
            dropped[0] = true;
            return null;
        });
        return dropped[0];
    }

    /** Drops every cached copy (each marked dropped, its bytes uncounted). */
    void dropAll() {
        for (Map.Entry<Long, CachedCopy> e : cache.entrySet()) {
            drop(e.getKey(), e.getValue());
        }
    }

    /** Stops the periodic sweep and drops every copy (the heap is closed: no install follows). */
    void close() {
        TimerWheel.SHARED.cancel(sweeper);
        dropAll();
    }

    // ---- the periodic sweep

    /** Arms the periodic sweep (under {@link #sweepLock}) if it is not armed: it runs while copies are cached. */
    private void armSweeper() {
        if (!sweepArmed && !ctx.closed()) {
            sweepArmed = true;
            TimerWheel.SHARED.arm(sweeper, System.nanoTime() + sweepPeriodNanos());
        }
    }

    /** As long as the longest lease (no copy outlives it unseen by much), within 10 ms .. 1 s. */
    private long sweepPeriodNanos() {
        return Math.max(TimeUnit.MILLISECONDS.toNanos(10), Math.min(TimeUnit.SECONDS.toNanos(1),
                ctx.config.maxLease().toNanos()));
    }

    /**
     * The periodic sweep, on the JVM's shared timer wheel (no thread of its own; it must not
     * block, so it only tries the lock): drops copies whose lease ran out, 1,024
     * at a time, going on a tick later until a pass ends, then after {@link #sweepPeriodNanos()};
     * it stops while nothing is cached (the next install arms it).
     */
    private final class Sweeper extends TimerWheel.Timeout {
        @Override
        protected void expired() {
            if (ctx.closed()) {
                return;
            }
            long next = TimerWheel.TICK_NANOS;
            if (sweepLock.tryLock()) {
                try {
                    int seen = sweepStep(TICK_SWEEP, ctx.clock.nowMicros());
                    if (seen < TICK_SWEEP) {
                        next = sweepPeriodNanos(); // a pass ended
                    }
                    if (cache.isEmpty()) {
                        sweepArmed = false;
                        return;
                    }
                } finally {
                    sweepLock.unlock();
                }
            }
            TimerWheel.SHARED.arm(this, System.nanoTime() + next);
        }
    }

    // ---- figures

    int size() {
        return cache.size();
    }

    long bytes() {
        return cachedBytes.get();
    }

    long evictions() {
        return evictions.get();
    }

    long expiredDropped() {
        return expiredDropped.get();
    }

    int leaseHints() {
        return leaseOf.size();
    }
}
