package io.membus.coherence;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.Placement;
import io.membus.alloc.UseAfterFreeException;
import io.membus.codec.Codec;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Words;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.message.Messaging;
import io.membus.core.time.Clock;
import io.membus.core.transport.pipeline.TimerWheel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
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
 *       the node measures its skew against its peers ({@link SkewEstimator}) and stops
 *       serving cached reads while a skew beyond ε is proven in consecutive checks (it
 *       reads validated instead, and says so).</li>
 *   <li>The cache of copies is bounded by {@link CoherenceConfig#cacheMaxEntries()} and
 *       {@link CoherenceConfig#cacheMaxBytes()}; copies whose lease ran out or whose
 *       object was freed are dropped (see {@code docs/coherence.md}, "The cache of copies").</li>
 *   <li>Interrupts: writes do not throw {@link InterruptedException}; a writer interrupted
 *       while it waits for invalidation acks keeps waiting (bounded), publishes or
 *       releases its lock, and returns with the thread's interrupt flag set.</li>
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
    /** Clock samples per peer and check (one window) at most, of which the shortest round trip counts. */
    static final int SKEW_SAMPLES = 16;
    /** Consecutive checks whose verdict must agree to stop caching for a skew, or to start again. */
    static final int SKEW_PERSISTENCE = 3;
    /** Cached copies an install looks at for an expired one to drop (the amortised sweep). */
    private static final int INSTALL_SWEEP = 2;
    /** Cached copies one tick of the periodic sweep looks at, at most (it runs on the shared timer wheel). */
    private static final int TICK_SWEEP = 1024;

    private final GlobalAllocator allocator;
    private final RemoteMemory memory;
    private final Messaging messaging;
    private final Clock clock;
    private final CoherenceConfig config;
    private final int self;
    private final long epsMicros;
    private final ConcurrentHashMap<Long, CachedCopy> cache = new ConcurrentHashMap<>();
    /** The adaptive lease per object (a hint: cleared whole past twice the cache's entry bound). */
    private final ConcurrentHashMap<Long, Long> leaseOf = new ConcurrentHashMap<>();
    // ---- the bound of the cache (see "The cache of copies" in docs/coherence.md)
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
    private final ConcurrentHashMap<Long, long[]> lockSightings = new ConcurrentHashMap<>();
    /** Per stripe of objects: raised by every invalidation, so a fill that met one is discarded. */
    private final AtomicLongArray epochs = new AtomicLongArray(STRIPES);
    private final ScheduledExecutorService skewChecker;
    /** The verdict per peer (guarded by itself: checks never run at once). */
    private final java.util.Map<Integer, SkewEstimator> skewEstimators = new java.util.HashMap<>();
    private volatile boolean skewPending;
    private volatile long measuredSkewMicros;
    private volatile long skewAtLeastMicros;
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
            skewChecker.execute(this::skewTick);
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
        checkOpen();
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

    /**
     * {@link #create(Codec, Object, Placement)} with the allocator's default placement:
     * this node on a memory node, round robin over the memory nodes on a client.
     */
    public <T> RemoteRef<T> create(Codec<T> codec, T initial) {
        return create(codec, initial, allocator.config().defaultPlacement());
    }

    /**
     * Reopens a handle stored elsewhere as its two words ({@link RemoteRef#ptr()} and
     * {@link RemoteRef#generationHeader()}).
     *
     * @throws UseAfterFreeException when the object was freed since
     * @throws InvalidPointerException when the words do not name a coherent object
     */
    public <T> RemoteRef<T> open(long ptr, long generationHeader, Codec<T> codec) {
        checkOpen();
        byte[] b = memory.read(ptr, 8 + ObjectLayout.SLOTS);
        checkBlock(ptr, generationHeader, Words.getLong(b, 0), "open");
        long meta = Words.getLong(b, 8 + ObjectLayout.META);
        if (!ObjectLayout.isMeta(meta)) {
            throw new InvalidPointerException(ptr, 0, "not a coherent object: meta=0x" + Long.toHexString(meta) + "; open only the two words RemoteRef.ptr() and"
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
        final long ptr;
        volatile boolean dropped;

        CachedCopy(long version, byte[] bytes, long expiryMicros, long ptr) {
            this.version = version;
            this.bytes = bytes;
            this.expiryMicros = expiryMicros;
            this.ptr = ptr;
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
        checkOpen();
        if (cached && cachingAllowed()) {
            CachedCopy e = cache.get(cacheKey(ref.ptr()));
            if (e != null && clock.nowMicrosAtLeast() < e.expiryMicros - epsMicros) {
                cacheHits.increment();
                return e.bytes;
            }
            cacheMisses.increment();
            long scope = OperationDeadline.enter(config.timeout());
            try {
                return fill(ref);
            } finally {
                OperationDeadline.exit(scope);
            }
        }
        validatedReads.increment();
        long scope = OperationDeadline.enter(config.timeout());
        try {
            return validatedRead(ref, deadline()).bytes();
        } finally {
            OperationDeadline.exit(scope);
        }
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
        long scope = OperationDeadline.enter(config.timeout());
        try {
            return ObjectLayout.version(validatedRead(ref, deadline()).header());
        } finally {
            OperationDeadline.exit(scope);
        }
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
        try {
            checkBlock(ptr, ref.generationHeader(), Words.getLong(w, 0), "read");
        } catch (UseAfterFreeException e) {
            forget(ptr); // freed by another node (maybe after our lease ran out: no invalidation came)
            throw e;
        }
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
        Snapshot s;
        try {
            s = validatedRead(ref, deadline);
        } catch (UseAfterFreeException e) {
            forget(ptr);
            throw e;
        }
        CachedCopy previous = cache.get(cacheKey(ptr));
        long version = ObjectLayout.version(s.header());
        if (!ObjectLayout.locked(s.header()) && s.unlockedAfter() && (s.sharersAfter() & bit) != 0
                && s.bytes().length <= config.cacheMaxBytes()) {
            boolean installed;
            sweepLock.lock();
            try {
                makeRoom(s.bytes().length);
                installed = install(ptr, stripe, epoch, new CachedCopy(version, s.bytes(), expiry, ptr));
                if (installed) {
                    sweepStep(INSTALL_SWEEP, clock.nowMicros()); // amortised: drops copies whose lease ran out
                    armSweeper();
                }
            } finally {
                sweepLock.unlock();
            }
            if (installed) {
                if (leaseOf.size() >= 2L * config.cacheMaxEntries()) {
                    leaseOf.clear(); // hints only: objects not cached for long start again at the default lease
                }
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
        // one deadline for the whole write: every verb of it ends by then (OperationDeadline)
        long scope = OperationDeadline.enter(config.timeout());
        try {
            return updateWithin(ref, change, stop);
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    private Result updateWithin(RemoteRef<?> ref, UnaryOperator<byte[]> change, WriteStop stop) {
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
            boolean interrupted = false;
            BlockRef freshOutOfLine = null;
            try {
                memory.writeLong(ref.payload() + ObjectLayout.LOCKED_AT, clock.nowMicros());
                if (stop == WriteStop.AFTER_LOCK) {
                    published = true; // simulated crash: leave the lock as a dead writer would
                    return new Result(s.bytes(), null, ObjectLayout.version(h));
                }
                byte[] ls = memory.read(ref.payload() + ObjectLayout.LEASE, 16);
                interrupted = invalidateSharers(ref, Words.getLong(ls, 0), Words.getLong(ls, 8), deadline);
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
                if (interrupted) {
                    Thread.currentThread().interrupt(); // the ack wait went on; the caller learns of it now
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
        long scope = OperationDeadline.enter(config.timeout());
        try {
            return exclusiveWithin(ref, action);
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    private <R> R exclusiveWithin(RemoteRef<?> ref, java.util.function.LongFunction<R> action) {
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
            boolean interrupted = false;
            try {
                byte[] now = new byte[8];
                Words.putLong(now, 0, clock.nowMicros());
                CompletableFuture<Void> stamp = memory.writeAsync(ref.payload() + ObjectLayout.LOCKED_AT, now);
                byte[] ls = memory.read(ref.payload() + ObjectLayout.LEASE, 16);
                memory.await(stamp);
                interrupted = invalidateSharers(ref, Words.getLong(ls, 0), Words.getLong(ls, 8), deadline);
                // half the lock timeout: the other half is the margin for the last change's verb in flight
                long lastChange = lockedAt + config.lockTimeout().toNanos() / 2;
                return action.apply(lastChange);
            } finally {
                release(ref, mine, h);
                invalidateLocal(ptr);
                if (interrupted) {
                    Thread.currentThread().interrupt(); // the ack wait went on; the caller learns of it now
                }
            }
        }
    }

    private void release(RemoteRef<?> ref, long mine, long h) {
        // an interrupted thread must still release (a waiting verb would fail at once): flag off for the CAS;
        // after the operation's deadline too, with a short budget of its own (OperationDeadline.CLEANUP): a lock
        // left behind costs every other writer the lock timeout
        boolean interrupted = Thread.interrupted();
        long scope = OperationDeadline.enterCleanup();
        try {
            memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, mine,
                    ObjectLayout.unlocked(ObjectLayout.slot(h), ObjectLayout.version(h) + 1));
        } catch (DsmException e) {
            LOG.warn("could not release the write lock of {} ({}); a survivor recovers it after the lock timeout",
                    RemotePtr.toString(ref.ptr()), e.getMessage());
        } finally {
            OperationDeadline.exit(scope);
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
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
     *
     * <p>An interrupt does not end the wait: the caller holds the object's write lock and
     * must publish or release it, which it may do only once no sharer can serve the old
     * version. The wait is bounded (by the lease plus ε and the deadline) and goes on; the
     * interrupt is returned, and the caller re-asserts the thread's flag once the lock is
     * published or released.
     *
     * @return whether the thread was interrupted while it waited (its flag is then clear)
     */
    private boolean invalidateSharers(RemoteRef<?> ref, long leaseWord, long sharers, long deadline) {
        long ptr = ref.ptr();
        invalidateLocal(ptr);
        if (sharers == 0 || clock.nowMicros() > leaseWord + epsMicros) {
            if (sharers != 0) {
                clearSharers(ref, sharers);
            }
            return false; // nobody can still serve a cached copy
        }
        boolean interrupted = false;
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
                while (true) {
                    try {
                        long left = Math.max(1, waitUntil - System.nanoTime());
                        ask.get(left, TimeUnit.NANOSECONDS);
                        break;
                    } catch (InterruptedException e) {
                        interrupted = true; // keep waiting (bounded): see above
                    } catch (Exception e) {
                        acked = false; // a sharer that did not answer: its lease must run out
                        break;
                    }
                }
            }
        }
        if (!acked) {
            interrupted |= waitOutLease(leaseWord, deadline, ptr);
        }
        clearSharers(ref, sharers);
        return interrupted;
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

    /** Waits until the lease plus ε has passed; returns whether the thread was interrupted (flag cleared). */
    private boolean waitOutLease(long leaseWord, long deadline, long ptr) {
        boolean interrupted = false;
        while (clock.nowMicros() <= leaseWord + epsMicros) {
            if (System.nanoTime() - deadline > 0) {
                if (interrupted) {
                    Thread.currentThread().interrupt();
                }
                // before the write was published (its lock is released by the caller): it did not run
                throw DsmTimeoutException.notSent("write (waiting out the lease of " + RemotePtr.toString(ptr) + ")",
                        RemotePtr.nodeId(ptr), config.timeout());
            }
            LockSupport.parkNanos(200_000);
            interrupted |= Thread.interrupted(); // else park returns at once: a busy loop
        }
        return interrupted;
    }

    /** Drops this node's cached copy of {@code ptr}; a fill in progress for it is discarded. */
    void invalidateLocal(long ptr) {
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

    // ------------------------------------------------------------------ the bound of the cache

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

    /**
     * Drops copies (under {@link #sweepLock}) until one more of {@code length} bytes fits the
     * bound: expired ones and live ones alike, in the order of the sweep's cursor (a clock hand
     * over the map: no order is kept on the hit path). Only installs add copies, all under the
     * lock, so the cache never holds more than the bound.
     */
    private void makeRoom(int length) {
        int maxEntries = config.cacheMaxEntries();
        long maxBytes = config.cacheMaxBytes();
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

    /** Drops this node's copy of an object that was freed, and its lease hint. */
    private void forget(long ptr) {
        invalidateLocal(ptr);
        leaseOf.remove(ptr);
    }

    /** Arms the periodic sweep (under {@link #sweepLock}) if it is not armed: it runs while copies are cached. */
    private void armSweeper() {
        if (!sweepArmed && !closed) {
            sweepArmed = true;
            TimerWheel.SHARED.arm(sweeper, System.nanoTime() + sweepPeriodNanos());
        }
    }

    /** As long as the longest lease (no copy outlives it unseen by much), within 10 ms .. 1 s. */
    private long sweepPeriodNanos() {
        return Math.max(TimeUnit.MILLISECONDS.toNanos(10), Math.min(TimeUnit.SECONDS.toNanos(1),
                config.maxLease().toNanos()));
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
            if (closed) {
                return;
            }
            long next = TimerWheel.TICK_NANOS;
            if (sweepLock.tryLock()) {
                try {
                    int seen = sweepStep(TICK_SWEEP, clock.nowMicros());
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
        long scope = OperationDeadline.enter(config.timeout());
        try {
            freeWithin(ref);
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    private void freeWithin(RemoteRef<?> ref) {
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
            boolean interrupted = invalidateSharers(ref, Words.getLong(ls, 0), Words.getLong(ls, 8), deadline);
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
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            return;
        }
    }

    // ------------------------------------------------------------------ clocks

    /**
     * Measures this node's clock against every live peer, one window each (up to
     * 16 ({@code SKEW_SAMPLES}) requests on the clock channel, of which the shortest round trip
     * counts; see {@link SkewEstimator}), and stops serving cached reads once the skew to a
     * peer is proven beyond ε (its lower bound) in 3 ({@code SKEW_PERSISTENCE}) consecutive
     * checks; starts again after as many checks within ε. The heap runs it every
     * {@code skew-interval}, and sooner (a fifth of it, at most 100 ms) while a verdict is pending.
     *
     * @return the largest possible skew the check measured (the upper bound), in microseconds
     */
    public long checkSkew() {
        if (messaging == null) {
            return 0;
        }
        synchronized (skewEstimators) {
            long worst = 0;
            long atLeast = 0;
            String problem = null;
            boolean pending = false;
            java.util.Set<Integer> peers = new java.util.HashSet<>();
            for (var peer : memory.directory().members()) {
                int n = peer.nodeId();
                if (n == self) {
                    continue;
                }
                peers.add(n);
                SkewEstimator estimator = skewEstimators.computeIfAbsent(n,
                        k -> new SkewEstimator(epsMicros, SKEW_PERSISTENCE));
                try {
                    for (int sample = 0; sample < SKEW_SAMPLES && !estimator.decided(); sample++) {
                        long t0 = clock.nowMicros();
                        byte[] r = messaging.request(n, CLOCK_CHANNEL, new byte[0]);
                        long t1 = clock.nowMicros();
                        estimator.sample(t0, Words.getLong(r, 0), t1);
                    }
                } catch (DsmException e) {
                    LOG.debug("clock check of node {} failed: {}", n, e.getMessage());
                }
                SkewEstimator.Window w = estimator.endWindow();
                if (w == null) {
                    continue; // no answer: the verdict on this peer stays as it was
                }
                worst = Math.max(worst, w.atMostMicros());
                atLeast = Math.max(atLeast, w.atLeastMicros());
                pending |= estimator.pending();
                if (w.alarmed()) {
                    problem = "clock skew to node " + n + " is at least " + w.atLeastMicros() + "us (measured offset "
                            + w.offsetMicros() + "us, uncertain by half its round trip of " + w.rttMicros()
                            + "us, the shortest of " + w.samples() + " samples), above the clock bound " + epsMicros
                            + "us (membus.coherence.clock-bound) in " + SKEW_PERSISTENCE + " consecutive checks";
                } else if (estimator.alarmed()) {
                    problem = "clock skew to node " + n + " was above the clock bound " + epsMicros + "us";
                }
            }
            skewEstimators.keySet().retainAll(peers); // a peer that left takes its verdict with it
            measuredSkewMicros = worst;
            skewAtLeastMicros = atLeast;
            skewPending = pending;
            String before = skewProblem;
            skewProblem = problem;
            if (problem != null && before == null) {
                dropAll(); // (versionIfValid also refuses while skewProblem is set)
                LOG.warn("node {} stops serving cached reads (validated reads only): {}; fix the clocks (NTP)", self,
                        problem);
            } else if (problem == null && before != null) {
                LOG.info("node {} serves cached reads again: the clock skew was within the bound in {} consecutive"
                        + " checks (at most {}us now)", self, SKEW_PERSISTENCE, worst);
            }
            return worst;
        }
    }

    /**
     * One scheduled check, then the next: after the skew interval, or while a verdict is
     * pending after a fifth of it, at most 100 ms (a proven skew stops caching about 200 ms
     * after the check that first saw it, not two intervals later).
     */
    private void skewTick() {
        try {
            if (!closed) {
                checkSkew();
            }
        } catch (RuntimeException e) {
            LOG.debug("clock check failed: {}", e.toString());
        }
        if (!closed) {
            long every = config.skewInterval().toMillis();
            try {
                skewChecker.schedule(this::skewTick, skewPending ? Math.max(1, Math.min(every / 5, 100)) : every,
                        TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.RejectedExecutionException e) {
                // closed meanwhile
            }
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

    /** The largest clock skew the last check left possible (the upper bound), in microseconds. */
    public long measuredSkewMicros() {
        return measuredSkewMicros;
    }

    /** The largest clock skew the last check proved (the lower bound), in microseconds. */
    public long skewAtLeastMicros() {
        return skewAtLeastMicros;
    }

    /**
     * This heap's state as ordered facts (what {@code membus status} prints for the
     * node): {@code caching} on or off, {@code why-not} when off, {@code cached-objects},
     * {@code measured-skew-us} (the largest possible skew the last check measured: its
     * upper bound), {@code skew-at-least-us} (the largest skew it proved: its lower bound;
     * caching stops when this exceeds the bound in consecutive checks), {@code clock-bound-us}.
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
        facts.put("cached-bytes", Long.toString(cachedBytes.get()));
        facts.put("cache-bound", config.cacheMaxEntries() + " objects, " + config.cacheMaxBytes() + " bytes");
        facts.put("cache-evictions", Long.toString(evictions.get()));
        facts.put("cache-expired-dropped", Long.toString(expiredDropped.get()));
        facts.put("measured-skew-us", Long.toString(measuredSkewMicros));
        facts.put("skew-at-least-us", Long.toString(skewAtLeastMicros));
        facts.put("clock-bound-us", Long.toString(epsMicros));
        return facts;
    }

    /** Copies this node holds now (at most {@link CoherenceConfig#cacheMaxEntries()}). */
    public int cachedObjects() {
        return cache.size();
    }

    /** Bytes of the values of the copies this node holds now (at most {@link CoherenceConfig#cacheMaxBytes()}). */
    public long cachedBytes() {
        return cachedBytes.get();
    }

    /** Lease hints this node keeps (at most twice the entry bound; tests). */
    int leaseHints() {
        return leaseOf.size();
    }

    // ------------------------------------------------------------------ helpers

    /** The operation's deadline: its {@link OperationDeadline} scope's (opened at its start), or the timeout from now. */
    private long deadline() {
        checkOpen(); // every operation on a handle starts here
        return OperationDeadline.until(System.nanoTime(), config.timeout().toNanos());
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

    /** Fails at once with {@link DsmClosedException} once {@link #close()} ran. */
    private void checkOpen() {
        if (closed) {
            throw new DsmClosedException("the coherent heap of node " + self + " (and every RemoteRef of it)");
        }
    }

    private void backoff(int attempt, long deadline, String op, long ptr) {
        checkOpen();
        if (System.nanoTime() - deadline > 0) {
            // before the operation took effect: nothing of it ran
            throw DsmTimeoutException.notSent(op + " of coherent object " + RemotePtr.toString(ptr)
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
        TimerWheel.SHARED.cancel(sweeper);
        if (messaging != null) {
            messaging.unregister(INVALIDATE_CHANNEL);
            messaging.unregister(CLOCK_CHANNEL);
        }
        dropAll(); // (versionIfValid also refuses once closed)
    }

    /** Drops every cached copy (each marked dropped, its bytes uncounted). */
    private void dropAll() {
        for (Map.Entry<Long, CachedCopy> e : cache.entrySet()) {
            drop(e.getKey(), e.getValue());
        }
    }
}
