package io.membus.collections;

import io.membus.coherence.OperationMeter;
import io.membus.coherence.RemoteRef;

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
 * <p>Of each kind's operations, those that failed with an exception are counted again as
 * {@link #errors(String)} (a subset of the count): a typed error of the structure (gone,
 * closed, a bad index, an unheld lock released), of its verbs (a timeout, a node lost),
 * or of the codec. An operation refused before it started (a value too large to encode,
 * a null key) is counted by neither.
 *
 * <p>It is also the {@link OperationMeter} of a coherent object opened by name through
 * the facade ({@link #forRef}).
 *
 * <p><b>Note:</b> thread-safe: striped {@link LongAdder}s (a leased hit counts into the
 * map's own single-writer counter instead); a read while operations run is a value each
 * counter passed through, not a snapshot of all of them together. Counts are of this
 * handle, on this node, since it was opened.
 */
public final class OperationStats implements OperationMeter {
    private final String structure;
    private final List<String> operations;
    private final LongAdder[] counts;
    private final LongAdder[] timed;
    private final LongAdder[] nanos;
    private final LongAdder[] errors;
    /** Gets of a coherent object served from this node's cached copy ({@link #cacheHit()}). */
    private final LongAdder cacheHits = new LongAdder();
    private final LongSupplier[] also;
    private final boolean[] timedKinds;

    OperationStats(String structure, String... operations) {
        this.structure = structure;
        this.operations = List.of(operations);
        int n = operations.length;
        this.counts = new LongAdder[n];
        this.timed = new LongAdder[n];
        this.nanos = new LongAdder[n];
        this.errors = new LongAdder[n];
        this.also = new LongSupplier[n];
        this.timedKinds = new boolean[n];
        for (int i = 0; i < n; i++) {
            counts[i] = new LongAdder();
            timed[i] = new LongAdder();
            nanos[i] = new LongAdder();
            errors[i] = new LongAdder();
        }
    }

    /**
     * The counters of the coherent object named {@code name}, for
     * {@link RemoteRef#metered}: its kinds are {@link RemoteRef#OPERATIONS}, all timed (a
     * cached get is counted only).
     */
    public static OperationStats forRef(String name) {
        return new OperationStats("RemoteRef '" + name + "'", RemoteRef.OPERATIONS.toArray(String[]::new))
                .timed(RemoteRef.GET, RemoteRef.SET, RemoteRef.COMPARE_AND_SET, RemoteRef.UPDATE,
                        RemoteRef.GET_AND_SET);
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

    /** Operations of {@code operation} that failed with an exception (counted in {@link #count(String)} too). */
    public long errors(String operation) {
        return errors[index(operation)].sum();
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
    @Override
    public void count(int op) {
        counts[op].increment();
    }

    /** The operation of kind {@code op}, counted already, failed with an exception. */
    @Override
    public void failed(int op) {
        errors[op].increment();
    }

    /** One operation of kind {@code op} that failed before it was counted: counted, and as an error. */
    void countFailed(int op) {
        counts[op].increment();
        errors[op].increment();
    }

    /** {@link System#nanoTime()}: the start of a timed operation, as a {@link RemoteRef} takes it. */
    @Override
    public long begin() {
        return System.nanoTime();
    }

    /** As {@link #record}: one timed operation of kind {@code op}, begun at {@code began}. */
    @Override
    public void end(int op, long began) {
        record(op, began);
    }

    /** {@code n} operations of kind {@code op}, not timed. */
    void count(int op, long n) {
        counts[op].add(n);
    }

    /** The start of a timed operation: {@link System#nanoTime()}. */
    static long start() {
        return System.nanoTime();
    }

    /** A get of the named coherent object served from this node's cached copy (a {@link RemoteRef} calls it). */
    @Override
    public void cacheHit() {
        cacheHits.increment();
    }

    /** Gets of the named coherent object served from this node's cached copy, with no verb. */
    public long cacheHits() {
        return cacheHits.sum();
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
