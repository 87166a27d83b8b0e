package io.membus.coherence;

import io.membus.alloc.BlockRef;
import io.membus.alloc.UseAfterFreeException;
import io.membus.coherence.CoherentHeap.CachedCopy;
import io.membus.core.Backoff;
import io.membus.core.OperationDeadline;
import io.membus.core.RemotePtr;
import io.membus.core.Words;
import io.membus.core.error.DsmException;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.LongAdder;

/**
 * The read path of coherent objects (see "Reads" and (I1), (I2), (I3) in
 * {@code docs/coherence.md}): the validated (seqlock) read of an object from its home
 * memory, the cached read served under this node's lease, the fill that raises the lease
 * and joins the sharers before a validated read and caches its value only when nothing
 * can have overtaken it, and the answers about copies that structures guarding data kept
 * elsewhere ask ({@link CoherentHeap#cachedVersion}, {@link CoherentHeap#versionIfValid}).
 *
 * <p><b>Note:</b> thread-safe: it keeps only counters ({@link LongAdder}s); copies are
 * published through {@link CopyCache}. A validated read linearizes at its second header
 * read (the verbs' ordering: a write whose publish CAS completed before is seen).
 */
final class ObjectReader {
    /** Objects up to this size are read with the three verbs issued at once (one round trip). */
    private static final int WHOLE_READ_LIMIT = 2048;

    private final HeapContext ctx;
    /** ctx's clock and sharer-bit answer, kept here: the cached read's path loads them with no hop. */
    private final io.membus.core.time.Clock clock;
    private final boolean hasSharerBit;
    private final CopyCache cache;
    private final SkewMonitor skew;
    private final LockRecovery recovery;
    /** Reads of cached objects served from this node's copy (no verb); see {@link #cacheMisses}. */
    private final LongAdder cacheHits = new LongAdder();
    private final LongAdder cacheMisses = new LongAdder();
    private final LongAdder validatedReads = new LongAdder();

    ObjectReader(HeapContext ctx, CopyCache cache, SkewMonitor skew, LockRecovery recovery) {
        this.ctx = ctx;
        this.clock = ctx.clock;
        this.hasSharerBit = ctx.hasSharerBit();
        this.cache = cache;
        this.skew = skew;
        this.recovery = recovery;
    }

    /**
     * A validated value: the header it was read under, the bytes, and whether the
     * header read after the value was unlocked too (only then may the value be cached).
     */
    record Snapshot(long header, byte[] bytes, boolean unlockedAfter, long sharersAfter) {
    }

    /** Whether this node serves cached reads now: no clock problem, and a sharer bit of its own. */
    boolean cachingAllowed() {
        return skew.problem() == null && hasSharerBit;
    }

    byte[] read(RemoteRef<?> ref, boolean cached) {
        ctx.checkOpen();
        if (cached && cachingAllowed()) {
            CachedCopy e = cache.servable(ref.ptr(), clock.nowMicrosAtLeast());
            if (e != null) {
                cacheHits.increment();
                ref.meter().cacheHit(); // per named object (Membus.ref); OperationMeter.NONE otherwise
                return e.bytes;
            }
            cacheMisses.increment();
            long scope = OperationDeadline.enter(ctx.config.timeout());
            try {
                return fill(ref);
            } finally {
                OperationDeadline.exit(scope);
            }
        }
        validatedReads.increment();
        long scope = OperationDeadline.enter(ctx.config.timeout());
        try {
            return validatedRead(ref, ctx.deadline()).bytes();
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /** The version of the object now (a validated read of its headers). */
    long version(RemoteRef<?> ref) {
        long scope = OperationDeadline.enter(ctx.config.timeout());
        try {
            return ObjectLayout.version(validatedRead(ref, ctx.deadline()).header());
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    long cacheHits() {
        return cacheHits.sum();
    }

    long cacheMisses() {
        return cacheMisses.sum();
    }

    long validatedReads() {
        return validatedReads.sum();
    }

    /**
     * A fill: raise the lease word to this node's expiry and join the sharers (both by
     * CAS, before the validated read), read validated, and cache the value only if the
     * header was unlocked both times, this node's sharer bit was still set in the second
     * header read, the value fits the cache, and no invalidation of its stripe came since
     * the fill began (checked by {@link CopyCache#installFill}). Adapts the object's lease.
     */
    byte[] fill(RemoteRef<?> ref) {
        long deadline = ctx.deadline();
        long ptr = ref.ptr();
        int stripe = CopyCache.stripe(ptr);
        long epoch = cache.epoch(stripe);
        long minLease = ctx.config.minLease().toNanos() / 1000;
        long maxLease = ctx.config.maxLease().toNanos() / 1000;
        long lease = cache.leaseHint(ptr, Math.min(maxLease, minLease * 4));
        long now = ctx.clock.nowMicros();
        long expiry = now + lease;
        // raise the lease word to at least our expiry, then join the sharers: both before the validated read
        byte[] w = ctx.memory.read(ptr, 8 + ObjectLayout.META);
        try {
            HeapContext.checkBlock(ptr, ref.generationHeader(), Words.getLong(w, 0), "read");
        } catch (UseAfterFreeException e) {
            cache.forget(ptr); // freed by another node (maybe after our lease ran out: no invalidation came)
            throw e;
        }
        long leaseWord = Words.getLong(w, 8 + ObjectLayout.LEASE);
        while (leaseWord < expiry) {
            long seen = ctx.memory.compareAndSwap(ref.payload() + ObjectLayout.LEASE, leaseWord, expiry);
            if (seen == leaseWord) {
                break;
            }
            leaseWord = seen;
        }
        long bit = ObjectLayout.sharerBit(ctx.self);
        long sharers = Words.getLong(w, 8 + ObjectLayout.SHARERS);
        while ((sharers & bit) == 0) {
            long seen = ctx.memory.compareAndSwap(ref.payload() + ObjectLayout.SHARERS, sharers, sharers | bit);
            if (seen == sharers) {
                break;
            }
            sharers = seen;
        }
        Snapshot s;
        try {
            s = validatedRead(ref, deadline);
        } catch (UseAfterFreeException e) {
            cache.forget(ptr);
            throw e;
        }
        CachedCopy previous = cache.current(ptr);
        long version = ObjectLayout.version(s.header());
        if (!ObjectLayout.locked(s.header()) && s.unlockedAfter() && (s.sharersAfter() & bit) != 0
                && s.bytes().length <= ctx.config.cacheMaxBytes()) {
            if (cache.installFill(ptr, stripe, epoch, new CachedCopy(version, s.bytes(), expiry, ptr))) {
                // adapt: an object written since our last fill gets a shorter lease, a quiet one a longer
                long next = previous != null && previous.version != version ? Math.max(minLease, lease / 2)
                        : Math.min(maxLease, lease * 2);
                cache.adaptLease(ptr, next);
            }
        }
        return s.bytes();
    }

    /**
     * A validated (seqlock) read: the header, then the current slot, then the header
     * again; equal versions and slots, or retry. Three verbs, because one verb is not
     * atomic and copies its bytes in no promised order (a header and slot taken from
     * one read could be torn around a publish). When the object fits one read, the
     * three are issued together on one connection (header, whole object, header:
     * verbs execute in issue order, so the slot is read between the two headers): one
     * round trip over a network transport. A slot past that read, or a value out of
     * line, is read after the first header and the last header read follows it.
     */
    Snapshot validatedRead(RemoteRef<?> ref, long deadline) {
        long ptr = ref.ptr();
        int cap = ref.slotCapacity();
        boolean whole = ObjectLayout.objectSize(cap) <= WHOLE_READ_LIMIT;
        Backoff backoff = null;
        while (true) {
            long h1;
            byte[] value;
            CompletableFuture<byte[]> pipelined = null;
            try {
                byte[] first;
                if (whole && ctx.memory.runsDirect(ptr)) {
                    // a memory path: the same three reads, each run at once (no futures, no round trips)
                    byte[] h = ctx.memory.read(ptr, 8 + ObjectLayout.META);
                    HeapContext.checkBlock(ptr, ref.generationHeader(), Words.getLong(h, 0), "read");
                    h1 = Words.getLong(h, 8 + ObjectLayout.HEADER);
                    first = ctx.memory.read(ptr, 8 + ObjectLayout.objectSize(cap));
                } else if (whole) {
                    CompletableFuture<byte[]> head = ctx.memory.readAsync(ptr, 8 + ObjectLayout.META);
                    CompletableFuture<byte[]> body = ctx.memory.readAsync(ptr, 8 + ObjectLayout.objectSize(cap));
                    pipelined = ctx.memory.readAsync(ptr, 8 + ObjectLayout.META);
                    byte[] h = ctx.memory.await(head);
                    HeapContext.checkBlock(ptr, ref.generationHeader(), Words.getLong(h, 0), "read");
                    h1 = Words.getLong(h, 8 + ObjectLayout.HEADER);
                    first = ctx.memory.await(body);
                } else {
                    first = ctx.memory.read(ptr, 8 + ObjectLayout.SLOTS);
                    HeapContext.checkBlock(ptr, ref.generationHeader(), Words.getLong(first, 0), "read");
                    h1 = Words.getLong(first, 8 + ObjectLayout.HEADER);
                }
                int s = ObjectLayout.slot(h1);
                int at = ObjectLayout.slotOffset(s, cap);
                byte[] slot;
                int base;
                if (first.length >= 8 + at + ObjectLayout.SLOT_PREFIX + cap) {
                    slot = first;
                    base = 8 + at;
                } else {
                    slot = ctx.memory.read(ref.payload() + at, ObjectLayout.SLOT_PREFIX + cap);
                    base = 0;
                    pipelined = null;
                }
                if ((int) (Words.getLong(slot, base) >>> 32) == ObjectLayout.OUT_OF_LINE) {
                    pipelined = null; // the header must be read after the value's own block
                }
                value = slotValue(slot, base, cap);
            } catch (UseAfterFreeException | SlotGarbledException e) {
                // an out-of-line payload freed by a later write, or a slot mid-write: the headers will not match
                value = null;
                h1 = 0;
            }
            // the header again, with the lease and the sharers: a fill caches only if its sharer bit is still
            // set here (a writer that locked earlier may have cleared it; one that locks later will see it)
            byte[] again = pipelined != null ? ctx.memory.await(pipelined) : ctx.memory.read(ptr, 8 + ObjectLayout.META);
            HeapContext.checkBlock(ptr, ref.generationHeader(), Words.getLong(again, 0), "read");
            long h2 = Words.getLong(again, 8);
            if (value != null && ObjectLayout.version(h1) == ObjectLayout.version(h2)
                    && ObjectLayout.slot(h1) == ObjectLayout.slot(h2)) {
                return new Snapshot(h1, value, !ObjectLayout.locked(h2),
                        Words.getLong(again, 8 + ObjectLayout.SHARERS));
            }
            if (ObjectLayout.locked(h2)) {
                recovery.maybeRecover(ref, h2);
            }
            backoff = ctx.pause(backoff, deadline, "read", ptr);
        }
    }

    /** The value of a slot; throws SlotGarbledException when the slot is mid-write (the headers will say so). */
    private byte[] slotValue(byte[] b, int base, int cap) {
        int length = (int) Words.getLong(b, base); // low 32 bits: length; high: flags
        int flags = (int) (Words.getLong(b, base) >>> 32);
        if (flags == ObjectLayout.OUT_OF_LINE) {
            long p = Words.getLong(b, base + ObjectLayout.SLOT_PREFIX);
            long hdr = Words.getLong(b, base + ObjectLayout.SLOT_PREFIX + 8);
            long capacity = Words.getLong(b, base + ObjectLayout.SLOT_PREFIX + 16);
            if (length < 0 || capacity < length || p == RemotePtr.NULL) {
                throw SlotGarbledException.INSTANCE;
            }
            BlockRef out;
            try {
                out = BlockRef.of(p, hdr, capacity);
            } catch (DsmException e) {
                throw SlotGarbledException.INSTANCE;
            }
            return ctx.allocator.read(out, 0, length);
        }
        if (flags != 0 || length < 0 || length > cap) {
            throw SlotGarbledException.INSTANCE;
        }
        byte[] v = new byte[length];
        System.arraycopy(b, base + ObjectLayout.SLOT_PREFIX, v, 0, length);
        return v;
    }

    /** A slot read while a writer was writing it: the headers around it will not match. */
    private static final class SlotGarbledException extends RuntimeException {
        private static final long serialVersionUID = 1L;
        static final SlotGarbledException INSTANCE = new SlotGarbledException();

        private SlotGarbledException() {
            super("slot mid-write", null, false, false);
        }
    }

    // ---- guards of data kept elsewhere

    /** See {@link CoherentHeap#cachedVersion}. No verb. */
    long cachedVersion(RemoteRef<?> ref) {
        CachedCopy e = cachedCopy(ref);
        return e != null ? e.version : -1;
    }

    /** See {@link CoherentHeap#cachedCopy}. No verb. */
    CachedCopy cachedCopy(RemoteRef<?> ref) {
        if (!cachingAllowed()) {
            return null;
        }
        return cache.servable(ref.ptr(), ctx.clock.nowMicrosAtLeast());
    }

    /** See {@link CoherentHeap#versionIfValid(CachedCopy, long)}. */
    long versionIfValid(CachedCopy copy, long nowMicrosAtLeast) {
        return copy != null && !copy.dropped && cachingAllowed() && !ctx.closed()
                && nowMicrosAtLeast < copy.expiryMicros - ctx.epsMicros ? copy.version : -1;
    }

    /** See {@link CoherentHeap#cacheVersion}: a fill when there is no valid copy. */
    long cacheVersion(RemoteRef<?> ref) {
        long v = cachedVersion(ref);
        if (v >= 0 || !cachingAllowed()) {
            return v;
        }
        fill(ref);
        return cachedVersion(ref);
    }
}
