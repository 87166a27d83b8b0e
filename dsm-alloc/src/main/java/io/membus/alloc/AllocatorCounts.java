package io.membus.alloc;

import io.membus.core.metrics.CounterSet;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts of the small-block allocator's steps, across every {@link GlobalAllocator} of this
 * JVM: how often an allocation found its size class's cache empty and refilled it (remote
 * verbs on the caller's path), how often a caller waited for another thread's refill, and
 * where frees went. They are the evidence of what a workload costs in allocator round
 * trips, independent of the machine's load (the put-tail analysis of issue 28 in
 * docs/collections.md divides them by the puts); nothing in the allocator reads them.
 * Each count is one {@link LongAdder} increment per step (a handle of {@link #COUNTS}), so
 * counting is left on.
 *
 * <p><b>Note:</b> thread-safe, with {@link CounterSet}'s ordering: increments from any thread,
 * never lost, not ordered with each other; {@link #snapshot()} is not atomic across counts,
 * so read it while the allocator is quiet.
 */
public final class AllocatorCounts {
    private static final CounterSet.Builder DECLARE = CounterSet.builder("allocator");

    /** Small blocks handed out (one per {@code allocate} of a small size that returned a block). */
    static final LongAdder allocations = DECLARE.add("allocations");
    /** Refills of a size class's cache (each a chain of remote verbs). */
    static final LongAdder refills = DECLARE.add("refills");
    /** Refills that ran on a thread that asked for a block (its caller waited for the whole refill). */
    static final LongAdder callerRefills = DECLARE.add("callerRefills");
    /** Refills ahead of need handed to the allocator's threads (each at most one carve: {@link #carves}). */
    static final LongAdder aheadRefills = DECLARE.add("aheadRefills");
    /**
     * Refills ahead whose verbs found every blocking lane busy and went the pipelined path
     * (counted only when {@code io.membus.core.metrics.OpEvents} records: {@code -Dmembus.op-events=true}).
     */
    static final LongAdder aheadFallbacks = DECLARE.add("aheadFallbacks");
    /** Refills ahead not yet started that a caller finding the cache empty ran itself (counted in {@link #callerRefills}). */
    static final LongAdder aheadTakenOver = DECLARE.add("aheadTakenOver");
    /** Allocations that found the cache empty while another thread refilled it, and waited. */
    static final LongAdder waits = DECLARE.add("waits");
    /** Batches carved from a chunk's bump word (a fetch-and-add and a write of the headers). */
    static final LongAdder carves = DECLARE.add("carves");
    /** Free lists taken whole (a CAS, then one read per block on the list). */
    static final LongAdder pops = DECLARE.add("pops");
    /** Blocks read one by one while walking a free list taken whole. */
    static final LongAdder poppedBlocks = DECLARE.add("poppedBlocks");
    /** Scans of the chunk table for a chunk to claim. */
    static final LongAdder scans = DECLARE.add("scans");
    /** Small frees (the generation CAS landed). */
    static final LongAdder frees = DECLARE.add("frees");
    /** Frees taken into their owner's cache (no verb past the generation CAS). */
    static final LongAdder cachedFrees = DECLARE.add("cachedFrees");
    /** Frees pushed on their chunk's free list (a read, a write, a CAS and a fetch-and-add). */
    static final LongAdder pushes = DECLARE.add("pushes");

    /** The counts above, in their order. */
    public static final CounterSet COUNTS = DECLARE.build();

    private AllocatorCounts() {
    }

    /** The counts now, in the order of {@link #COUNTS}: a mark for {@link #since}. */
    public static long[] snapshot() {
        return COUNTS.snapshot();
    }

    /** {@code name=count} of each count's change since {@code before} (a {@link #snapshot()}). */
    public static String since(long[] before) {
        return COUNTS.since(before).toString();
    }
}
