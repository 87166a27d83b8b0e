package io.membus.collections;

import java.util.Arrays;
import java.util.function.LongBinaryOperator;
import java.util.function.LongUnaryOperator;

/**
 * A fixed-length array of {@code long}s shared by every node, with the element
 * API of {@link java.util.concurrent.atomic.AtomicLongArray} plus bulk
 * {@link #get(int, int)}, {@link #put(int, long[])} and {@link #addAll(int, long[])}.
 * The array is sized at creation and spread over the nodes in stripes (see
 * {@link StripedWords} for the layout): element operations are one verb each
 * (one read, one write, one fetch-and-add, one CAS; CAS loops for
 * {@code getAndSet}/{@code update}/{@code accumulate}); a bulk operation sends one
 * verb per stripe (per element for {@code addAll}), all in flight at once, so it
 * costs about one round trip per node.
 *
 * <p>An index outside the array is a {@link CollectionArgumentException} (where
 * {@code AtomicLongArray} throws {@code IndexOutOfBoundsException}); nothing is
 * touched.
 *
 * <p><b>Note:</b> thread-safe. Every element operation is linearizable (the rules
 * of {@link DsmAtomicLong}, per element); a bulk operation is not atomic as a
 * whole: each element is read, written or added atomically, and a concurrent
 * writer may be seen for some elements and not others.
 */
public final class DsmLongArray extends StripedArray {
    static final String KIND_NAME = "longArray";

    private DsmLongArray(StripedWords w) {
        super(w);
    }

    static String descriptor(int length) {
        return KIND_NAME + "(length=" + length + ")";
    }

    static DsmLongArray getOrCreate(NamedRoots roots, WordVerbs words, String name, int length, int stripeLength) {
        return new DsmLongArray(StripedWords.getOrCreate(roots, words, name, CollectionKind.LONG_ARRAY,
                descriptor(length), length, stripeLength));
    }

    /** Elements per stripe. */
    public int stripeLength() {
        return w.stripeLength;
    }

    public long get(int i) {
        return w.memory.readLong(w.ptr(i, StripedWords.GET));
    }

    public void set(int i, long newValue) {
        w.words.store(w.ptr(i, StripedWords.SET), newValue);
    }

    /** As {@link #set}. */
    public void lazySet(int i, long newValue) {
        set(i, newValue);
    }

    public long getAndSet(int i, long newValue) {
        return w.words.swap(w.ptr(i, StripedWords.SET), newValue);
    }

    public boolean compareAndSet(int i, long expectedValue, long newValue) {
        return w.memory.compareAndSwap(w.ptr(i, StripedWords.CAS), expectedValue, newValue) == expectedValue;
    }

    /** The witness value (one CAS). */
    public long compareAndExchange(int i, long expectedValue, long newValue) {
        return w.memory.compareAndSwap(w.ptr(i, StripedWords.CAS), expectedValue, newValue);
    }

    /** As {@link #compareAndSet}: never fails spuriously. */
    public boolean weakCompareAndSetVolatile(int i, long expectedValue, long newValue) {
        return compareAndSet(i, expectedValue, newValue);
    }

    /** As {@link #compareAndSet}: never fails spuriously. */
    public boolean weakCompareAndSetPlain(int i, long expectedValue, long newValue) {
        return compareAndSet(i, expectedValue, newValue);
    }

    public long getAndIncrement(int i) {
        return w.memory.fetchAndAdd(w.ptr(i, StripedWords.ADD), 1);
    }

    public long getAndDecrement(int i) {
        return w.memory.fetchAndAdd(w.ptr(i, StripedWords.ADD), -1);
    }

    public long getAndAdd(int i, long delta) {
        return w.memory.fetchAndAdd(w.ptr(i, StripedWords.ADD), delta);
    }

    public long incrementAndGet(int i) {
        return w.memory.fetchAndAdd(w.ptr(i, StripedWords.ADD), 1) + 1;
    }

    public long decrementAndGet(int i) {
        return w.memory.fetchAndAdd(w.ptr(i, StripedWords.ADD), -1) - 1;
    }

    public long addAndGet(int i, long delta) {
        return w.memory.fetchAndAdd(w.ptr(i, StripedWords.ADD), delta) + delta;
    }

    public long getAndUpdate(int i, LongUnaryOperator updateFunction) {
        long ptr = w.ptr(i, StripedWords.UPDATE);
        long prev = w.memory.readLong(ptr);
        while (true) {
            long witness = w.memory.compareAndSwap(ptr, prev, updateFunction.applyAsLong(prev));
            if (witness == prev) {
                return prev;
            }
            prev = witness;
        }
    }

    public long updateAndGet(int i, LongUnaryOperator updateFunction) {
        long ptr = w.ptr(i, StripedWords.UPDATE);
        long prev = w.memory.readLong(ptr);
        while (true) {
            long next = updateFunction.applyAsLong(prev);
            long witness = w.memory.compareAndSwap(ptr, prev, next);
            if (witness == prev) {
                return next;
            }
            prev = witness;
        }
    }

    public long getAndAccumulate(int i, long x, LongBinaryOperator accumulatorFunction) {
        return getAndUpdate(i, v -> accumulatorFunction.applyAsLong(v, x));
    }

    public long accumulateAndGet(int i, long x, LongBinaryOperator accumulatorFunction) {
        return updateAndGet(i, v -> accumulatorFunction.applyAsLong(v, x));
    }

    /** Elements {@code [from, to)}: one read per stripe, all in flight at once. */
    public long[] get(int from, int to) {
        return w.readRange(from, to);
    }

    /** Writes {@code values} at {@code [from, from + values.length)}: one write per stripe, in flight at once. */
    public void put(int from, long[] values) {
        w.writeRange(from, values);
    }

    /** Adds {@code deltas[k]} to element {@code from + k}: one fetch-and-add per non-zero delta, in flight at once. */
    public void addAll(int from, long[] deltas) {
        w.addRange(from, deltas);
    }

    /** {@link #addAll(int, long[])} from element 0. */
    public void addAll(long[] deltas) {
        w.addRange(0, deltas);
    }

    /** Every element (one bulk read). */
    public long[] toArray() {
        return w.readRange(0, w.length);
    }

    /** The elements as {@code AtomicLongArray.toString} shows them (one bulk read). */
    @Override
    public String toString() {
        return Arrays.toString(toArray());
    }
}
