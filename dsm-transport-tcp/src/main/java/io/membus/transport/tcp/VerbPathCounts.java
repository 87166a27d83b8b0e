package io.membus.transport.tcp;

import io.membus.core.metrics.CounterSet;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts of the pipelined verb path's hand-offs and system-call-sized steps, across every
 * tcp transport of this JVM: what a burst of verbs in flight costs in wake-ups of the
 * initiator's I/O thread, writes (flushes) and read batches on both ends. They are the
 * evidence of a change to the path that does not depend on the machine's load
 * ({@code VerbPathCountsTest} prints them per 16 reads in flight); nothing in the transport
 * reads them. Each count is one {@link LongAdder} increment per step (per burst, not per
 * verb, except {@link #targetVerbs}), so counting is left on. The pipelined path's counts are
 * the set {@link #PIPELINED}; the blocking lanes' counts stand beside it, read one by one
 * (a test of the lanes checks the pipelined set did not move).
 *
 * <p><b>Note:</b> thread-safe, with {@link CounterSet}'s ordering: increments from any thread,
 * never lost, not ordered with each other; {@link #snapshot()} is not atomic across counts,
 * so read it while the path is quiet.
 */
final class VerbPathCounts {
    private static final CounterSet.Builder DECLARE = CounterSet.builder("tcp verb path");

    /** Wake-ups of an initiator's I/O thread asked by issuing threads ({@code loop.execute} of the drain). */
    static final LongAdder clientWakes = DECLARE.add("clientWakes");
    /** Flushes of request frames by an initiator's pipelined connection (one {@code writeAndFlush} each). */
    static final LongAdder clientFlushes = DECLARE.add("clientFlushes");
    /** Read batches of an initiator's open channel ({@code channelReadComplete}) that carried answers. */
    static final LongAdder clientAnswerReads = DECLARE.add("clientAnswerReads");
    /** Read batches of a target's open channel ({@code channelReadComplete}) that carried verbs. */
    static final LongAdder targetVerbReads = DECLARE.add("targetVerbReads");
    /** Verbs a target's channel executed. */
    static final LongAdder targetVerbs = DECLARE.add("targetVerbs");
    /** Flushes of answers by a target's channel (one {@code writeAndFlush} each). */
    static final LongAdder targetFlushes = DECLARE.add("targetFlushes");

    /**
     * Writes of requests by blocking lanes' callers ({@code TcpLane}'s {@code send}: one per verb,
     * pair or burst, and two per lane's handshake); {@code TcpReadEachTest} prints them per burst.
     */
    static final LongAdder laneWrites = new LongAdder();
    /** Bursts of reads a caller sent on its lane ({@code LaneCompounds.readEach}), each one write. */
    static final LongAdder laneBursts = new LongAdder();

    /** Writes of a lane flight's held reads ({@code LaneFlight}: one per flight, by whichever thread reads it). */
    static final LongAdder flightWrites = new LongAdder();
    /** Lane flights a flight reader thread read (a callback and no waiter, a waiter with a short deadline, the fallback). */
    static final LongAdder flightReaderReads = new LongAdder();
    /** Lane flights the fallback handed to a flight reader (or failed) because nobody took them in time. */
    static final LongAdder flightPolls = new LongAdder();
    /** Flight reader tasks asked for (each a thread hand-off, whether or not the reader then read the flight). */
    static final LongAdder flightReaderAsks = new LongAdder();

    private VerbPathCounts() {
    }

    /** The pipelined path's counts, those of {@link #snapshot()}: the six fields before the lanes'. */
    static final CounterSet PIPELINED = DECLARE.build();

    /** The counts of {@link #PIPELINED} now, in its order. */
    static long[] snapshot() {
        return PIPELINED.snapshot();
    }

    /** Names of {@link #snapshot()}'s counts (a copy of {@link #PIPELINED}'s names, for the tests). */
    static final String[] NAMES = PIPELINED.names().toArray(new String[0]);
}
