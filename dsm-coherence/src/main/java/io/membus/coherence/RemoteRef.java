package io.membus.coherence;

import io.membus.alloc.BlockRef;
import io.membus.codec.Codec;

import java.util.Arrays;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.UnaryOperator;

/**
 * A typed handle on a coherent object in remote memory: {@link #get()}, {@link #set},
 * {@link #compareAndSet}, {@link #update}, each linearizable on its own, cached or not
 * (see {@link CoherentHeap}). The handle is two words, {@link #ptr()} and
 * {@link #generationHeader()}, which may be stored in other objects and reopened with
 * {@link CoherentHeap#open}; after {@link #free()}, every use of any handle of the
 * object fails with {@link io.membus.alloc.UseAfterFreeException}.
 *
 * <p>{@link #compareAndSet} compares encoded bytes: two values are equal when the
 * codec encodes them to the same bytes.
 *
 * <p>Interrupts: no method throws {@link InterruptedException}. A write ({@link #set},
 * {@link #compareAndSet}, {@link #update}, {@link #getAndSet}, {@link #free}) interrupted
 * while it waits for other nodes to drop their copies keeps waiting (bounded by the lease
 * plus the clock bound, and the deadline) — it holds the object's lock and must publish or
 * release it — completes, and returns with the thread's interrupt flag set.
 *
 * <p><b>Deadlines.</b> Each blocking call returns or fails by one deadline taken at its
 * start ({@link CoherenceConfig#timeout()}), shared by all its verbs, plus
 * {@link io.membus.core.OperationDeadline#MARGIN}; a write that ran out of time before
 * it published fails with a {@link io.membus.core.error.DsmTimeoutException} whose
 * {@code mayHaveRun()} is false (its lock released), one that may have published with
 * {@code mayHaveRun()} true.
 *
 * <p><b>Metering.</b> A handle opened by name through the facade ({@code Membus.ref})
 * reports its operations to the name's {@link OperationMeter} ({@link #metered}): every
 * {@link #get}, {@link #set}, {@link #compareAndSet}, {@link #update} and
 * {@link #getAndSet} is counted (the {@code *Async} forms through them), the failed ones
 * too; all but a cached {@link #get} are timed (two clock reads; a cached get's hit costs
 * less than that, and the heap counts its hits and misses). Other handles report to
 * {@link OperationMeter#NONE}: no clock read, nothing counted.
 *
 * <p><b>Note:</b> thread-safe and immutable; share it between threads. The
 * {@code *Async} forms run the blocking call on the common pool.
 *
 * @param <T> the value type
 */
public final class RemoteRef<T> {
    /** Operation kinds as an {@link OperationMeter} sees them: indexes into {@link #OPERATIONS}. */
    public static final int GET = 0;
    public static final int SET = 1;
    public static final int COMPARE_AND_SET = 2;
    public static final int UPDATE = 3;
    public static final int GET_AND_SET = 4;
    /** The names of the operation kinds, in index order. */
    public static final java.util.List<String> OPERATIONS =
            java.util.List.of("get", "set", "compareAndSet", "update", "getAndSet");

    private final CoherentHeap heap;
    private final BlockRef block;
    private final Codec<T> codec;
    private final int slotCapacity;
    private final boolean cached;
    private final OperationMeter meter;

    RemoteRef(CoherentHeap heap, BlockRef block, Codec<T> codec, int slotCapacity, boolean cached) {
        this(heap, block, codec, slotCapacity, cached, OperationMeter.NONE);
    }

    private RemoteRef(CoherentHeap heap, BlockRef block, Codec<T> codec, int slotCapacity, boolean cached,
                      OperationMeter meter) {
        this.heap = heap;
        this.block = block;
        this.codec = codec;
        this.slotCapacity = slotCapacity;
        this.cached = cached;
        this.meter = meter;
    }

    /** The same object, read with caching on or off. */
    public RemoteRef<T> cached(boolean on) {
        return new RemoteRef<>(heap, block, codec, slotCapacity, on, meter);
    }

    /** The same object, its operations reported to {@code meter} (see the class comment). */
    public RemoteRef<T> metered(OperationMeter meter) {
        return new RemoteRef<>(heap, block, codec, slotCapacity, cached, Objects.requireNonNull(meter, "meter"));
    }

    /** Where this handle reports its operations ({@link OperationMeter#NONE}: nowhere). */
    public OperationMeter meter() {
        return meter;
    }

    public boolean isCached() {
        return cached;
    }

    /** The current value. */
    public T get() {
        if (cached) { // counted, not timed: a hit costs less than two clock reads
            meter.count(GET);
            try {
                return codec.decode(heap.read(this, true));
            } catch (RuntimeException e) {
                meter.failed(GET);
                throw e;
            }
        }
        long began = meter.begin();
        try {
            return codec.decode(heap.read(this, false));
        } catch (RuntimeException e) {
            meter.failed(GET);
            throw e;
        } finally {
            meter.end(GET, began);
        }
    }

    /** Replaces the value. */
    public void set(T value) {
        long began = meter.begin();
        try {
            byte[] bytes = codec.encode(value);
            heap.update(this, old -> bytes);
        } catch (RuntimeException e) {
            meter.failed(SET);
            throw e;
        } finally {
            meter.end(SET, began);
        }
    }

    /** Sets {@code update} if the value is {@code expected} now (compared by encoded bytes). */
    public boolean compareAndSet(T expected, T update) {
        long began = meter.begin();
        try {
            byte[] e = codec.encode(expected);
            byte[] u = codec.encode(update);
            return heap.update(this, old -> Arrays.equals(old, e) ? u : null).after() != null;
        } catch (RuntimeException e) {
            meter.failed(COMPARE_AND_SET);
            throw e;
        } finally {
            meter.end(COMPARE_AND_SET, began);
        }
    }

    /**
     * Applies {@code change} to the current value and publishes the result atomically,
     * retrying with the newer value when another write came first; returns the new value.
     * {@code change} may run several times and must not have side effects.
     */
    public T update(UnaryOperator<T> change) {
        long began = meter.begin();
        try {
            CoherentHeap.Result r = heap.update(this, old -> codec.encode(Objects.requireNonNull(
                    change.apply(codec.decode(old)), "update returned null")));
            return codec.decode(r.after());
        } catch (RuntimeException e) {
            meter.failed(UPDATE);
            throw e;
        } finally {
            meter.end(UPDATE, began);
        }
    }

    /** Sets {@code value} and returns the value it replaced. */
    public T getAndSet(T value) {
        long began = meter.begin();
        try {
            byte[] bytes = codec.encode(value);
            return codec.decode(heap.update(this, old -> bytes).before());
        } catch (RuntimeException e) {
            meter.failed(GET_AND_SET);
            throw e;
        } finally {
            meter.end(GET_AND_SET, began);
        }
    }

    /** The object's version: it grows with every write. */
    public long version() {
        return heap.version(this);
    }

    /** Frees the object (invalidating every cached copy first). */
    public void free() {
        heap.free(this);
    }

    public CompletionStage<T> getAsync() {
        return CompletableFuture.supplyAsync(this::get);
    }

    public CompletionStage<Void> setAsync(T value) {
        return CompletableFuture.runAsync(() -> set(value));
    }

    /** The remote pointer of the object's block: one of the two words that name it. */
    public long ptr() {
        return block.ptr();
    }

    /** The block's header word at allocation (its generation): the other word that names it. */
    public long generationHeader() {
        return block.header();
    }

    public Codec<T> codec() {
        return codec;
    }

    BlockRef block() {
        return block;
    }

    long payload() {
        return block.payload();
    }

    int slotCapacity() {
        return slotCapacity;
    }

    @Override
    public String toString() {
        return "RemoteRef[" + io.membus.core.RemotePtr.toString(ptr()) + ", " + codec.id() + (cached ? ", cached" : "")
                + "]";
    }
}
