package io.membus.collections;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts of the {@link DsmQueue} claim protocol's steps, across every queue handle of this
 * JVM: claim CASes and the ones lost to another thread or node, reads of the head and tail
 * words, passes that found the slot held by a live node (and the pauses spent waiting for
 * it). Divided by the offers and polls that succeeded they say what an operation costs in
 * round trips under contention, independent of the machine's load (issue 28's 8-thread
 * offer + poll analysis in docs/collections.md). Nothing in the queue reads them. Each count
 * is one {@link LongAdder} increment per step, so counting is left on.
 *
 * <p><b>Note:</b> thread-safe (LongAdders: increments from any thread, never lost;
 * {@link #snapshot()} is not atomic across counts, so read it while the queues are quiet).
 */
public final class QueueCounts {
    /** Offers that enqueued their element. */
    static final LongAdder offered = new LongAdder();
    /** Claim CASes of offers ({@code EMPTY(t) -> WRITING(t, me)}), each one round trip. */
    static final LongAdder offerClaims = new LongAdder();
    /** Offer claims that found the ticket claimed already (by another thread or node) and moved on. */
    static final LongAdder offerLost = new LongAdder();
    /** Offer claims not sent: another thread of the handle was claiming the ticket and found it claimed. */
    static final LongAdder offerShared = new LongAdder();
    /** Offer passes that found the slot still being emptied by a live consumer (BUSY). */
    static final LongAdder offerBusy = new LongAdder();
    /** Reads of the tail word (a hint a lap behind, or ahead of the ring). */
    static final LongAdder tailReads = new LongAdder();
    /** Polls that took an element. */
    static final LongAdder polled = new LongAdder();
    /** Claim CASes of polls ({@code FULL(t) -> READING(t, me)}, with the data read), each one round trip. */
    static final LongAdder pollClaims = new LongAdder();
    /** Poll claims that found the ticket taken already (by another thread or node) and moved on. */
    static final LongAdder pollLost = new LongAdder();
    /** Poll claims not sent: another thread of the handle was claiming the ticket and found it claimed. */
    static final LongAdder pollShared = new LongAdder();
    /** Poll passes that found the head being written by a live producer (or moved by a remover). */
    static final LongAdder pollWriting = new LongAdder();
    /** Poll passes that found no element (the head not offered yet). */
    static final LongAdder pollEmpty = new LongAdder();
    /** Reads of the head word (a hint a lap behind). */
    static final LongAdder headReads = new LongAdder();
    /** Pauses of non-blocking calls waiting for a slot a live node holds ({@link QueueHeldSlotWait}). */
    static final LongAdder heldPauses = new LongAdder();

    /** Names of {@link #snapshot()}'s counts, in its order. */
    public static final String[] NAMES = {"offered", "offerClaims", "offerLost", "offerBusy", "tailReads", "polled",
            "pollClaims", "pollLost", "pollWriting", "pollEmpty", "headReads", "heldPauses", "offerShared",
            "pollShared"};

    private QueueCounts() {
    }

    private static final LongAdder[] COUNTS = {offered, offerClaims, offerLost, offerBusy, tailReads, polled,
            pollClaims, pollLost, pollWriting, pollEmpty, headReads, heldPauses, offerShared, pollShared};

    /** The counts now, in the order of {@link #NAMES}. */
    public static long[] snapshot() {
        long[] now = new long[COUNTS.length];
        for (int i = 0; i < now.length; i++) {
            now[i] = COUNTS[i].sum();
        }
        return now;
    }

    /**
     * {@code name=count} of each count's change since {@code before} (a {@link #snapshot()}),
     * then the claims per offer and per poll that succeeded.
     */
    public static String since(long[] before) {
        long[] now = snapshot();
        long[] d = new long[now.length];
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < NAMES.length; i++) {
            d[i] = now[i] - before[i];
            s.append(i == 0 ? "" : ", ").append(NAMES[i]).append('=').append(d[i]);
        }
        if (d[0] > 0 && d[5] > 0) {
            s.append(String.format(" (per offer: %.2f claim CASes, %.2f lost, %.2f shared; per poll: %.2f claim CASes,"
                            + " %.2f lost, %.2f shared, %.2f held-slot passes, %.2f pauses)", (double) d[1] / d[0],
                    (double) d[2] / d[0], (double) d[12] / d[0], (double) d[6] / d[5], (double) d[7] / d[5],
                    (double) d[13] / d[5], (double) d[8] / d[5], (double) d[11] / d[5]));
        }
        return s.toString();
    }
}
