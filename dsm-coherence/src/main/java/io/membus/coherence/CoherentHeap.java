package io.membus.coherence;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.alloc.UseAfterFreeException;
import io.membus.codec.Codec;
import io.membus.core.Words;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.message.Messaging;
import io.membus.core.time.Clock;

import java.util.Map;
import java.util.function.LongFunction;
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
 * <p>This class is the facade that assembles the parts, one job each: {@link ObjectReader}
 * (validated and cached reads, fills), {@link ObjectWriter} (create, writes, exclusive
 * sections, free), {@link Invalidator} (invalidations, both sides), {@link LockRecovery},
 * {@link CopyCache} (the copies, their bound and sweep), {@link SkewMonitor} (the clock
 * checks, on the shared timer wheel) and {@link HeapStatus} (what {@link #status()} says);
 * {@link HeapContext} holds what they share.
 *
 * <p><b>Note:</b> thread-safe. Memory ordering is that of the verbs: a write whose
 * call returned is seen by every read (cached or not, on any node) that starts after
 * it; cache entries are published through a {@code ConcurrentHashMap} ({@link CopyCache}).
 */
public final class CoherentHeap implements AutoCloseable {
    /** The message channel of invalidations: payload ptr, new version; the answer is the ack. */
    public static final short INVALIDATE_CHANNEL = (short) 0x0C11;
    /** The message channel of clock checks: an empty request, answered with the peer's clock. */
    public static final short CLOCK_CHANNEL = (short) 0x0C12;
    /** The setting that holds {@link #maxValueSize()} in the facade's config. */
    public static final String MAX_VALUE_SIZE_SETTING = "membus.collections.max-value-size";
    /** Clock samples per peer and check (one window) at most, of which the shortest round trip counts. */
    static final int SKEW_SAMPLES = SkewMonitor.SKEW_SAMPLES;
    /** Consecutive checks whose verdict must agree to stop caching for a skew, or to start again. */
    static final int SKEW_PERSISTENCE = SkewMonitor.SKEW_PERSISTENCE;

    private final HeapContext ctx;
    private final CopyCache cache;
    private final SkewMonitor skew;
    private final Invalidator invalidator;
    private final ObjectReader reader;
    private final ObjectWriter writer;

    /**
     * A heap over {@code allocator}'s node. With {@code messaging} (may be null: then
     * writers wait out leases, and no skew is measured) it registers the invalidation and
     * clock channels, and (with {@link CoherenceConfig#checkSkew()}) schedules the clock
     * checks on the shared timer wheel.
     */
    public CoherentHeap(GlobalAllocator allocator, Messaging messaging, Clock clock, CoherenceConfig config) {
        this.ctx = new HeapContext(allocator, messaging, clock, config);
        this.cache = new CopyCache(ctx);
        this.skew = new SkewMonitor(ctx, cache);
        LockRecovery recovery = new LockRecovery(ctx);
        this.invalidator = new Invalidator(ctx, cache);
        this.reader = new ObjectReader(ctx, cache, skew, recovery);
        this.writer = new ObjectWriter(ctx, reader, invalidator, recovery, cache);
        if (messaging != null) {
            invalidator.register();
            skew.register();
            if (config.checkSkew()) {
                skew.start();
            }
        }
    }

    public CoherenceConfig config() {
        return ctx.config;
    }

    public GlobalAllocator allocator() {
        return ctx.allocator;
    }

    /** The clock this heap's leases are judged by. */
    public Clock clock() {
        return ctx.clock;
    }

    // ------------------------------------------------------------------ handles

    /**
     * Sets the largest encoded value {@link #create} and the writes of {@link RemoteRef}
     * accept, in bytes (1 .. 16 MiB - 4 KiB: a value is written with one verb); a larger
     * one is refused with a {@link io.membus.core.error.ValueTooLargeException} naming the
     * size, the limit and {@value #MAX_VALUE_SIZE_SETTING}, before anything is allocated
     * or locked. Returns this.
     */
    public CoherentHeap maxValueSize(long bytes) {
        ctx.maxValueSize(bytes);
        return this;
    }

    /** The largest encoded value accepted, in bytes. */
    public long maxValueSize() {
        return ctx.maxValueSize();
    }

    /** Allocates an object holding {@code initial}, placed as {@code placement} says. */
    public <T> RemoteRef<T> create(Codec<T> codec, T initial, Placement placement) {
        ctx.checkOpen();
        byte[] bytes = codec.encode(initial);
        ctx.checkSize(bytes, "coherent object value (create)");
        // at least the three words of an out-of-line value
        int slotCapacity = Math.max(ObjectLayout.OUT_OF_LINE_BYTES + 8, Math.min(Math.max(bytes.length, 8) * 2, 4096));
        BlockRef block = writer.create(bytes, slotCapacity, placement);
        return new RemoteRef<>(this, block, codec, slotCapacity, ctx.config.caching());
    }

    /**
     * {@link #create(Codec, Object, Placement)} with the allocator's default placement:
     * this node on a memory node, round robin over the memory nodes on a client.
     */
    public <T> RemoteRef<T> create(Codec<T> codec, T initial) {
        return create(codec, initial, ctx.allocator.config().defaultPlacement());
    }

    /**
     * Reopens a handle stored elsewhere as its two words ({@link RemoteRef#ptr()} and
     * {@link RemoteRef#generationHeader()}).
     *
     * @throws UseAfterFreeException when the object was freed since
     * @throws InvalidPointerException when the words do not name a coherent object
     */
    public <T> RemoteRef<T> open(long ptr, long generationHeader, Codec<T> codec) {
        ctx.checkOpen();
        byte[] b = ctx.memory.read(ptr, 8 + ObjectLayout.SLOTS);
        HeapContext.checkBlock(ptr, generationHeader, Words.getLong(b, 0), "open");
        long meta = Words.getLong(b, 8 + ObjectLayout.META);
        if (!ObjectLayout.isMeta(meta)) {
            throw new InvalidPointerException(ptr, 0, "not a coherent object: meta=0x" + Long.toHexString(meta) + "; open only the two words RemoteRef.ptr() and"
                    + " RemoteRef.generationHeader() stored");
        }
        int slotCapacity = ObjectLayout.slotCapacityOf(meta);
        BlockRef block = BlockRef.of(ptr, generationHeader, ObjectLayout.objectSize(slotCapacity));
        return new RemoteRef<>(this, block, codec, slotCapacity, ctx.config.caching());
    }

    // ------------------------------------------------------------------ reads

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

    byte[] read(RemoteRef<?> ref, boolean cached) {
        return reader.read(ref, cached);
    }

    /**
     * Reads of cached objects ({@link RemoteRef#get()} of a cached ref) that this node served
     * from its copy, with no verb, since the heap was created. A sum of striped counters:
     * exact once the reads counted have returned, an estimate while they run.
     */
    public long cacheHits() {
        return reader.cacheHits();
    }

    /** Reads of cached objects that found no valid copy here and read the object (a fill); see {@link #cacheHits()}. */
    public long cacheMisses() {
        return reader.cacheMisses();
    }

    /**
     * Reads validated against the object's headers in its home memory: reads of objects
     * not cached, and every read while this node may not cache (clock skew, {@code caching
     * = false}); see {@link #cacheHits()}.
     */
    public long validatedReads() {
        return reader.validatedReads();
    }

    /** Whether this node serves cached reads now: caching on and no clock or node-id problem ({@link #cachingProblem()}). */
    public boolean cachingOn() {
        return ctx.config.caching() && reader.cachingAllowed();
    }

    /** The version of the object now (a validated read of its headers). */
    long version(RemoteRef<?> ref) {
        return reader.version(ref);
    }

    // ------------------------------------------------------------------ writes

    /**
     * Applies {@code change} to the current bytes and publishes the result, retrying
     * when another write came first. {@code change} returning null leaves the object as
     * it is (nothing is locked). Returns the bytes the change was applied to, and
     * whether it wrote.
     */
    Result update(RemoteRef<?> ref, UnaryOperator<byte[]> change) {
        return writer.update(ref, change, WriteStop.NONE);
    }

    /** What a write did: the bytes it saw, the bytes it published (null: it did not write), the new version. */
    record Result(byte[] before, byte[] after, long version) {
    }

    /** Where a simulated writer crash stops (tests). */
    enum WriteStop { NONE, AFTER_LOCK, AFTER_SPARE_SLOT }

    Result update(RemoteRef<?> ref, UnaryOperator<byte[]> change, WriteStop stop) {
        return writer.update(ref, change, stop);
    }

    /** Frees the object: later reads and writes through any handle fail with UseAfterFreeException. */
    void free(RemoteRef<?> ref) {
        writer.free(ref);
    }

    /** Drops this node's cached copy of {@code ptr}; a fill in progress for it is discarded. */
    void invalidateLocal(long ptr) {
        cache.invalidate(ptr);
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
        return reader.cachedVersion(ref);
    }

    /**
     * This node's cached copy of {@code ref} while it may be served (as
     * {@link #cachedVersion} decides), else null. Keep it and ask {@link #versionIfValid}
     * later instead of {@link #cachedVersion}: the same answer without the lookup.
     */
    public CachedCopy cachedCopy(RemoteRef<?> ref) {
        return reader.cachedCopy(ref);
    }

    /**
     * {@code copy}'s version while it is still the copy this node serves — not dropped
     * (invalidated, replaced, cleared), its lease not run out, caching allowed — else -1:
     * what {@link #cachedVersion} of its object would return, with no lookup. Thread-safe:
     * the drop flag is volatile and set before an invalidation is acknowledged.
     */
    public long versionIfValid(CachedCopy copy) {
        return reader.versionIfValid(copy, ctx.clock.nowMicrosAtLeast());
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
        return reader.versionIfValid(copy, nowMicrosAtLeast);
    }

    /**
     * Caches {@code ref} on this node under a lease (a fill, when there is no valid copy)
     * and returns {@link #cachedVersion}: -1 when it cannot be cached now (a writer holds
     * it, this node does not cache). Read the guarded data after this call and keep it
     * only if {@link #cachedVersion} still returns the same version afterwards.
     */
    public long cacheVersion(RemoteRef<?> ref) {
        return reader.cacheVersion(ref);
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
    public <R> R exclusive(RemoteRef<?> ref, LongFunction<R> action) {
        return writer.exclusive(ref, action);
    }

    // ------------------------------------------------------------------ clocks

    /**
     * Measures this node's clock against every live peer, one window each (up to
     * 16 ({@code SKEW_SAMPLES}) requests on the clock channel, of which the shortest round trip
     * counts; see {@link SkewEstimator}), and stops serving cached reads once the skew to a
     * peer is proven beyond ε (its lower bound) in 3 ({@code SKEW_PERSISTENCE}) consecutive
     * checks; starts again after as many checks within ε. The heap runs it every
     * {@code skew-interval}, and sooner (a fifth of it, at most 100 ms) while a verdict is pending.
     * A call runs after a check in progress ends, and waits for its own (each request
     * bounded by the operation timeout).
     *
     * @return the largest possible skew the check measured (the upper bound), in microseconds
     */
    public long checkSkew() {
        return skew.checkSkew();
    }

    /** Why this node does not serve cached reads now, or null when it does. */
    public String cachingProblem() {
        if (!ctx.hasSharerBit()) {
            return "node id " + ctx.self + " is past the sharer bitmap (nodes 1.." + ObjectLayout.MAX_SHARER_NODE
                    + " cache): validated reads only";
        }
        return skew.problem();
    }

    /** The largest clock skew the last check left possible (the upper bound), in microseconds. */
    public long measuredSkewMicros() {
        return skew.measuredMicros();
    }

    /** The largest clock skew the last check proved (the lower bound), in microseconds. */
    public long skewAtLeastMicros() {
        return skew.atLeastMicros();
    }

    // ------------------------------------------------------------------ status

    /**
     * This heap's state as ordered facts (what {@code membus status} prints for the
     * node): {@code caching} on or off, {@code why-not} when off, {@code cached-objects},
     * {@code measured-skew-us} (the largest possible skew the last check measured: its
     * upper bound), {@code skew-at-least-us} (the largest skew it proved: its lower bound;
     * caching stops when this exceeds the bound in consecutive checks), {@code clock-bound-us}.
     */
    public Map<String, String> status() {
        return HeapStatus.facts(ctx, cache, cachingProblem(), skew);
    }

    /** Copies this node holds now (at most {@link CoherenceConfig#cacheMaxEntries()}). */
    public int cachedObjects() {
        return cache.size();
    }

    /** Bytes of the values of the copies this node holds now (at most {@link CoherenceConfig#cacheMaxBytes()}). */
    public long cachedBytes() {
        return cache.bytes();
    }

    /** Lease hints this node keeps (at most twice the entry bound; tests). */
    int leaseHints() {
        return cache.leaseHints();
    }

    /** Unregisters the channels and stops the skew checks and the sweep. Handles fail afterwards. */
    @Override
    public void close() {
        if (!ctx.close()) {
            return;
        }
        skew.close();
        if (ctx.messaging != null) {
            invalidator.unregister();
        }
        cache.close(); // (versionIfValid also refuses once closed)
    }
}
