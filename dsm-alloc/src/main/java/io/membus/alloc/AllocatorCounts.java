package io.membus.alloc;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts of the small-block allocator's steps, across every {@link GlobalAllocator} of this
 * JVM: how often an allocation found its size class's cache empty and refilled it (remote
 * verbs on the caller's path), how often a caller waited for another thread's refill, and
 * where frees went. They are the evidence of what a workload costs in allocator round
 * trips, independent of the machine's load (the put-tail analysis of issue 28 in
 * docs/collections.md divides them by the puts); nothing in the allocator reads them.
 * Each count is one {@link LongAdder} increment per step, so counting is left on.
 *
 * <p><b>Note:</b> thread-safe (LongAdders: increments from any thread, never lost;
 * {@link #snapshot()} is not atomic across counts, so read it while the allocator is quiet).
 */
public final class AllocatorCounts {
    /** Small blocks handed out (one per {@code allocate} of a small size that returned a block). */
    static final LongAdder allocations = new LongAdder();
    /** Refills of a size class's cache (each a chain of remote verbs). */
    static final LongAdder refills = new LongAdder();
    /** Refills that ran on a thread that asked for a block (its caller waited for the whole refill). */
    static final LongAdder callerRefills = new LongAdder();
    /** Refills ahead of need handed to the allocator's threads (each at most one carve: {@link #carves}). */
    static final LongAdder aheadRefills = new LongAdder();
    /**
     * Refills ahead whose verbs found every blocking lane busy and went the pipelined path
     * (counted only when {@code io.membus.core.metrics.OpEvents} records: {@code -Dmembus.op-events=true}).
     */
    static final LongAdder aheadFallbacks = new LongAdder();
    /** Refills ahead not yet started that a caller finding the cache empty ran itself (counted in {@link #callerRefills}). */
    static final LongAdder aheadTakenOver = new LongAdder();
    /** Allocations that found the cache empty while another thread refilled it, and waited. */
    static final LongAdder waits = new LongAdder();
    /** Batches carved from a chunk's bump word (a fetch-and-add and a write of the headers). */
    static final LongAdder carves = new LongAdder();
    /** Free lists taken whole (a CAS, then one read per block on the list). */
    static final LongAdder pops = new LongAdder();
    /** Blocks read one by one while walking a free list taken whole. */
    static final LongAdder poppedBlocks = new LongAdder();
    /** Scans of the chunk table for a chunk to claim. */
    static final LongAdder scans = new LongAdder();
    /** Small frees (the generation CAS landed). */
    static final LongAdder frees = new LongAdder();
    /** Frees taken into their owner's cache (no verb past the generation CAS). */
    static final LongAdder cachedFrees = new LongAdder();
    /** Frees pushed on their chunk's free list (a read, a write, a CAS and a fetch-and-add). */
    static final LongAdder pushes = new LongAdder();

    /** Names of {@link #snapshot()}'s counts, in its order. */
    public static final String[] NAMES = {"allocations", "refills", "callerRefills", "aheadRefills", "aheadFallbacks", "aheadTakenOver", "waits", "carves", "pops",
            "poppedBlocks", "scans", "frees", "cachedFrees", "pushes"};

    private AllocatorCounts() {
    }

    /** The counts now, in the order of {@link #NAMES}. */
    public static long[] snapshot() {
        return new long[] {allocations.sum(), refills.sum(), callerRefills.sum(), aheadRefills.sum(), aheadFallbacks.sum(), aheadTakenOver.sum(), waits.sum(), carves.sum(),
                pops.sum(), poppedBlocks.sum(), scans.sum(), frees.sum(), cachedFrees.sum(), pushes.sum()};
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
