package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.OutOfBoundsException;
import io.membus.core.test.Seeds;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link RemoteMemory#readEach} over tcp: a node's reads are one burst on one blocking
 * lane — one write of the requests by the caller, one write of the answers by the target
 * ({@link LaneServer#answerWrites()}), nothing through the pipelined channel or its I/O
 * thread ({@link VerbPathCounts}) — split by {@link TcpLane#MAX_BURST}; a refused read in
 * the middle fails typed, naming its pointer, and leaves the lane in use; a burst whose
 * answers do not come fails by its one deadline and closes its lane.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpReadEachTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final int SIZE = 64 * 1024;
    private final Nodes nodes = new Nodes();
    private final StaticDirectory directory = new StaticDirectory();

    @AfterEach
    void close() {
        nodes.close();
    }

    /**
     * Node 1 (the target, its segment 0 of random data) and node 2 (the client, whose verbs have
     * {@code clientTimeout}), connected, and {@code n} pointers into the target's segment with
     * destinations of 1..128 bytes; the random generator is seeded by {@code test}.
     */
    private final class Pair {
        final TcpTransport target;
        final TcpTransport client;
        final RemoteMemory memory;
        final TcpConnection connection;
        final long[] ptrs;
        final byte[][] dsts;

        Pair(String test, Duration clientTimeout, int n) {
            SplittableRandom random = Seeds.random("membus.test.seed", "TcpReadEachTest." + test);
            target = (TcpTransport) nodes.start(1, Duration.ofSeconds(20));
            client = (TcpTransport) nodes.start(2, clientTimeout);
            Segment s = target.export(SegmentSpec.of(0, SIZE));
            byte[] data = new byte[SIZE];
            random.nextBytes(data);
            s.write(0, data, 0, SIZE);
            directory.addMember(target.self());
            directory.addMember(client.self());
            directory.addSegment(s.descriptor());
            memory = new RemoteMemory(client, directory, clientTimeout);
            // open: a blocking call finds the connection and runs on its lanes
            connection = (TcpConnection) RemoteMemory.await(client.connect(target.self()), WAIT);
            ptrs = new long[n];
            dsts = new byte[n][];
            for (int i = 0; i < n; i++) {
                dsts[i] = new byte[1 + random.nextInt(128)];
                ptrs[i] = RemotePtr.pack(1, 0, random.nextInt(SIZE - dsts[i].length));
            }
        }

        /** Every destination holds what the target's segment holds at its pointer. */
        void assertRead() {
            TcpReadEachTest.assertRead(target.table().get(0), ptrs, dsts);
        }
    }

    private static void assertRead(Segment target, long[] ptrs, byte[][] dsts) {
        for (int i = 0; i < ptrs.length; i++) {
            byte[] expected = new byte[dsts[i].length];
            target.read(RemotePtr.offset(ptrs[i]), expected, 0, expected.length);
            assertArrayEquals(expected, dsts[i], "read " + i + " at " + RemotePtr.toString(ptrs[i]));
        }
    }

    @Test
    void sixteenReadsOfOneNodeAreOneLaneWriteAndOneAnswerWriteAndNoPipelinedStep() {
        Pair p = new Pair("sixteen", Duration.ofSeconds(20), 16);
        p.memory.readEach(p.ptrs, p.dsts); // opens the lane
        assertEquals(1, p.connection.lanesOpen(), "the burst ran on a lane");
        int rounds = 500;
        long[] before = VerbPathCounts.snapshot();
        long writesBefore = VerbPathCounts.laneWrites.sum();
        long burstsBefore = VerbPathCounts.laneBursts.sum();
        long answersBefore = p.target.laneServer().answerWrites();
        java.util.Map<String, Long> blocksBefore = VerbPathCountsTest.blocks();
        for (int r = 0; r < rounds; r++) {
            p.memory.readEach(p.ptrs, p.dsts);
        }
        java.util.Map<String, Long> blocksAfter = VerbPathCountsTest.blocks();
        long[] after = VerbPathCounts.snapshot();
        long answers = p.target.laneServer().answerWrites() - answersBefore;
        StringBuilder line = new StringBuilder(String.format(
                "per burst of 16 reads: laneWrites=%.2f laneBursts=%.2f answerWrites=%.2f",
                (VerbPathCounts.laneWrites.sum() - writesBefore) / (double) rounds,
                (VerbPathCounts.laneBursts.sum() - burstsBefore) / (double) rounds, answers / (double) rounds));
        // how often each thread blocked per burst (Linux; the threads that did at least once in ten bursts)
        blocksAfter.forEach((thread, n) -> {
            long d = n - blocksBefore.getOrDefault(thread, 0L);
            if (d >= rounds / 10) {
                line.append(String.format(" blocks[%s]=%.2f", thread, d / (double) rounds));
            }
        });
        System.out.println(line);
        assertEquals(rounds, VerbPathCounts.laneWrites.sum() - writesBefore, "one write of requests per burst");
        assertEquals(rounds, VerbPathCounts.laneBursts.sum() - burstsBefore);
        // the target's lane thread writes the answers of requests that arrived together at once: one write per
        // burst, unless loopback split the 576 bytes of requests (then the answers leave in two writes)
        assertTrue(answers >= rounds && answers <= 2L * rounds, "answer writes=" + answers + " for " + rounds);
        for (int i = 0; i < before.length; i++) {
            assertEquals(before[i], after[i], "no step of the pipelined path: " + VerbPathCounts.NAMES[i]);
        }
        p.assertRead();
    }

    @Test
    void aBurstLongerThanTheLaneBufferIsSplitIntoRoundTripsOfAtMostMaxBurst() {
        Pair p = new Pair("split", Duration.ofSeconds(20), 2 * TcpLane.MAX_BURST + 3);
        long burstsBefore = VerbPathCounts.laneBursts.sum();
        p.memory.readEach(p.ptrs, p.dsts);
        assertEquals(3, VerbPathCounts.laneBursts.sum() - burstsBefore, "bursts of 455, 455 and 3 reads");
        p.assertRead();
    }

    @Test
    void aRefusedReadInTheMiddleFailsTypedNamingItsPointerAndTheLaneStaysInStep() {
        Pair p = new Pair("refused", Duration.ofSeconds(20), 16);
        long good = p.ptrs[7];
        p.ptrs[7] = RemotePtr.pack(1, 0, SIZE - 4);
        p.dsts[7] = new byte[8];
        long burstsBefore = VerbPathCounts.laneBursts.sum();
        OutOfBoundsException e = assertThrows(OutOfBoundsException.class, () -> p.memory.readEach(p.ptrs, p.dsts));
        assertEquals(p.ptrs[7], e.ptr(), e.getMessage());
        assertTrue(e.getMessage().contains(RemotePtr.toString(p.ptrs[7])), e.getMessage());
        assertEquals(1, VerbPathCounts.laneBursts.sum() - burstsBefore, "refused at the target, in the burst");
        assertEquals(1, p.connection.lanesOpen(), "the lane read every answer: kept");
        p.ptrs[7] = good;
        p.memory.readEach(p.ptrs, p.dsts);
        assertEquals(1, p.connection.lanesOpen(), "and reused");
        p.assertRead();
    }

    @Test
    void aBurstWhoseAnswersDoNotComeFailsByItsDeadlineAndItsLaneIsNeverReused() {
        Pair p = new Pair("deadline", Duration.ofMillis(400), 16);
        p.memory.readEach(p.ptrs, p.dsts);
        assertEquals(1, p.connection.lanesOpen());
        p.target.faults().drop(2); // the target takes node 2's verbs and never answers (the initiator has no rule)
        long burstsBefore = VerbPathCounts.laneBursts.sum();
        DsmTimeoutException e = assertThrows(DsmTimeoutException.class, () -> p.memory.readEach(p.ptrs, p.dsts));
        assertEquals(1, VerbPathCounts.laneBursts.sum() - burstsBefore, "sent as one burst on the lane");
        assertEquals(1, e.nodeId());
        assertTrue(e.mayHaveRun(), "sent before its deadline passed: " + e.getMessage());
        assertEquals(0, p.connection.lanesOpen(), "the lane whose answers may still come is closed");
        p.target.faults().heal(2);
        p.memory.readEach(p.ptrs, p.dsts);
        p.assertRead();
    }
}
