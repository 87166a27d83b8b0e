package io.membus.collections;

import io.membus.core.metrics.CounterSet;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts of the {@link DsmQueue} claim protocol's steps, across every queue handle of this
 * JVM: claim CASes and the ones lost to another thread or node, reads of the head and tail
 * words, passes that found the slot held by a live node (and the pauses spent waiting for
 * it). Divided by the offers and polls that succeeded they say what an operation costs in
 * round trips under contention, independent of the machine's load (issue 28's 8-thread
 * offer + poll analysis in docs/collections.md). Nothing in the queue reads them. Each count
 * is one {@link LongAdder} increment per step (a handle of {@link #COUNTS}), so counting is
 * left on.
 *
 * <p><b>Note:</b> thread-safe, with {@link CounterSet}'s ordering: increments from any thread,
 * never lost, not ordered with each other; {@link #snapshot()} is not atomic across counts,
 * so read it while the queues are quiet.
 */
public final class QueueCounts {
    private static final CounterSet.Builder DECLARE = CounterSet.builder("queue");

    /** Offers that enqueued their element. */
    static final LongAdder offered = DECLARE.add("offered");
    /** Claim CASes of offers ({@code EMPTY(t) -> WRITING(t, me)}), each one round trip. */
    static final LongAdder offerClaims = DECLARE.add("offerClaims");
    /** Offer claims that found the ticket claimed already (by another thread or node) and moved on. */
    static final LongAdder offerLost = DECLARE.add("offerLost");
    /** Offer passes that found the slot still being emptied by a live consumer (BUSY). */
    static final LongAdder offerBusy = DECLARE.add("offerBusy");
    /** Reads of the tail word (a hint a lap behind, or ahead of the ring). */
    static final LongAdder tailReads = DECLARE.add("tailReads");
    /** Polls that took an element. */
    static final LongAdder polled = DECLARE.add("polled");
    /** Claim CASes of polls ({@code FULL(t) -> READING(t, me)}, with the data read), each one round trip. */
    static final LongAdder pollClaims = DECLARE.add("pollClaims");
    /** Poll claims that found the ticket taken already (by another thread or node) and moved on. */
    static final LongAdder pollLost = DECLARE.add("pollLost");
    /** Poll passes that found the head being written by a live producer (or moved by a remover). */
    static final LongAdder pollWriting = DECLARE.add("pollWriting");
    /** Poll passes that found no element (the head not offered yet). */
    static final LongAdder pollEmpty = DECLARE.add("pollEmpty");
    /** Reads of the head word (a hint a lap behind). */
    static final LongAdder headReads = DECLARE.add("headReads");
    /** Pauses of non-blocking calls waiting for a slot a live node holds ({@link QueueHeldSlotWait}). */
    static final LongAdder heldPauses = DECLARE.add("heldPauses");
    /** Offer claims not sent: another thread of the handle was claiming the ticket and found it claimed. */
    static final LongAdder offerShared = DECLARE.add("offerShared");
    /** Poll claims not sent: another thread of the handle was claiming the ticket and found it claimed. */
    static final LongAdder pollShared = DECLARE.add("pollShared");

    /** The counts above, in their order. */
    public static final CounterSet COUNTS = DECLARE.build();

    private QueueCounts() {
    }

    /** The counts now, in the order of {@link #COUNTS}: a mark for {@link #since}. */
    public static long[] snapshot() {
        return COUNTS.snapshot();
    }

    /**
     * {@code name=count} of each count's change since {@code before} (a {@link #snapshot()}),
     * then the claims per offer and per poll that succeeded.
     */
    public static String since(long[] before) {
        CounterSet.Deltas d = COUNTS.since(before);
        StringBuilder s = new StringBuilder(d.toString());
        double offers = d.get("offered");
        double polls = d.get("polled");
        if (offers > 0 && polls > 0) {
            s.append(String.format(" (per offer: %.2f claim CASes, %.2f lost, %.2f shared; per poll: %.2f claim CASes,"
                            + " %.2f lost, %.2f shared, %.2f held-slot passes, %.2f pauses)", d.get("offerClaims") / offers,
                    d.get("offerLost") / offers, d.get("offerShared") / offers, d.get("pollClaims") / polls,
                    d.get("pollLost") / polls, d.get("pollShared") / polls, d.get("pollWriting") / polls,
                    d.get("heldPauses") / polls));
        }
        return s.toString();
    }
}
