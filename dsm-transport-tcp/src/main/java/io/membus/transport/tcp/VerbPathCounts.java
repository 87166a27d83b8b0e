package io.membus.transport.tcp;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts of the pipelined verb path's hand-offs and system-call-sized steps, across every
 * tcp transport of this JVM: what a burst of verbs in flight costs in wake-ups of the
 * initiator's I/O thread, writes (flushes) and read batches on both ends. They are the
 * evidence of a change to the path that does not depend on the machine's load
 * ({@code VerbPathCountsTest} prints them per 16 reads in flight); nothing in the transport
 * reads them. Each count is one {@link LongAdder} increment per step (per burst, not per
 * verb, except {@link #targetVerbs}), so counting is left on.
 *
 * <p><b>Note:</b> thread-safe (LongAdders: increments from any thread, never lost;
 * {@link #snapshot()} is not atomic across counts, so read it while the path is quiet).
 */
final class VerbPathCounts {
    /** Wake-ups of an initiator's I/O thread asked by issuing threads ({@code loop.execute} of the drain). */
    static final LongAdder clientWakes = new LongAdder();
    /** Flushes of request frames by an initiator's pipelined connection (one {@code writeAndFlush} each). */
    static final LongAdder clientFlushes = new LongAdder();
    /** Read batches of an initiator's open channel ({@code channelReadComplete}) that carried answers. */
    static final LongAdder clientAnswerReads = new LongAdder();
    /** Read batches of a target's open channel ({@code channelReadComplete}) that carried verbs. */
    static final LongAdder targetVerbReads = new LongAdder();
    /** Verbs a target's channel executed. */
    static final LongAdder targetVerbs = new LongAdder();
    /** Flushes of answers by a target's channel (one {@code writeAndFlush} each). */
    static final LongAdder targetFlushes = new LongAdder();

    /**
     * Writes of requests by blocking lanes' callers ({@code TcpLane}'s {@code send}: one per verb,
     * pair or burst, and two per lane's handshake); {@code TcpReadEachTest} prints them per burst.
     */
    static final LongAdder laneWrites = new LongAdder();
    /** Bursts of reads a caller sent on its lane ({@code LaneCompounds.readEach}), each one write. */
    static final LongAdder laneBursts = new LongAdder();

    /** Writes of a lane flight's held reads ({@code LaneFlight}: one per flight, by its waiter or the fallback). */
    static final LongAdder flightWrites = new LongAdder();
    /** Lane flights a flight reader thread read (a callback and no waiter, a waiter with a short deadline, the fallback). */
    static final LongAdder flightReaderReads = new LongAdder();
    /** Lane flights the fallback handed to a flight reader (or failed) because nobody took them in time. */
    static final LongAdder flightPolls = new LongAdder();
    /** Flight reader tasks asked for (each a thread hand-off, whether or not the reader then read the flight). */
    static final LongAdder flightReaderAsks = new LongAdder();

    private VerbPathCounts() {
    }

    /** The counts now, in the order of the fields above. */
    static long[] snapshot() {
        return new long[] {clientWakes.sum(), clientFlushes.sum(), clientAnswerReads.sum(), targetVerbReads.sum(),
                targetVerbs.sum(), targetFlushes.sum()};
    }

    /** Names of {@link #snapshot()}'s counts. */
    static final String[] NAMES = {"clientWakes", "clientFlushes", "clientAnswerReads", "targetVerbReads",
            "targetVerbs", "targetFlushes"};
}
