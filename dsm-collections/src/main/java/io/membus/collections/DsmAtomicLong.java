package io.membus.collections;

import io.membus.core.RemoteMemory;

import java.util.concurrent.CompletableFuture;
import java.util.function.LongBinaryOperator;
import java.util.function.LongUnaryOperator;

/**
 * A {@code long} shared by every node, with the API of
 * {@link java.util.concurrent.atomic.AtomicLong}. It is one 8-byte word in the
 * body of its root (no header): {@code get} is one read, {@code set} one write
 * (a CAS loop on {@code rdma}, where a write is not atomic against atomics),
 * {@code incrementAndGet}/{@code getAndAdd}/... one fetch-and-add,
 * {@code compareAndSet} one compare-and-swap; {@code getAndSet} and the
 * {@code update}/{@code accumulate} forms are CAS loops that start from a read
 * and retry with the witness of each failed CAS (so a function may run more than
 * once, as in {@code AtomicLong}).
 *
 * <pre>
 *   root body:
 *   0                   8
 *   +-------------------+
 *   | value (long, LE)  |
 *   +-------------------+
 * </pre>
 *
 * <p>Every operation is a remote verb with the node's operation timeout; a failure
 * is a typed {@link io.membus.core.error.DsmException} (e.g. the owning node is
 * down). A verb that timed out may or may not have taken effect.
 *
 * <p><b>Note:</b> thread-safe. Every operation is linearizable: atomics on the
 * word are atomic across all nodes, and a read issued after a write or atomic
 * completed sees it (or a later value). The memory-order variants
 * ({@code getPlain}, {@code setRelease}, {@code lazySet}, {@code weakCompareAndSet*})
 * are all as strong as their volatile forms.
 */
public final class DsmAtomicLong extends Number implements Rooted {
    private static final long serialVersionUID = 1L;

    /** The descriptor every atomic long root records. */
    static final String DESCRIPTOR = "atomicLong";

    /** Operation kinds counted in {@link #operationStats()} (one verb each: counted, not timed). */
    static final String[] OPERATIONS = {"get", "set", "add", "compareAndSet", "update"};
    private static final int GET = 0;
    private static final int SET = 1;
    private static final int ADD = 2;
    private static final int CAS = 3;
    private static final int UPDATE = 4;

    private final transient Handle handle;
    private final transient OperationStats stats;
    private final transient WordVerbs words;
    private final transient RemoteMemory memory;
    private final long ptr;

    DsmAtomicLong(Root root, WordVerbs words) {
        this.handle = new Handle(root, OPERATIONS);
        this.stats = handle.stats();
        this.words = words;
        this.memory = words.memory();
        this.ptr = root.bodyPtr();
    }

    static DsmAtomicLong getOrCreate(NamedRoots roots, WordVerbs words, String name) {
        // a fresh block may hold old bytes: the body is zeroed before the name is bound
        Root root = roots.getOrCreate(name, CollectionKind.ATOMIC_LONG, DESCRIPTOR, Long.BYTES,
                r -> roots.memory().writeLong(r.bodyPtr(), 0L));
        return new DsmAtomicLong(root, words);
    }

    @Override
    public Handle handle() {
        return handle;
    }

    /** The word's pointer, once the structure is known to be alive (see {@link Lifecycle}); counts one {@code op}. */
    private long ptr(int op) {
        try {
            handle.check();
        } catch (RuntimeException e) { // destroyed, closed, its root unreadable: a failed operation
            stats.countFailed(op);
            throw e;
        }
        stats.count(op);
        return ptr;
    }

    /** The word's pointer, once the structure is known to be alive; counts nothing (a retry of a counted operation). */
    private long ptr() {
        handle.check();
        return ptr;
    }

    /** The failure of {@link #ptr}, for the async forms: null when alive. */
    private RuntimeException goneNow() {
        return handle.failureNow();
    }

    /**
     * Destroys this counter cluster-wide: its name is given back (when still bound to it)
     * and its root freed a grace later; from then on every operation of every handle on it
     * fails with a {@link StructureGoneException} (within a quarter second on other
     * nodes). Returns whether this call destroyed it (false: destroyed already).
     *
     * @throws CollectionArgumentException when the handle was not opened through {@link DsmCollections}
     */
    public boolean destroy() {
        return Rooted.destroy(this);
    }

    /** The remote pointer of the word. */
    public long address() {
        return ptr;
    }

    public long get() {
        return memory.readLong(ptr(GET));
    }

    public CompletableFuture<Long> getAsync() {
        RuntimeException gone = goneNow();
        if (gone != null) {
            return CompletableFuture.failedFuture(gone);
        }
        stats.count(GET);
        return memory.readAsync(ptr, Long.BYTES).thenApply(b -> io.membus.core.Words.getLong(b, 0));
    }

    public void set(long newValue) {
        words.store(ptr(SET), newValue);
    }

    /** As {@link #set}: a remote store has no weaker form. */
    public void lazySet(long newValue) {
        set(newValue);
    }

    public long getAndSet(long newValue) {
        return words.swap(ptr(SET), newValue);
    }

    public boolean compareAndSet(long expectedValue, long newValue) {
        return memory.compareAndSwap(ptr(CAS), expectedValue, newValue) == expectedValue;
    }

    public CompletableFuture<Boolean> compareAndSetAsync(long expectedValue, long newValue) {
        RuntimeException gone = goneNow();
        if (gone != null) {
            return CompletableFuture.failedFuture(gone);
        }
        stats.count(CAS);
        return memory.compareAndSwapAsync(ptr, expectedValue, newValue).thenApply(w -> w == expectedValue);
    }

    /** The witness value: {@code expectedValue} when the swap took place. One CAS. */
    public long compareAndExchange(long expectedValue, long newValue) {
        return memory.compareAndSwap(ptr(CAS), expectedValue, newValue);
    }

    /** As {@link #compareAndSet}: never fails spuriously. */
    @Deprecated(since = "9")
    public boolean weakCompareAndSet(long expectedValue, long newValue) {
        return compareAndSet(expectedValue, newValue);
    }

    /** As {@link #compareAndSet}: never fails spuriously. */
    public boolean weakCompareAndSetPlain(long expectedValue, long newValue) {
        return compareAndSet(expectedValue, newValue);
    }

    /** As {@link #compareAndSet}. */
    public boolean weakCompareAndSetVolatile(long expectedValue, long newValue) {
        return compareAndSet(expectedValue, newValue);
    }

    /** As {@link #compareAndSet}. */
    public boolean weakCompareAndSetAcquire(long expectedValue, long newValue) {
        return compareAndSet(expectedValue, newValue);
    }

    /** As {@link #compareAndSet}. */
    public boolean weakCompareAndSetRelease(long expectedValue, long newValue) {
        return compareAndSet(expectedValue, newValue);
    }

    public long getAndIncrement() {
        return memory.fetchAndAdd(ptr(ADD), 1);
    }

    public long getAndDecrement() {
        return memory.fetchAndAdd(ptr(ADD), -1);
    }

    public long getAndAdd(long delta) {
        return memory.fetchAndAdd(ptr(ADD), delta);
    }

    public long incrementAndGet() {
        return memory.fetchAndAdd(ptr(ADD), 1) + 1;
    }

    public long decrementAndGet() {
        return memory.fetchAndAdd(ptr(ADD), -1) - 1;
    }

    public long addAndGet(long delta) {
        return memory.fetchAndAdd(ptr(ADD), delta) + delta;
    }

    /** One fetch-and-add, completed asynchronously; the value after the addition. */
    public CompletableFuture<Long> addAndGetAsync(long delta) {
        RuntimeException gone = goneNow();
        if (gone != null) {
            return CompletableFuture.failedFuture(gone);
        }
        stats.count(ADD);
        return memory.fetchAndAddAsync(ptr, delta).thenApply(before -> before + delta);
    }

    public long getAndUpdate(LongUnaryOperator updateFunction) {
        long prev = memory.readLong(ptr(UPDATE));
        while (true) {
            long next = updateFunction.applyAsLong(prev);
            long witness = memory.compareAndSwap(ptr(), prev, next);
            if (witness == prev) {
                return prev;
            }
            prev = witness;
        }
    }

    public long updateAndGet(LongUnaryOperator updateFunction) {
        long prev = memory.readLong(ptr(UPDATE));
        while (true) {
            long next = updateFunction.applyAsLong(prev);
            long witness = memory.compareAndSwap(ptr(), prev, next);
            if (witness == prev) {
                return next;
            }
            prev = witness;
        }
    }

    public long getAndAccumulate(long x, LongBinaryOperator accumulatorFunction) {
        return getAndUpdate(v -> accumulatorFunction.applyAsLong(v, x));
    }

    public long accumulateAndGet(long x, LongBinaryOperator accumulatorFunction) {
        return updateAndGet(v -> accumulatorFunction.applyAsLong(v, x));
    }

    /** As {@link #get}. */
    public long getPlain() {
        return get();
    }

    /** As {@link #set}. */
    public void setPlain(long newValue) {
        set(newValue);
    }

    /** As {@link #get}. */
    public long getOpaque() {
        return get();
    }

    /** As {@link #set}. */
    public void setOpaque(long newValue) {
        set(newValue);
    }

    /** As {@link #get}. */
    public long getAcquire() {
        return get();
    }

    /** As {@link #set}. */
    public void setRelease(long newValue) {
        set(newValue);
    }

    @Override
    public int intValue() {
        return (int) get();
    }

    @Override
    public long longValue() {
        return get();
    }

    @Override
    public float floatValue() {
        return (float) get();
    }

    @Override
    public double doubleValue() {
        return (double) get();
    }

    /** The current value, as {@code AtomicLong.toString} (one read). */
    @Override
    public String toString() {
        return Long.toString(get());
    }
}
