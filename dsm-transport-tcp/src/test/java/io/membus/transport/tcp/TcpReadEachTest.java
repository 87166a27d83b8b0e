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

    /** Node {@code id}, a member of the test's directory with its segment 0 ({@code SIZE} bytes of random data). */
    private TcpTransport member(int id, Duration timeout, SplittableRandom random) {
        TcpTransport t = (TcpTransport) nodes.start(id, timeout);
        Segment s = t.export(SegmentSpec.of(0, SIZE));
        byte[] data = new byte[SIZE];
        random.nextBytes(data);
        s.write(0, data, 0, SIZE);
        directory.addMember(t.self());
        directory.addSegment(s.descriptor());
        return t;
    }

    /** {@code n} pointers into node 1's segment 0 at random offsets, with destinations of 1..128 bytes. */
    private static long[] pointers(SplittableRandom random, int n, byte[][] dsts) {
        long[] ptrs = new long[n];
        for (int i = 0; i < n; i++) {
            dsts[i] = new byte[1 + random.nextInt(128)];
            ptrs[i] = RemotePtr.pack(1, 0, random.nextInt(SIZE - dsts[i].length));
        }
        return ptrs;
    }

    /** The client's connection to the target, open: a blocking call finds it and runs on its lanes. */
    private static TcpConnection connected(TcpTransport client, TcpTransport target) {
        return (TcpConnection) RemoteMemory.await(client.connect(target.self()), WAIT);
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
        SplittableRandom random = Seeds.random("membus.test.seed", "TcpReadEachTest.sixteen");
        TcpTransport target = member(1, Duration.ofSeconds(20), random);
        TcpTransport client = member(2, Duration.ofSeconds(20), random);
        RemoteMemory memory = new RemoteMemory(client, directory, WAIT);
        byte[][] dsts = new byte[16][];
        long[] ptrs = pointers(random, 16, dsts);
        TcpConnection connection = connected(client, target);
        memory.readEach(ptrs, dsts); // opens the lane
        assertEquals(1, connection.lanesOpen(), "the burst ran on a lane");
        int rounds = 50;
        long[] before = VerbPathCounts.snapshot();
        long writesBefore = VerbPathCounts.laneWrites.sum();
        long burstsBefore = VerbPathCounts.laneBursts.sum();
        long answersBefore = target.laneServer().answerWrites();
        for (int r = 0; r < rounds; r++) {
            memory.readEach(ptrs, dsts);
        }
        long[] after = VerbPathCounts.snapshot();
        long answers = target.laneServer().answerWrites() - answersBefore;
        System.out.printf("per burst of 16 reads: laneWrites=%.2f laneBursts=%.2f answerWrites=%.2f%n",
                (VerbPathCounts.laneWrites.sum() - writesBefore) / (double) rounds,
                (VerbPathCounts.laneBursts.sum() - burstsBefore) / (double) rounds, answers / (double) rounds);
        assertEquals(rounds, VerbPathCounts.laneWrites.sum() - writesBefore, "one write of requests per burst");
        assertEquals(rounds, VerbPathCounts.laneBursts.sum() - burstsBefore);
        // the target's lane thread writes the answers of requests that arrived together at once: one write per
        // burst, unless loopback split the 576 bytes of requests (then the answers leave in two writes)
        assertTrue(answers >= rounds && answers <= 2L * rounds, "answer writes=" + answers + " for " + rounds);
        for (int i = 0; i < before.length; i++) {
            assertEquals(before[i], after[i], "no step of the pipelined path: " + VerbPathCounts.NAMES[i]);
        }
        assertRead(target.table().get(0), ptrs, dsts);
    }

    @Test
    void aBurstLongerThanTheLaneBufferIsSplitIntoRoundTripsOfAtMostMaxBurst() {
        SplittableRandom random = Seeds.random("membus.test.seed", "TcpReadEachTest.split");
        TcpTransport target = member(1, Duration.ofSeconds(20), random);
        TcpTransport client = member(2, Duration.ofSeconds(20), random);
        RemoteMemory memory = new RemoteMemory(client, directory, WAIT);
        int n = 2 * TcpLane.MAX_BURST + 3;
        byte[][] dsts = new byte[n][];
        long[] ptrs = pointers(random, n, dsts);
        connected(client, target);
        long burstsBefore = VerbPathCounts.laneBursts.sum();
        memory.readEach(ptrs, dsts);
        assertEquals(3, VerbPathCounts.laneBursts.sum() - burstsBefore, "bursts of 455, 455 and 3 reads");
        assertRead(target.table().get(0), ptrs, dsts);
    }

    @Test
    void aRefusedReadInTheMiddleFailsTypedNamingItsPointerAndTheLaneStaysInStep() {
        SplittableRandom random = Seeds.random("membus.test.seed", "TcpReadEachTest.refused");
        TcpTransport target = member(1, Duration.ofSeconds(20), random);
        TcpTransport client = member(2, Duration.ofSeconds(20), random);
        RemoteMemory memory = new RemoteMemory(client, directory, WAIT);
        byte[][] dsts = new byte[16][];
        long[] ptrs = pointers(random, 16, dsts);
        long good = ptrs[7];
        ptrs[7] = RemotePtr.pack(1, 0, SIZE - 4);
        dsts[7] = new byte[8];
        TcpConnection connection = connected(client, target);
        long burstsBefore = VerbPathCounts.laneBursts.sum();
        OutOfBoundsException e = assertThrows(OutOfBoundsException.class, () -> memory.readEach(ptrs, dsts));
        assertEquals(ptrs[7], e.ptr(), e.getMessage());
        assertTrue(e.getMessage().contains(RemotePtr.toString(ptrs[7])), e.getMessage());
        assertEquals(1, VerbPathCounts.laneBursts.sum() - burstsBefore, "refused at the target, in the burst");
        assertEquals(1, connection.lanesOpen(), "the lane read every answer: kept");
        ptrs[7] = good;
        memory.readEach(ptrs, dsts);
        assertEquals(1, connection.lanesOpen(), "and reused");
        assertRead(target.table().get(0), ptrs, dsts);
    }

    @Test
    void aBurstWhoseAnswersDoNotComeFailsByItsDeadlineAndItsLaneIsNeverReused() {
        SplittableRandom random = Seeds.random("membus.test.seed", "TcpReadEachTest.deadline");
        TcpTransport target = member(1, Duration.ofSeconds(20), random);
        TcpTransport client = member(2, Duration.ofMillis(400), random);
        RemoteMemory memory = new RemoteMemory(client, directory, Duration.ofMillis(400));
        byte[][] dsts = new byte[16][];
        long[] ptrs = pointers(random, 16, dsts);
        TcpConnection connection = connected(client, target);
        memory.readEach(ptrs, dsts);
        assertEquals(1, connection.lanesOpen());
        target.faults().drop(2); // the target takes node 2's verbs and never answers (the initiator has no rule)
        long burstsBefore = VerbPathCounts.laneBursts.sum();
        DsmTimeoutException e = assertThrows(DsmTimeoutException.class, () -> memory.readEach(ptrs, dsts));
        assertEquals(1, VerbPathCounts.laneBursts.sum() - burstsBefore, "sent as one burst on the lane");
        assertEquals(1, e.nodeId());
        assertTrue(e.mayHaveRun(), "sent before its deadline passed: " + e.getMessage());
        assertEquals(0, connection.lanesOpen(), "the lane whose answers may still come is closed");
        target.faults().heal(2);
        memory.readEach(ptrs, dsts);
        assertRead(target.table().get(0), ptrs, dsts);
    }
}
