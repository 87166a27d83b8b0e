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
public enum ReclaimCounts {
    /** Entry blocks retired (replaced or removed entries, and entries released by a table passing). */
    RETIRED("retired"),
    /** Entry blocks freed (their generation CAS landed). */
    FREED("freed"),
    /** Frees that read the block's header first (it was not carried with the retired pointer). */
    HEADER_READS("headerReads"),
    /** Carried headers the block no longer had (its CAS failed, nothing freed): freed through a read after. */
    STALE_CARRIED("staleCarried"),
    /** Free calls ({@code GlobalAllocator.freeAll}): each one batch of CASes per node (and one of reads, if any). */
    FREE_CALLS("freeCalls"),
    /** Blocks freed on a changing thread because its map was at the bound. */
    HELPED("helped"),
    /** Times a change found its map at the bound. */
    BOUND_HITS("boundHits"),
    /** Times a change at the bound found nothing due and waited. */
    BOUND_WAITS("boundWaits");

    /** The count's name in {@link #since}. */
    private final String label;
    private final LongAdder count = new LongAdder();

    ReclaimCounts(String label) {
        this.label = label;
    }

    void increment() {
        count.increment();
    }

    void add(long n) {
        count.add(n);
    }

    /** Every count now, in declaration order. */
    public static long[] snapshot() {
        ReclaimCounts[] all = values();
        long[] now = new long[all.length];
        for (int i = 0; i < all.length; i++) {
            now[i] = all[i].count.sum();
        }
        return now;
    }

    /** {@code name=count} of each count's change since {@code before} (a {@link #snapshot()}). */
    public static String since(long[] before) {
        long[] now = snapshot();
        StringBuilder s = new StringBuilder();
        for (ReclaimCounts c : values()) {
            s.append(c.ordinal() == 0 ? "" : ", ").append(c.label).append('=')
                    .append(now[c.ordinal()] - before[c.ordinal()]);
        }
        return s.toString();
    }
}
