package io.membus.collections;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts of the maps' reclaimers ({@link Reclaimer}) across every map of this JVM: blocks
 * retired and freed, how many frees needed their header read first, how many free calls
 * (each a batch of header reads and a batch of generation CASes per node) freed them, and
 * how often a change met the bound on what waits. The evidence of what reclamation costs in
 * round trips, independent of the machine's load (docs/collections.md, "Counted: the
 * allocator's refills and the reclaimer"); nothing in the maps reads them. One
 * {@link LongAdder} increment per step, so counting is left on.
 *
 * <p><b>Note:</b> thread-safe (LongAdders: increments from any thread, never lost;
 * {@link #snapshot()} is not atomic across counts, so read it while the maps are quiet).
 */
public final class ReclaimCounts {
    /** Entry blocks retired (replaced or removed entries, and entries released by a table passing). */
    static final LongAdder retired = new LongAdder();
    /** Entry blocks freed (their generation CAS landed). */
    static final LongAdder freed = new LongAdder();
    /** Frees that read the block's header first (it was not carried with the retired pointer). */
    static final LongAdder headerReads = new LongAdder();
    /** Carried headers the block no longer had (its CAS failed, nothing freed): freed through a read after. */
    static final LongAdder staleCarried = new LongAdder();
    /** Free calls ({@code GlobalAllocator.freeAll}): each one batch of CASes per node (and one of reads, if any). */
    static final LongAdder freeCalls = new LongAdder();
    /** Blocks freed on a changing thread because its map was at the bound. */
    static final LongAdder helped = new LongAdder();
    /** Times a change found its map at the bound. */
    static final LongAdder boundHits = new LongAdder();
    /** Times a change at the bound found nothing due and waited. */
    static final LongAdder boundWaits = new LongAdder();

    /** Names of {@link #snapshot()}'s counts, in its order. */
    public static final String[] NAMES = {"retired", "freed", "headerReads", "staleCarried", "freeCalls", "helped",
            "boundHits", "boundWaits"};

    private ReclaimCounts() {
    }

    /** The counts now, in the order of {@link #NAMES}. */
    public static long[] snapshot() {
        return new long[] {retired.sum(), freed.sum(), headerReads.sum(), staleCarried.sum(), freeCalls.sum(),
                helped.sum(), boundHits.sum(), boundWaits.sum()};
    }

    /** {@code name=count} of each count's change since {@code before} (a {@link #snapshot()}). */
    public static String since(long[] before) {
        long[] now = snapshot();
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < NAMES.length; i++) {
            s.append(i == 0 ? "" : ", ").append(NAMES[i]).append('=').append(now[i] - before[i]);
        }
        return s.toString();
    }
}
