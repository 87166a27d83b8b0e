package io.membus.core.replication;

import io.membus.core.metrics.CounterSet;
import io.membus.core.transport.TransportThreads;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts of the replication change path's steps, across every {@link Replicator} of this
 * JVM: how many stream messages the changes cost and on which path they left, how many
 * records each carried, how often an answer waited for its copies and how many wake-ups
 * released it, and on which thread the copy handled a stream message. They are the
 * evidence of what a replicated change costs in messages and wake-ups, independent of the
 * machine's load (docs/replication.md §3.5.2 divides them by the changes); nothing in the
 * engine reads them. Each count is one {@link LongAdder} increment per step (a handle of
 * {@link #COUNTS}), so counting is left on.
 *
 * <p><b>Note:</b> thread-safe, with {@link CounterSet}'s ordering: increments from any thread,
 * never lost, not ordered with each other; {@link #snapshot()} is not atomic across counts,
 * so read it while the cluster is quiet.
 */
public final class ReplicationCounts {
    private static final CounterSet.Builder DECLARE = CounterSet.builder("replication");

    /** Changes sequenced by a group that has copies (one per change, not per record part). */
    static final LongAdder changes = DECLARE.add("changes");
    /** Changes whose group lock was held by another thread when they asked for it. */
    static final LongAdder lockContended = DECLARE.add("lockContended");
    /** Stream messages exchanged on a blocking lane by the thread whose change appended them. */
    static final LongAdder laneMessages = DECLARE.add("laneMessages");
    /** Stream messages posted (sent through the connection's I/O thread, the reply on an I/O thread). */
    static final LongAdder postedMessages = DECLARE.add("postedMessages");
    /** Records carried by the stream messages of both paths. */
    static final LongAdder records = DECLARE.add("records");
    /** Flushes that found another thread sending the stream and left their records to it. */
    static final LongAdder flushJoined = DECLARE.add("flushJoined");
    /** Blocking-verb threads that waited for a lane exchange to end and then sent the next message themselves. */
    static final LongAdder nextSenders = DECLARE.add("nextSenders");
    /** Acknowledgements (stream replies) the primaries read. */
    static final LongAdder acks = DECLARE.add("acks");
    /** Answers that found their need not acknowledged and waited ({@link AckGate#whenAcked} or {@link AckGate#await} queued). */
    static final LongAdder gateWaits = DECLARE.add("gateWaits");
    /** Waiters released by a watermark that passed them (an unpark or a callback each). */
    static final LongAdder wakeups = DECLARE.add("wakeups");
    /** Stream messages a copy handled on its event loop (inline). */
    static final LongAdder copyInline = DECLARE.add("copyInline");
    /** Stream messages a copy handled on a blocking lane's thread. */
    static final LongAdder copyLane = DECLARE.add("copyLane");
    /** Stream messages a copy handled on its message executor. */
    static final LongAdder copyExecutor = DECLARE.add("copyExecutor");

    /** The counts above, in their order. */
    public static final CounterSet COUNTS = DECLARE.build();

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

    /** The counts now, in the order of {@link #COUNTS}: a mark for {@link #since}. */
    public static long[] snapshot() {
        return COUNTS.snapshot();
    }

    /** {@code name=count} of each count's change since {@code before} (a {@link #snapshot()}), and per change. */
    public static String since(long[] before) {
        return COUNTS.since(before).toString("changes", "change");
    }
}
