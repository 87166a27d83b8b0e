package io.membus.coherence;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.Placement;
import io.membus.alloc.UseAfterFreeException;
import io.membus.codec.Codec;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Words;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;
import io.membus.core.message.Messaging;
import io.membus.core.time.Clock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import java.util.function.UnaryOperator;

/**
 * Objects in remote memory that every node reads and writes coherently, and may
 * cache, without ever reading a stale value: versioned leases plus atomics (see
 * {@code docs/coherence.md} for the protocol, its invariants and their proofs).
 *
 * <ul>
 *   <li><b>Reads</b> are validated one-sided reads (block and object headers, both
 *       slots, headers again: accepted when the version and slot did not change, so a
 *       reader never waits for a writer), or, with caching, served from this node's
 *       memory while a lease this node raised on the object holds by its own clock
 *       minus the clock bound ε.</li>
 *   <li><b>Writes</b> lock the object's header by CAS, then read its lease and
 *       sharers, invalidate the sharers over a message channel (or, when one does not
 *       answer, wait until the lease plus ε has passed), write the slot that is not
 *       current, and publish by one CAS that fails if the lock was broken.</li>
 *   <li>A lock whose owner is no live member, or that one observer saw held for
 *       longer than the lock timeout, is recovered by publishing a new version over
 *       the current slot: the broken writer's publish fails
 *       ({@link LockBrokenException}), and no value is ever torn.</li>
 *   <li>Clocks: leases are wall-clock microseconds from {@link Clock}; with messages,
 *       the node measures its skew against its peers and stops serving cached reads
 *       while the measured skew exceeds ε (it reads validated instead, and says so).</li>
 * </ul>
 *
 * <p>One heap per node (it owns the node's invalidation and clock channels).
 *
 * <p><b>Note:</b> thread-safe. Memory ordering is that of the verbs: a write whose
 * call returned is seen by every read (cached or not, on any node) that starts after
 * it; cache entries are published through a {@link ConcurrentHashMap}.
 */
public final class CoherentHeap implements AutoCloseable {
    /** The message channel of invalidations: payload ptr, new version; the answer is the ack. */
    public static final short INVALIDATE_CHANNEL = (short) 0x0C11;
    /** The message channel of clock checks: an empty request, answered with the peer's clock. */
    public static final short CLOCK_CHANNEL = (short) 0x0C12;
    private static final Logger LOG = LoggerFactory.getLogger(CoherentHeap.class);
    private static final int WHOLE_READ_LIMIT = 2048;
    private static final int STRIPES = 256;
    /** Clock samples per peer and check, of which the shortest round trip counts. */
    private static final int SKEW_SAMPLES = 5;

    private final GlobalAllocator allocator;
    private final RemoteMemory memory;
    private final Messaging messaging;
    private final Clock clock;
    private final CoherenceConfig config;
    private final int self;
    private final long epsMicros;
    private final ConcurrentHashMap<Long, CachedCopy> cache = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Long, Long> leaseOf = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Long, long[]> lockSightings = new ConcurrentHashMap<>();
    /** Per stripe of objects: raised by every invalidation, so a fill that met one is discarded. */
    private final AtomicLongArray epochs = new AtomicLongArray(STRIPES);
    private final ScheduledExecutorService skewChecker;
    private volatile long measuredSkewMicros;
    private volatile String skewProblem;
    private volatile boolean closed;

    /**
     * A heap over {@code allocator}'s node. With {@code messaging} (may be null: then
     * writers wait out leases, and no skew is measured) it registers the invalidation and
     * clock channels.
     */
    public CoherentHeap(GlobalAllocator allocator, Messaging messaging, Clock clock, CoherenceConfig config) {
        this.allocator = allocator;
        this.memory = allocator.memory();
        this.messaging = messaging;
        this.clock = clock;
        this.config = config;
        this.self = memory.localNodeId();
        this.epsMicros = config.clockBound().toNanos() / 1000;
        if (messaging != null) {
            messaging.register(INVALIDATE_CHANNEL, "coherence-invalidate", (from, payload) -> {
                invalidateLocal(Words.getLong(payload, 0));
                return new byte[0];
            });
            messaging.register(CLOCK_CHANNEL, "coherence-clock", (from, payload) -> {
                byte[] now = new byte[8];
                Words.putLong(now, 0, clock.nowMicros());
                return now;
            });
        }
        if (messaging != null && config.checkSkew()) {
            skewChecker = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "membus-coherence-skew-" + self);
                t.setDaemon(true);
                return t;
            });
            long every = config.skewInterval().toMillis();
            skewChecker.scheduleWithFixedDelay(this::checkSkewQuietly, 0, every, TimeUnit.MILLISECONDS);
        } else {
            skewChecker = null;
        }
    }

    public CoherenceConfig config() {
        return config;
    }

    public GlobalAllocator allocator() {
        return allocator;
    }

    // ------------------------------------------------------------------ handles

    /** Allocates an object holding {@code initial}, placed as {@code placement} says. */
    public <T> RemoteRef<T> create(Codec<T> codec, T initial, Placement placement) {
        byte[] bytes = codec.encode(initial);
        // at least the three words of an out-of-line value
        int slotCapacity = Math.max(ObjectLayout.OUT_OF_LINE_BYTES + 8, Math.min(Math.max(bytes.length, 8) * 2, 4096));
        BlockRef block = allocator.allocate(ObjectLayout.objectSize(slotCapacity), placement);
        try {
            long version = ObjectLayout.firstVersion(HeapLayout.generationOf(block.header()));
            byte[] head = new byte[ObjectLayout.SLOTS];
            Words.putLong(head, ObjectLayout.HEADER, ObjectLayout.lockedBy(ObjectLayout.unlocked(0, version), self));
            Words.putLong(head, ObjectLayout.META, ObjectLayout.meta(slotCapacity));
            memory.write(block.payload(), head);
            writeSlot(block, slotCapacity, 0, bytes);
            // published unlocked last: no reader accepts the object before its value is there
            memory.writeLong(block.payload() + ObjectLayout.HEADER, ObjectLayout.unlocked(0, version));
        } catch (RuntimeException e) {
            allocator.free(block);
            throw e;
        }
        return new RemoteRef<>(this, block, codec, slotCapacity, config.caching());
    }

    /** {@link #create(Codec, Object, Placement)} on this node. */
    public <T> RemoteRef<T> create(Codec<T> codec, T initial) {
        return create(codec, initial, Placement.local());
    }

    /**
     * Reopens a handle stored elsewhere as its two words ({@link RemoteRef#ptr()} and
     * {@link RemoteRef#generationHeader()}).
     *
     * @throws UseAfterFreeException when the object was freed since
     * @throws DsmException          when the words do not name a coherent object
     */
    public <T> RemoteRef<T> open(long ptr, long generationHeader, Codec<T> codec) {
        byte[] b = memory.read(ptr, 8 + ObjectLayout.SLOTS);
        checkBlock(ptr, generationHeader, Words.getLong(b, 0), "open");
        long meta = Words.getLong(b, 8 + ObjectLayout.META);
        if (!ObjectLayout.isMeta(meta)) {
            throw new DsmException(ErrorCode.INVALID_POINTER, "not a coherent object: ptr=" + RemotePtr.toString(ptr)
                    + ", meta=0x" + Long.toHexString(meta) + "; open only the two words RemoteRef.ptr() and"
                    + " RemoteRef.generationHeader() stored");
        }
        int slotCapacity = ObjectLayout.slotCapacityOf(meta);
        BlockRef block = BlockRef.of(ptr, generationHeader, ObjectLayout.objectSize(slotCapacity));
        return new RemoteRef<>(this, block, codec, slotCapacity, config.caching());
    }

    // ------------------------------------------------------------------ reads

    /**
     * A validated value: the header it was read under, the bytes, and whether the
     * header read after the value was unlocked too (only then may the value be cached).
     */
    private record Snapshot(long header, byte[] bytes, boolean unlockedAfter, long sharersAfter) {
    }

    /**
     * This node's cached copy of an object (its bytes, version and the lease it may be
     * served under), as {@link #cachedCopy} hands it
     * out: a caller that keeps it can ask {@link #versionIfValid} whether it is still the
     * copy this node serves, without looking the object up again.
     *
     * <p><b>Note:</b> immutable but for its drop flag, which the heap sets (volatile) when it
     * removes or replaces the copy — an invalidation, a newer fill, a clock problem,
     * {@code close} — before it acknowledges the invalidation to the writer.
     */
    public static final class CachedCopy {
        final long version;
        final byte[] bytes;
        final long expiryMicros;
        volatile boolean dropped;

        CachedCopy(long version, byte[] bytes, long expiryMicros) {
            this.version = version;
            this.bytes = bytes;
            this.expiryMicros = expiryMicros;
        }

        /** The object's version this copy was made at. */
        public long version() {
            return version;
        }
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

    byte[] read(RemoteRef<?> ref, boolean cached) {
        if (cached && cachingAllowed()) {
            CachedCopy e = cache.get(cacheKey(ref.ptr()));
            if (e != null && clock.nowMicrosAtLeast() < e.expiryMicros - epsMicros) {
                cacheHits.increment();
                return e.bytes;
            }
            cacheMisses.increment();
            return fill(ref);
        }
        validatedReads.increment();
        return validatedRead(ref, deadline()).bytes();
    }

    /** Reads of cached objects served from this node's copy (no verb); see {@link #cacheMisses()}. */
    private final java.util.concurrent.atomic.LongAdder cacheHits = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder cacheMisses = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder validatedReads = new java.util.concurrent.atomic.LongAdder();

    /**
     * Reads of cached objects ({@link RemoteRef#get()} of a cached ref) that this node served
     * from its copy, with no verb, since the heap was created. A sum of striped counters:
     * exact once the reads counted have returned, an estimate while they run.
     */
    public long cacheHits() {
        return cacheHits.sum();
    }

    /** Reads of cached objects that found no valid copy here and read the object (a fill); see {@link #cacheHits()}. */
    public long cacheMisses() {
        return cacheMisses.sum();
    }

    /**
     * Reads validated against the object's headers in its home memory: reads of objects
     * not cached, and every read while this node may not cache (clock skew, {@code caching
     * = false}); see {@link #cacheHits()}.
     */
    public long validatedReads() {
        return validatedReads.sum();
    }

    /** Whether this node serves cached reads now: caching on and no clock or node-id problem ({@link #cachingProblem()}). */
    public boolean cachingOn() {
        return config.caching() && cachingAllowed();
    }

    /** The version of the object now (a validated read of its headers). */
    long version(RemoteRef<?> ref) {
        return ObjectLayout.version(validatedRead(ref, deadline()).header());
    }

    private boolean cachingAllowed() {
        return skewProblem == null && self <= ObjectLayout.MAX_SHARER_NODE;
    }

    private byte[] fill(RemoteRef<?> ref) {
        long deadline = deadline();
        long ptr = ref.ptr();
        int stripe = stripe(ptr);
        long epoch = epochs.get(stripe);
        long minLease = config.minLease().toNanos() / 1000;
        long maxLease = config.maxLease().toNanos() / 1000;
        long lease = leaseOf.getOrDefault(ptr, Math.min(maxLease, minLease * 4));
        long now = clock.nowMicros();
        long expiry = now + lease;
        // raise the lease word to at least our expiry, then join the sharers: both before the validated read
        byte[] w = memory.read(ptr, 8 + ObjectLayout.META);
        checkBlock(ptr, ref.generationHeader(), Words.getLong(w, 0), "read");
        long leaseWord = Words.getLong(w, 8 + ObjectLayout.LEASE);
        while (leaseWord < expiry) {
            long seen = memory.compareAndSwap(ref.payload() + ObjectLayout.LEASE, leaseWord, expiry);
            if (seen == leaseWord) {
                break;
            }
            leaseWord = seen;
        }
        long bit = ObjectLayout.sharerBit(self);
        long sharers = Words.getLong(w, 8 + ObjectLayout.SHARERS);
        while ((sharers & bit) == 0) {
            long seen = memory.compareAndSwap(ref.payload() + ObjectLayout.SHARERS, sharers, sharers | bit);
            if (seen == sharers) {
                break;
            }
            sharers = seen;
        }
        Snapshot s = validatedRead(ref, deadline);
        CachedCopy previous = cache.get(cacheKey(ptr));
        long version = ObjectLayout.version(s.header());
        if (!ObjectLayout.locked(s.header()) && s.unlockedAfter() && (s.sharersAfter() & bit) != 0) {
            // installed under the map's lock for this object, as invalidations remove: an invalidation either
            // comes first (the epoch moved: no install) or after (it removes the entry) - never a stale window
            boolean[] installed = new boolean[1];
            cache.compute(cacheKey(ptr), (k, current) -> {
                if (epochs.get(stripe) != epoch) {
                    return current;
                }
                installed[0] = true;
                if (current != null) {
                    current.dropped = true; // replaced: a holder of it looks again
                }
                return new CachedCopy(version, s.bytes(), expiry);
            });
            if (installed[0]) {
                // adapt: an object written since our last fill gets a shorter lease, a quiet one a longer
                long next = previous != null && previous.version != version ? Math.max(minLease, lease / 2)
                        : Math.min(maxLease, lease * 2);
                leaseOf.put(ptr, next);
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
    private Snapshot validatedRead(RemoteRef<?> ref, long deadline) {
        long ptr = ref.ptr();
        int cap = ref.slotCapacity();
        boolean whole = ObjectLayout.objectSize(cap) <= WHOLE_READ_LIMIT;
        int attempt = 0;
        while (true) {
            long h1;
            byte[] value;
            CompletableFuture<byte[]> pipelined = null;
            try {
                byte[] first;
                if (whole && memory.runsDirect(ptr)) {
                    // a memory path: the same three reads, each run at once (no futures, no round trips)
                    byte[] h = memory.read(ptr, 8 + ObjectLayout.META);
                    checkBlock(ptr, ref.generationHeader(), Words.getLong(h, 0), "read");
                    h1 = Words.getLong(h, 8 + ObjectLayout.HEADER);
                    first = memory.read(ptr, 8 + ObjectLayout.objectSize(cap));
                } else if (whole) {
                    CompletableFuture<byte[]> head = memory.readAsync(ptr, 8 + ObjectLayout.META);
                    CompletableFuture<byte[]> body = memory.readAsync(ptr, 8 + ObjectLayout.objectSize(cap));
                    pipelined = memory.readAsync(ptr, 8 + ObjectLayout.META);
                    byte[] h = memory.await(head);
                    checkBlock(ptr, ref.generationHeader(), Words.getLong(h, 0), "read");
                    h1 = Words.getLong(h, 8 + ObjectLayout.HEADER);
                    first = memory.await(body);
                } else {
                    first = memory.read(ptr, 8 + ObjectLayout.SLOTS);
                    checkBlock(ptr, ref.generationHeader(), Words.getLong(first, 0), "read");
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
                    slot = memory.read(ref.payload() + at, ObjectLayout.SLOT_PREFIX + cap);
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
            byte[] again = pipelined != null ? memory.await(pipelined) : memory.read(ptr, 8 + ObjectLayout.META);
            checkBlock(ptr, ref.generationHeader(), Words.getLong(again, 0), "read");
            long h2 = Words.getLong(again, 8);
            if (value != null && ObjectLayout.version(h1) == ObjectLayout.version(h2)
                    && ObjectLayout.slot(h1) == ObjectLayout.slot(h2)) {
                return new Snapshot(h1, value, !ObjectLayout.locked(h2),
                        Words.getLong(again, 8 + ObjectLayout.SHARERS));
            }
            if (ObjectLayout.locked(h2)) {
                maybeRecover(ref, h2);
            }
            backoff(++attempt, deadline, "read", ptr);
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
            return allocator.read(out, 0, length);
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

    // ------------------------------------------------------------------ writes

    /**
     * Applies {@code change} to the current bytes and publishes the result, retrying
     * when another write came first. {@code change} returning null leaves the object as
     * it is (nothing is locked). Returns the bytes the change was applied to, and
     * whether it wrote.
     */
    Result update(RemoteRef<?> ref, UnaryOperator<byte[]> change) {
        return update(ref, change, WriteStop.NONE);
    }

    /** What a write did: the bytes it saw, the bytes it published (null: it did not write), the new version. */
    record Result(byte[] before, byte[] after, long version) {
    }

    /** Where a simulated writer crash stops (tests). */
    enum WriteStop { NONE, AFTER_LOCK, AFTER_SPARE_SLOT }

    Result update(RemoteRef<?> ref, UnaryOperator<byte[]> change, WriteStop stop) {
        long deadline = deadline();
        long ptr = ref.ptr();
        int attempt = 0;
        while (true) {
            Snapshot s = validatedRead(ref, deadline);
            long h = s.header();
            if (ObjectLayout.locked(h)) {
                maybeRecover(ref, h);
                backoff(++attempt, deadline, "write", ptr);
                continue;
            }
            byte[] next = change.apply(s.bytes());
            if (next == null) {
                return new Result(s.bytes(), null, ObjectLayout.version(h));
            }
            long mine = ObjectLayout.lockedBy(h, self);
            if (memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, h, mine) != h) {
                backoff(++attempt, deadline, "write", ptr);
                continue;
            }
            // the lock is ours: only now read the lease and the sharers (a reader that joins later sees the lock)
            boolean published = false;
            BlockRef freshOutOfLine = null;
            try {
                memory.writeLong(ref.payload() + ObjectLayout.LOCKED_AT, clock.nowMicros());
                if (stop == WriteStop.AFTER_LOCK) {
                    published = true; // simulated crash: leave the lock as a dead writer would
                    return new Result(s.bytes(), null, ObjectLayout.version(h));
                }
                byte[] ls = memory.read(ref.payload() + ObjectLayout.LEASE, 16);
                invalidateSharers(ref, Words.getLong(ls, 0), Words.getLong(ls, 8), deadline);
                int spare = 1 - ObjectLayout.slot(h);
                BlockRef oldOutOfLine = outOfLine(ref, spare);
                freshOutOfLine = writeSlot(ref.block(), ref.slotCapacity(), spare, next);
                if (stop == WriteStop.AFTER_SPARE_SLOT) {
                    published = true;
                    return new Result(s.bytes(), null, ObjectLayout.version(h));
                }
                long version = ObjectLayout.version(h) + 1;
                long seen = memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, mine,
                        ObjectLayout.unlocked(spare, version));
                if (seen != mine) {
                    published = true; // nothing of ours to release: the lock is someone else's now
                    if (freshOutOfLine != null) {
                        allocator.free(freshOutOfLine);
                    }
                    throw new LockBrokenException(ptr, mine, seen);
                }
                published = true;
                invalidateLocal(ptr);
                if (oldOutOfLine != null) {
                    // readers still validating against the older version fail their header check and retry
                    try {
                        allocator.free(oldOutOfLine);
                    } catch (DsmException e) {
                        LOG.warn("could not free the old out-of-line value of {}: {}", RemotePtr.toString(ptr),
                                e.getMessage());
                    }
                }
                return new Result(s.bytes(), next, version);
            } finally {
                if (!published) {
                    // failed before publishing: release the lock with a new version over the current slot
                    release(ref, mine, h);
                }
            }
        }
    }

    // ------------------------------------------------------------------ guards of data kept elsewhere

    /**
     * The version of this node's cached copy of {@code ref} when it may be served now
     * (its lease holds by this node's clock minus ε, and this node caches), else -1.
     * No verb. A structure that keeps its own data elsewhere (the map's entries) uses a
     * coherent object as the guard of that data: while this returns the version it saw
     * when it read the data, no {@link #exclusive} section on {@code ref} has run since.
     */
    public long cachedVersion(RemoteRef<?> ref) {
        if (!cachingAllowed()) {
            return -1;
        }
        CachedCopy e = cache.get(cacheKey(ref.ptr()));
        return e != null && clock.nowMicrosAtLeast() < e.expiryMicros - epsMicros ? e.version : -1;
    }

    /**
     * This node's cached copy of {@code ref} while it may be served (as
     * {@link #cachedVersion} decides), else null. Keep it and ask {@link #versionIfValid}
     * later instead of {@link #cachedVersion}: the same answer without the lookup.
     */
    public CachedCopy cachedCopy(RemoteRef<?> ref) {
        if (!cachingAllowed()) {
            return null;
        }
        CachedCopy e = cache.get(cacheKey(ref.ptr()));
        return e != null && clock.nowMicrosAtLeast() < e.expiryMicros - epsMicros ? e : null;
    }

    /**
     * {@code copy}'s version while it is still the copy this node serves — not dropped
     * (invalidated, replaced, cleared), its lease not run out, caching allowed — else -1:
     * what {@link #cachedVersion} of its object would return, with no lookup. Thread-safe:
     * the drop flag is volatile and set before an invalidation is acknowledged.
     */
    public long versionIfValid(CachedCopy copy) {
        return versionIfValid(copy, clock.nowMicrosAtLeast());
    }

    /**
     * {@link #versionIfValid(CachedCopy)} at the time {@code nowMicrosAtLeast}, a reading
     * of {@link #clock()}'s {@link Clock#nowMicrosAtLeast()} the caller took <em>before</em>
     * this call (and within the operation it answers): the copy is still served if its
     * lease held at that time and it has not been dropped by now — so it was served at that
     * time, which is where the caller's read takes effect. Reading the clock first lets a
     * caller overlap its own memory reads with the clock read's tail.
     */
    public long versionIfValid(CachedCopy copy, long nowMicrosAtLeast) {
        return copy != null && !copy.dropped && cachingAllowed() && !closed
                && nowMicrosAtLeast < copy.expiryMicros - epsMicros ? copy.version : -1;
    }

    /** The clock this heap's leases are judged by. */
    public Clock clock() {
        return clock;
    }

    /**
     * Caches {@code ref} on this node under a lease (a fill, when there is no valid copy)
     * and returns {@link #cachedVersion}: -1 when it cannot be cached now (a writer holds
     * it, this node does not cache). Read the guarded data after this call and keep it
     * only if {@link #cachedVersion} still returns the same version afterwards.
     */
    public long cacheVersion(RemoteRef<?> ref) {
        long v = cachedVersion(ref);
        if (v >= 0 || !cachingAllowed()) {
            return v;
        }
        fill(ref);
        return cachedVersion(ref);
    }

    /**
     * Runs {@code action} holding {@code ref}'s write lock, once every node that could
     * serve a cached copy of {@code ref} has dropped it (or its lease has run out), then
     * releases the lock with a new version (the value stays). Data guarded by
     * {@code ref} and changed by {@code action} is therefore never served stale from a
     * cache made under an older version.
     *
     * <p>{@code action} receives the {@link System#nanoTime()} by which it must have
     * issued its last change, half the lock timeout after the lock was taken: a
     * survivor may break a lock held past the lock timeout, and a change landing later
     * could follow another node's re-caching of the old data. The other half is the
     * margin for that change's verb in flight (so a verb delayed on the wire by more
     * than half the lock timeout is outside what this promises). An action that is
     * late must not change anything and should throw.
     *
     * @throws DsmTimeoutException when the lock cannot be taken within the timeout
     */
    public <R> R exclusive(RemoteRef<?> ref, java.util.function.LongFunction<R> action) {
        long deadline = deadline();
        long ptr = ref.ptr();
        int attempt = 0;
        while (true) {
            byte[] b = memory.read(ptr, 16);
            checkBlock(ptr, ref.generationHeader(), Words.getLong(b, 0), "lock");
            long h = Words.getLong(b, 8);
            if (ObjectLayout.locked(h)) {
                maybeRecover(ref, h);
                backoff(++attempt, deadline, "lock", ptr);
                continue;
            }
            long mine = ObjectLayout.lockedBy(h, self);
            long lockedAt = System.nanoTime();
            if (memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, h, mine) != h) {
                backoff(++attempt, deadline, "lock", ptr);
                continue;
            }
            try {
                byte[] now = new byte[8];
                Words.putLong(now, 0, clock.nowMicros());
                CompletableFuture<Void> stamp = memory.writeAsync(ref.payload() + ObjectLayout.LOCKED_AT, now);
                byte[] ls = memory.read(ref.payload() + ObjectLayout.LEASE, 16);
                memory.await(stamp);
                invalidateSharers(ref, Words.getLong(ls, 0), Words.getLong(ls, 8), deadline);
                // half the lock timeout: the other half is the margin for the last change's verb in flight
                long lastChange = lockedAt + config.lockTimeout().toNanos() / 2;
                return action.apply(lastChange);
            } finally {
                release(ref, mine, h);
                invalidateLocal(ptr);
            }
        }
    }

    private void release(RemoteRef<?> ref, long mine, long h) {
        try {
            memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, mine,
                    ObjectLayout.unlocked(ObjectLayout.slot(h), ObjectLayout.version(h) + 1));
        } catch (DsmException e) {
            LOG.warn("could not release the write lock of {} ({}); a survivor recovers it after the lock timeout",
                    RemotePtr.toString(ref.ptr()), e.getMessage());
        }
    }

    /** The out-of-line block slot {@code s} points to, or null. */
    private BlockRef outOfLine(RemoteRef<?> ref, int s) {
        byte[] b = memory.read(ref.payload() + ObjectLayout.slotOffset(s, ref.slotCapacity()),
                ObjectLayout.SLOT_PREFIX + ObjectLayout.OUT_OF_LINE_BYTES);
        if ((int) (Words.getLong(b, 0) >>> 32) != ObjectLayout.OUT_OF_LINE) {
            return null;
        }
        try {
            return BlockRef.of(Words.getLong(b, 8), Words.getLong(b, 16), Words.getLong(b, 24));
        } catch (DsmException e) {
            return null;
        }
    }

    /** Writes {@code bytes} into slot {@code s}; returns the out-of-line block it allocated, if any. */
    private BlockRef writeSlot(BlockRef block, int cap, int s, byte[] bytes) {
        byte[] slot;
        BlockRef out = null;
        if (bytes.length <= cap) {
            slot = new byte[ObjectLayout.SLOT_PREFIX + bytes.length];
            Words.putLong(slot, 0, bytes.length & 0xffffffffL);
            System.arraycopy(bytes, 0, slot, ObjectLayout.SLOT_PREFIX, bytes.length);
        } else {
            out = allocator.allocate(bytes.length, Placement.node(block.nodeId()));
            allocator.write(out, 0, bytes);
            slot = new byte[ObjectLayout.SLOT_PREFIX + ObjectLayout.OUT_OF_LINE_BYTES];
            Words.putLong(slot, 0, (long) ObjectLayout.OUT_OF_LINE << 32 | (bytes.length & 0xffffffffL));
            Words.putLong(slot, 8, out.ptr());
            Words.putLong(slot, 16, out.header());
            Words.putLong(slot, 24, out.capacity());
        }
        memory.write(block.payload() + ObjectLayout.slotOffset(s, cap), slot);
        return out;
    }

    /**
     * Makes sure no node serves a cached copy older than the version about to be
     * published: ask every sharer to drop it, and when one does not answer, wait until
     * the lease plus ε has passed. Acks are awaited only until then (at most the
     * deadline): a partitioned sharer costs a writer the rest of the lease, not the
     * whole operation timeout.
     */
    private void invalidateSharers(RemoteRef<?> ref, long leaseWord, long sharers, long deadline) {
        long ptr = ref.ptr();
        invalidateLocal(ptr);
        if (sharers == 0 || clock.nowMicros() > leaseWord + epsMicros) {
            if (sharers != 0) {
                clearSharers(ref, sharers);
            }
            return; // nobody can still serve a cached copy
        }
        boolean acked = messaging != null;
        if (acked) {
            byte[] payload = new byte[8];
            Words.putLong(payload, 0, ptr);
            List<CompletableFuture<byte[]>> asks = new ArrayList<>();
            for (int n = 1; n <= ObjectLayout.MAX_SHARER_NODE; n++) {
                if ((sharers & ObjectLayout.sharerBit(n)) != 0 && n != self) {
                    asks.add(messaging.requestAsync(n, INVALIDATE_CHANNEL, payload));
                }
            }
            // no ack is worth waiting for past the lease plus ε: by then no sharer may serve its copy anyway
            long leaseOver = System.nanoTime() + Math.max(0, leaseWord + epsMicros - clock.nowMicros() + 1) * 1000;
            long waitUntil = Math.min(deadline, leaseOver);
            for (CompletableFuture<byte[]> ask : asks) {
                try {
                    long left = Math.max(1, waitUntil - System.nanoTime());
                    ask.get(left, TimeUnit.NANOSECONDS);
                } catch (Exception e) {
                    acked = false; // a sharer that did not answer: its lease must run out
                }
            }
        }
        if (!acked) {
            waitOutLease(leaseWord, deadline, ptr);
        }
        clearSharers(ref, sharers);
    }

    /**
     * Removes the sharer bits this writer handled (invalidated, or whose lease it waited
     * out), by CAS, keeping every bit set since it read them: a reader that joined after
     * this writer's read of the sharers may have validated against the version before
     * this write's lock was taken by a later writer, and must stay known to that writer.
     * (Erasing such a bit let a later writer skip a live sharer: caught by the
     * linearizability stress test.)
     */
    private void clearSharers(RemoteRef<?> ref, long handled) {
        long seen = handled;
        for (int i = 0; i < 16; i++) {
            long w = memory.compareAndSwap(ref.payload() + ObjectLayout.SHARERS, seen, seen & ~handled);
            if (w == seen || (w & handled) == 0) {
                return;
            }
            seen = w;
        }
    }

    private void waitOutLease(long leaseWord, long deadline, long ptr) {
        while (clock.nowMicros() <= leaseWord + epsMicros) {
            if (System.nanoTime() - deadline > 0) {
                throw new DsmTimeoutException("write (waiting out the lease of " + RemotePtr.toString(ptr) + ")",
                        RemotePtr.nodeId(ptr), config.timeout());
            }
            LockSupport.parkNanos(200_000);
        }
    }

    /** Drops this node's cached copy of {@code ptr}; a fill in progress for it is discarded. */
    void invalidateLocal(long ptr) {
        int stripe = stripe(ptr);
        cache.compute(cacheKey(ptr), (k, current) -> {
            epochs.incrementAndGet(stripe);
            if (current != null) {
                current.dropped = true;
            }
            return null;
        });
    }

    /**
     * Recovers a lock whose owner is no live member, or that this node has seen held,
     * unchanged, for longer than the lock timeout: publishes a new version over the
     * current slot, so the holder's publish CAS fails.
     */
    private void maybeRecover(RemoteRef<?> ref, long h) {
        long ptr = ref.ptr();
        int owner = ObjectLayout.owner(h);
        boolean ownerGone = owner != self && memory.directory().member(owner).isEmpty();
        long now = System.nanoTime();
        long[] sighting = lockSightings.compute(ptr, (k, old) -> old != null && old[0] == h ? old : new long[] {h, now});
        boolean stale = now - sighting[1] > config.lockTimeout().toNanos();
        if (!ownerGone && !stale) {
            return;
        }
        long recovered = ObjectLayout.unlocked(ObjectLayout.slot(h), ObjectLayout.version(h) + 1);
        if (memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, h, recovered) == h) {
            lockSightings.remove(ptr);
            LOG.warn("recovered the write lock of {} held by node {} ({}): version {} stays current as version {}",
                    RemotePtr.toString(ptr), owner, ownerGone ? "no live member" : "held past the lock timeout",
                    ObjectLayout.version(h), ObjectLayout.version(recovered));
        }
    }

    /** Frees the object: later reads and writes through any handle fail with UseAfterFreeException. */
    void free(RemoteRef<?> ref) {
        long deadline = deadline();
        int attempt = 0;
        while (true) {
            Snapshot s = validatedRead(ref, deadline);
            long h = s.header();
            if (ObjectLayout.locked(h)) {
                maybeRecover(ref, h);
                backoff(++attempt, deadline, "free", ref.ptr());
                continue;
            }
            long mine = ObjectLayout.lockedBy(h, self);
            if (memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, h, mine) != h) {
                backoff(++attempt, deadline, "free", ref.ptr());
                continue;
            }
            byte[] ls = memory.read(ref.payload() + ObjectLayout.LEASE, 16);
            invalidateSharers(ref, Words.getLong(ls, 0), Words.getLong(ls, 8), deadline);
            for (int slot = 0; slot < 2; slot++) {
                BlockRef out = outOfLine(ref, slot);
                if (out != null) {
                    try {
                        allocator.free(out);
                    } catch (DsmException e) {
                        LOG.debug("out-of-line value of {} already freed: {}", RemotePtr.toString(ref.ptr()),
                                e.getMessage());
                    }
                }
            }
            allocator.free(ref.block());
            invalidateLocal(ref.ptr());
            leaseOf.remove(ref.ptr());
            return;
        }
    }

    // ------------------------------------------------------------------ clocks

    /**
     * Measures this node's clock against every live peer (a request on the clock
     * channel; offset = peer − midpoint of the round trip, uncertain by half the round
     * trip) and stops serving cached reads while the largest possible skew exceeds ε.
     *
     * @return the largest possible skew measured, in microseconds
     */
    public long checkSkew() {
        if (messaging == null) {
            return 0;
        }
        long worst = 0;
        String problem = null;
        for (var peer : memory.directory().members()) {
            if (peer.nodeId() == self) {
                continue;
            }
            try {
                // NTP's rule: of a few samples, trust the one with the shortest round trip (the least
                // uncertain); a single sample on a loaded machine can be tens of milliseconds wide
                long offset = 0;
                long rtt = Long.MAX_VALUE;
                for (int sample = 0; sample < SKEW_SAMPLES && rtt > epsMicros / 4; sample++) {
                    long t0 = clock.nowMicros();
                    byte[] r = messaging.request(peer.nodeId(), CLOCK_CHANNEL, new byte[0]);
                    long t1 = clock.nowMicros();
                    if (t1 - t0 < rtt) {
                        rtt = t1 - t0;
                        offset = Words.getLong(r, 0) - (t0 + t1) / 2;
                    }
                }
                long possible = Math.abs(offset) + rtt / 2;
                if (possible > worst) {
                    worst = possible;
                }
                if (possible > epsMicros) {
                    problem = "clock skew to node " + peer.nodeId() + " may be " + possible + "us (measured offset "
                            + offset + "us, round trip " + rtt + "us), above the clock bound " + epsMicros
                            + "us (membus.coherence.clock-bound)";
                }
            } catch (DsmException e) {
                LOG.debug("clock check of node {} failed: {}", peer.nodeId(), e.getMessage());
            }
        }
        measuredSkewMicros = worst;
        String before = skewProblem;
        skewProblem = problem;
        if (problem != null && before == null) {
            dropAll(); // (versionIfValid also refuses while skewProblem is set)
            LOG.warn("node {} stops serving cached reads (validated reads only): {}; fix the clocks (NTP)", self,
                    problem);
        } else if (problem == null && before != null) {
            LOG.info("node {} serves cached reads again: measured clock skew {}us is within the bound", self, worst);
        }
        return worst;
    }

    private void checkSkewQuietly() {
        try {
            if (!closed) {
                checkSkew();
            }
        } catch (RuntimeException e) {
            LOG.debug("clock check failed: {}", e.toString());
        }
    }

    /** Why this node does not serve cached reads now, or null when it does. */
    public String cachingProblem() {
        if (self > ObjectLayout.MAX_SHARER_NODE) {
            return "node id " + self + " is past the sharer bitmap (nodes 1.." + ObjectLayout.MAX_SHARER_NODE
                    + " cache): validated reads only";
        }
        return skewProblem;
    }

    /** The largest clock skew the last check measured, in microseconds. */
    public long measuredSkewMicros() {
        return measuredSkewMicros;
    }

    /**
     * This heap's state as ordered facts (what {@code membus status} prints for the
     * node): {@code caching} on or off, {@code why-not} when off, {@code cached-objects},
     * {@code measured-skew-us} (the largest possible skew the last check measured),
     * {@code clock-bound-us}.
     */
    public java.util.Map<String, String> status() {
        String p = cachingProblem();
        java.util.Map<String, String> facts = new java.util.LinkedHashMap<>();
        facts.put("caching", config.caching() && p == null ? "on" : "off");
        if (p != null) {
            facts.put("why-not", p);
        } else if (!config.caching()) {
            facts.put("why-not", "membus.coherence.caching = false");
        }
        facts.put("cached-objects", Integer.toString(cache.size()));
        facts.put("measured-skew-us", Long.toString(measuredSkewMicros));
        facts.put("clock-bound-us", Long.toString(epsMicros));
        return facts;
    }

    int cachedObjects() {
        return cache.size();
    }

    // ------------------------------------------------------------------ helpers

    private long deadline() {
        return System.nanoTime() + config.timeout().toNanos();
    }

    private static int stripe(long ptr) {
        return (int) ((ptr ^ (ptr >>> 17) ^ (ptr >>> 31)) & (STRIPES - 1));
    }

    private static void checkBlock(long ptr, long generationHeader, long raw, String op) {
        if (raw != HeapLayout.seal(generationHeader, ptr)) {
            throw new UseAfterFreeException(ptr, HeapLayout.generationOf(generationHeader),
                    HeapLayout.generationOf(HeapLayout.unseal(raw, ptr)), op);
        }
    }

    private void backoff(int attempt, long deadline, String op, long ptr) {
        if (closed) {
            throw new DsmException(ErrorCode.CONFIG, "coherent heap closed: node=" + self
                    + "; create a new CoherentHeap for this node");
        }
        if (System.nanoTime() - deadline > 0) {
            throw new DsmTimeoutException(op + " of coherent object " + RemotePtr.toString(ptr)
                    + " (it kept changing or stayed locked)", RemotePtr.nodeId(ptr), config.timeout());
        }
        if (attempt < 4) {
            Thread.onSpinWait();
        } else {
            LockSupport.parkNanos(Math.min(1_000_000L, 1_000L << Math.min(attempt - 4, 10)));
        }
    }

    /** Unregisters the channels and stops the skew checks. Handles fail afterwards. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (skewChecker != null) {
            skewChecker.shutdownNow();
        }
        if (messaging != null) {
            messaging.unregister(INVALIDATE_CHANNEL);
            messaging.unregister(CLOCK_CHANNEL);
        }
        dropAll(); // (versionIfValid also refuses once closed)
    }

    /** Drops every cached copy: marks each dropped, then empties the cache. */
    private void dropAll() {
        cache.values().forEach(c -> c.dropped = true);
        cache.clear();
    }
}
