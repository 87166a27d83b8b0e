package io.membus.collections;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.DoubleBinaryOperator;
import java.util.function.DoubleUnaryOperator;

import static java.lang.Double.doubleToRawLongBits;
import static java.lang.Double.longBitsToDouble;

/**
 * A fixed-length array of {@code double}s shared by every node, laid out as
 * {@link DsmLongArray} (each element the raw IEEE 754 bits of its value in one
 * word; see {@link StripedWords}). {@code get}/{@code set} are one verb;
 * {@code compareAndSet} is one CAS on the bits, so it compares bit patterns as
 * Guava's {@code AtomicDoubleArray} does ({@code 0.0} and {@code -0.0} differ, a
 * {@code NaN} equals the same {@code NaN}); additions and updates are CAS loops.
 * {@link #addAll(int, double[])} reads the range (one read per stripe), then sends
 * one CAS per element, all in flight, and retries only the CASes that lost a race.
 *
 * <p><b>Note:</b> thread-safe. Element operations are linearizable; bulk
 * operations are atomic per element only (as in {@link DsmLongArray}).
 */
public final class DsmDoubleArray extends StripedArray {
    static final String KIND_NAME = "doubleArray";

    private DsmDoubleArray(StripedWords w) {
        super(w);
    }

    static String descriptor(int length) {
        return KIND_NAME + "(length=" + length + ")";
    }

    static DsmDoubleArray getOrCreate(NamedRoots roots, WordVerbs words, String name, int length, int stripeLength) {
        // zeroed words are +0.0
        return new DsmDoubleArray(StripedWords.getOrCreate(roots, words, name, CollectionKind.DOUBLE_ARRAY,
                descriptor(length), length, stripeLength));
    }

    public double get(int i) {
        return longBitsToDouble(w.memory.readLong(w.ptr(i, StripedWords.GET)));
    }

    public void set(int i, double newValue) {
        w.words.store(w.ptr(i, StripedWords.SET), doubleToRawLongBits(newValue));
    }

    public double getAndSet(int i, double newValue) {
        return longBitsToDouble(w.words.swap(w.ptr(i, StripedWords.SET), doubleToRawLongBits(newValue)));
    }

    /** One CAS on the bits: succeeds when the element's bits equal {@code expect}'s. */
    public boolean compareAndSet(int i, double expect, double update) {
        long e = doubleToRawLongBits(expect);
        return w.memory.compareAndSwap(w.ptr(i, StripedWords.CAS), e, doubleToRawLongBits(update)) == e;
    }

    /** As {@link #compareAndSet}: never fails spuriously. */
    public boolean weakCompareAndSet(int i, double expect, double update) {
        return compareAndSet(i, expect, update);
    }

    public double getAndAdd(int i, double delta) {
        return getAndUpdate(i, v -> v + delta);
    }

    public double addAndGet(int i, double delta) {
        return updateAndGet(i, v -> v + delta);
    }

    public double getAndUpdate(int i, DoubleUnaryOperator updateFunction) {
        return longBitsToDouble(update(w.ptr(i, StripedWords.UPDATE), updateFunction)[0]);
    }

    public double updateAndGet(int i, DoubleUnaryOperator updateFunction) {
        return longBitsToDouble(update(w.ptr(i, StripedWords.UPDATE), updateFunction)[1]);
    }

    public double getAndAccumulate(int i, double x, DoubleBinaryOperator accumulatorFunction) {
        return getAndUpdate(i, v -> accumulatorFunction.applyAsDouble(v, x));
    }

    public double accumulateAndGet(int i, double x, DoubleBinaryOperator accumulatorFunction) {
        return updateAndGet(i, v -> accumulatorFunction.applyAsDouble(v, x));
    }

    /** CAS loop; returns {previous bits, new bits}. */
    private long[] update(long ptr, DoubleUnaryOperator f) {
        long prev = w.memory.readLong(ptr);
        while (true) {
            long next = doubleToRawLongBits(f.applyAsDouble(longBitsToDouble(prev)));
            long witness = w.memory.compareAndSwap(ptr, prev, next);
            if (witness == prev) {
                return new long[] {prev, next};
            }
            prev = witness;
        }
    }

    /** Elements {@code [from, to)}: one read per stripe, all in flight at once. */
    public double[] get(int from, int to) {
        long[] bits = w.readRange(from, to);
        double[] out = new double[bits.length];
        for (int k = 0; k < bits.length; k++) {
            out[k] = longBitsToDouble(bits[k]);
        }
        return out;
    }

    /** Writes {@code values} at {@code [from, from + values.length)}: one write per stripe, in flight at once. */
    public void put(int from, double[] values) {
        long[] bits = new long[values.length];
        for (int k = 0; k < values.length; k++) {
            bits[k] = doubleToRawLongBits(values[k]);
        }
        w.writeRange(from, bits);
    }

    /**
     * Adds {@code deltas[k]} to element {@code from + k} (zero deltas skipped): one bulk
     * read, then one CAS per element, all in flight at once; an element whose CAS lost
     * a race is retried from the witness the CAS returned, until every addition landed.
     */
    public void addAll(int from, double[] deltas) {
        w.checkRange(from, from + deltas.length);
        w.handle.stats().count(StripedWords.ADD_RANGE);
        long[] seen = w.readRangeUncounted(from, from + deltas.length);
        List<Integer> pending = new ArrayList<>();
        for (int k = 0; k < deltas.length; k++) {
            if (deltas[k] != 0.0 || Double.isNaN(deltas[k])) {
                pending.add(k);
            }
        }
        while (!pending.isEmpty()) {
            List<CompletableFuture<Long>> cases = new ArrayList<>(pending.size());
            for (int k : pending) {
                long next = doubleToRawLongBits(longBitsToDouble(seen[k]) + deltas[k]);
                cases.add(w.memory.compareAndSwapAsync(w.ptr(from + k), seen[k], next));
            }
            StripedWords.awaitAll(w.memory, cases);
            List<Integer> lost = new ArrayList<>();
            for (int j = 0; j < pending.size(); j++) {
                int k = pending.get(j);
                long witness = cases.get(j).join();
                if (witness != seen[k]) {
                    seen[k] = witness;
                    lost.add(k);
                }
            }
            pending = lost;
        }
    }

    /** {@link #addAll(int, double[])} from element 0. */
    public void addAll(double[] deltas) {
        addAll(0, deltas);
    }

    /** Every element (one bulk read). */
    public double[] toArray() {
        return get(0, w.length);
    }

    @Override
    public String toString() {
        return Arrays.toString(toArray());
    }
}
