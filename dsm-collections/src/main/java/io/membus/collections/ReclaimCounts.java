package io.membus.collections;

import io.membus.core.metrics.CounterSet;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts of the maps' reclaimers ({@link Reclaimer}) across every map of this JVM: blocks
 * retired and freed, how many frees needed their header read first, how many free calls
 * (each a batch of header reads and a batch of generation CASes per node) freed them, and
 * how often a change met the bound on what waits. The evidence of what reclamation costs in
 * round trips, independent of the machine's load (docs/collections.md, "Counted: the
 * allocator's refills and the reclaimer"); nothing in the maps reads them. One
 * {@link LongAdder} increment per step (a handle of {@link #COUNTS}), so counting is left on.
 *
 * <p><b>Note:</b> thread-safe, with {@link CounterSet}'s ordering: increments from any thread,
 * never lost, not ordered with each other; {@link #snapshot()} is not atomic across counts,
 * so read it while the maps are quiet.
 */
public final class ReclaimCounts {
    private static final CounterSet.Builder DECLARE = CounterSet.builder("reclaimer");

    /** Entry blocks retired (replaced or removed entries, and entries released by a table passing). */
    static final LongAdder retired = DECLARE.add("retired");
    /** Entry blocks freed (their generation CAS landed). */
    static final LongAdder freed = DECLARE.add("freed");
    /** Frees that read the block's header first (it was not carried with the retired pointer). */
    static final LongAdder headerReads = DECLARE.add("headerReads");
    /** Carried headers the block no longer had (its CAS failed, nothing freed): freed through a read after. */
    static final LongAdder staleCarried = DECLARE.add("staleCarried");
    /** Free calls ({@code GlobalAllocator.freeAll}): each one batch of CASes per node (and one of reads, if any). */
    static final LongAdder freeCalls = DECLARE.add("freeCalls");
    /** Blocks freed on a changing thread because its map was at the bound. */
    static final LongAdder helped = DECLARE.add("helped");
    /** Times a change found its map at the bound. */
    static final LongAdder boundHits = DECLARE.add("boundHits");
    /** Times a change at the bound found nothing due and waited. */
    static final LongAdder boundWaits = DECLARE.add("boundWaits");

    /** The counts above, in their order. */
    public static final CounterSet COUNTS = DECLARE.build();

    private ReclaimCounts() {
    }

    /** Every count now, in the order of {@link #COUNTS}: a mark for {@link #since}. */
    public static long[] snapshot() {
        return COUNTS.snapshot();
    }

    /** {@code name=count} of each count's change since {@code before} (a {@link #snapshot()}). */
    public static String since(long[] before) {
        return COUNTS.since(before).toString();
    }
}
