package io.membus.collections;

import java.util.List;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * Counts and times of one structure handle's operations, by kind ({@code get},
 * {@code put}, {@code offer}, {@code acquire}, ...): what the facade's meters read
 * ({@code membus.collection.operations}, {@code membus.collection.operation.time};
 * docs/metrics.md).
 *
 * <p>Each kind has a count of every operation and, for the timed ones, a count and the
 * sum of their nanoseconds. What is timed is what takes round trips or waits (map
 * misses and changes, queue offers, polls and waits, lock acquisitions); the one-verb
 * operations of {@link DsmAtomicLong} and the arrays, and a map get served by its leased
 * cache, are only counted: two clock reads would double a local verb's cost (tens of
 * nanoseconds). A kind's count therefore may exceed its timed count.
 *
 * <p><b>Note:</b> thread-safe: striped {@link LongAdder}s (a leased hit counts into the
 * map's own single-writer counter instead); a read while operations run is a value each
 * counter passed through, not a snapshot of all of them together. Counts are of this
 * handle, on this node, since it was opened.
 */
public final class OperationStats {
    private final String structure;
    private final List<String> operations;
    private final LongAdder[] counts;
    private final LongAdder[] timed;
    private final LongAdder[] nanos;
    private final LongSupplier[] also;
    private final boolean[] timedKinds;

    OperationStats(String structure, String... operations) {
        this.structure = structure;
        this.operations = List.of(operations);
        int n = operations.length;
        this.counts = new LongAdder[n];
        this.timed = new LongAdder[n];
        this.nanos = new LongAdder[n];
        this.also = new LongSupplier[n];
        this.timedKinds = new boolean[n];
        for (int i = 0; i < n; i++) {
            counts[i] = new LongAdder();
            timed[i] = new LongAdder();
            nanos[i] = new LongAdder();
        }
    }

    /** The structure, as errors name it: e.g. {@code DsmMap 'orders'}. */
    public String structure() {
        return structure;
    }

    /** The kinds of operation counted, in a fixed order. */
    public List<String> operations() {
        return operations;
    }

    /** Operations of {@code operation} so far. */
    public long count(String operation) {
        int i = index(operation);
        LongSupplier a = also[i];
        return counts[i].sum() + (a == null ? 0 : a.getAsLong());
    }

    /** Operations of {@code operation} that were timed (see the class comment). */
    public long timedCount(String operation) {
        return timed[index(operation)].sum();
    }

    /** Nanoseconds the timed operations of {@code operation} took, together. */
    public long totalNanos(String operation) {
        return nanos[index(operation)].sum();
    }

    /** Whether {@code operation} is ever timed (false: counted only). */
    public boolean isTimed(String operation) {
        return timedKinds[index(operation)];
    }

    private int index(String operation) {
        int i = operations.indexOf(operation);
        if (i < 0) {
            throw new CollectionArgumentException("operation", operation, "one of " + operations + " of " + structure);
        }
        return i;
    }

    /** Marks operation {@code op} as timed (its latency is metered). */
    OperationStats timed(int... ops) {
        for (int op : ops) {
            timedKinds[op] = true;
        }
        return this;
    }

    /** Operation {@code op} also counts what {@code counter} counts (a hit path's own counter). */
    void alsoCount(int op, LongSupplier counter) {
        also[op] = counter;
    }

    /** One operation of kind {@code op}, not timed. */
    void count(int op) {
        counts[op].increment();
    }

    /** {@code n} operations of kind {@code op}, not timed. */
    void count(int op, long n) {
        counts[op].add(n);
    }

    /** The start of a timed operation: {@link System#nanoTime()}. */
    static long start() {
        return System.nanoTime();
    }

    /** One timed operation of kind {@code op} that began at {@code startNanos} ({@link #start()}) and ended now. */
    void record(int op, long startNanos) {
        long took = System.nanoTime() - startNanos;
        counts[op].increment();
        timed[op].increment();
        nanos[op].add(took);
    }

    /**
     * The time of an operation of kind {@code op} that began at {@code startNanos};
     * counts it too unless {@code countedAlready} (its hit path counted it).
     */
    void time(int op, long startNanos, boolean countedAlready) {
        long took = System.nanoTime() - startNanos;
        if (!countedAlready) {
            counts[op].increment();
        }
        timed[op].increment();
        nanos[op].add(took);
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder(structure).append(' ');
        for (int i = 0; i < counts.length; i++) {
            b.append(i == 0 ? "" : ", ").append(operations.get(i)).append('=').append(count(operations.get(i)));
        }
        return b.toString();
    }
}
