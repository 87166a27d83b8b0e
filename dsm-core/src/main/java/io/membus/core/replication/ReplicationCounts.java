package io.membus.core.replication;

import io.membus.core.transport.TransportThreads;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts of the replication change path's steps, across every {@link Replicator} of this
 * JVM: how many stream messages the changes cost and on which path they left, how many
 * records each carried, how often an answer waited for its copies and how many wake-ups
 * released it, and on which thread the copy handled a stream message. They are the
 * evidence of what a replicated change costs in messages and wake-ups, independent of the
 * machine's load (docs/replication.md §3.5.2 divides them by the changes); nothing in the
 * engine reads them. Each count is one {@link LongAdder} increment per step, so counting
 * is left on.
 *
 * <p><b>Note:</b> thread-safe (LongAdders: increments from any thread, never lost;
 * {@link #snapshot()} is not atomic across counts, so read it while the cluster is quiet).
 */
public final class ReplicationCounts {
    /** Changes sequenced by a group that has copies (one per change, not per record part). */
    static final LongAdder changes = new LongAdder();
    /** Changes whose group lock was held by another thread when they asked for it. */
    static final LongAdder lockContended = new LongAdder();
    /** Stream messages exchanged on a blocking lane by the thread whose change appended them. */
    static final LongAdder laneMessages = new LongAdder();
    /** Stream messages posted (sent through the connection's I/O thread, the reply on an I/O thread). */
    static final LongAdder postedMessages = new LongAdder();
    /** Records carried by the stream messages of both paths. */
    static final LongAdder records = new LongAdder();
    /** Flushes that found another thread sending the stream and left their records to it. */
    static final LongAdder flushJoined = new LongAdder();
    /** Blocking-verb threads that waited for a lane exchange to end and then sent the next message themselves. */
    static final LongAdder nextSenders = new LongAdder();
    /** Acknowledgements (stream replies) the primaries read. */
    static final LongAdder acks = new LongAdder();
    /** Answers that found their need not acknowledged and waited ({@link AckGate#whenAcked} or {@link AckGate#await} queued). */
    static final LongAdder gateWaits = new LongAdder();
    /** Waiters released by a watermark that passed them (an unpark or a callback each). */
    static final LongAdder wakeups = new LongAdder();
    /** Stream messages a copy handled on its event loop (inline). */
    static final LongAdder copyInline = new LongAdder();
    /** Stream messages a copy handled on a blocking lane's thread. */
    static final LongAdder copyLane = new LongAdder();
    /** Stream messages a copy handled on its message executor. */
    static final LongAdder copyExecutor = new LongAdder();

    /** Names of {@link #snapshot()}'s counts, in its order. */
    public static final String[] NAMES = {"changes", "lockContended", "laneMessages", "postedMessages", "records",
            "flushJoined", "nextSenders", "acks", "gateWaits", "wakeups", "copyInline", "copyLane", "copyExecutor"};

    private ReplicationCounts() {
    }

    /** Counts a stream message a copy handles, by the kind of thread handling it. */
    static void copyHandled() {
        if (TransportThreads.servesBlockingVerbs()) {
            copyLane.increment();
        } else if (TransportThreads.isTransportThread()) {
            copyInline.increment();
        } else {
            copyExecutor.increment();
        }
    }

    /** The counts now, in the order of {@link #NAMES}. */
    public static long[] snapshot() {
        return new long[] {changes.sum(), lockContended.sum(), laneMessages.sum(), postedMessages.sum(), records.sum(),
                flushJoined.sum(), nextSenders.sum(), acks.sum(), gateWaits.sum(), wakeups.sum(), copyInline.sum(), copyLane.sum(),
                copyExecutor.sum()};
    }

    /** {@code name=count} of each count's change since {@code before} (a {@link #snapshot()}), and per change. */
    public static String since(long[] before) {
        long[] now = snapshot();
        long changed = Math.max(1, now[0] - before[0]);
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < NAMES.length; i++) {
            long d = now[i] - before[i];
            s.append(i == 0 ? "" : ", ").append(NAMES[i]).append('=').append(d);
            if (i > 0) {
                s.append(String.format(" (%.2f/change)", (double) d / changed));
            }
        }
        return s.toString();
    }
}
