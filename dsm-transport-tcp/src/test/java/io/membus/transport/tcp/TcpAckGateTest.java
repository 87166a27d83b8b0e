package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The soft NIC answers a verb on a replicated segment only once its group acknowledged
 * the verb's need (issue 27), on the Netty channel and on the blocking lanes, with a
 * {@link TestGate} the test acknowledges by hand plugged in through
 * {@code TcpTransport.gateLookup}: segment 0 of node 1 is "replicated", segment 1 is
 * not. Checked: an answer waits for its ack; the later answers of its channel wait
 * behind it and then go in request order (while the later verbs already ran); a read
 * waits for the need too; a need acknowledged already answers at once; a failed group
 * answers the waiting verb with a typed failure whose outcome is unknown and the channel
 * keeps working; a channel whose answers pile up stops being read, and catches up in
 * order; a lane waits likewise, times out typed, and closing the node ends its wait.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpAckGateTest {
    private static final Duration WAIT = Duration.ofSeconds(20);
    /** How long a test looks for an answer that must not come (a bounded probe: a wrong early answer fails it). */
    private static final int QUIET_MILLIS = 300;
    private static final byte[] SECRET = RawPeer.secret(Nodes.SECRET);
    private final Nodes nodes = new Nodes();
    private final StaticDirectory directory = new StaticDirectory();
    private final TestGate gate = new TestGate();

    @AfterEach
    void close() {
        nodes.close();
    }

    /** Node {@code id} with segments 0 (behind {@link #gate}) and 1 (not replicated). */
    private TcpTransport node(int id, Duration operationTimeout, String... properties) {
        Transport t = nodes.start(id, operationTimeout, properties);
        directory.addMember(t.self());
        directory.addSegment(t.export(SegmentSpec.of(0, 64 * 1024)).descriptor());
        directory.addSegment(t.export(SegmentSpec.of(1, 64 * 1024)).descriptor());
        TcpTransport tcp = (TcpTransport) t;
        tcp.gateLookup = ptr -> RemotePtr.segmentIndex(ptr) == 0 ? gate : null;
        return tcp;
    }

    private TcpTransport node(int id) {
        return node(id, WAIT);
    }

    private static void eventually(BooleanSupplier condition, String what) throws InterruptedException {
        long until = System.nanoTime() + WAIT.toNanos();
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < until, what);
            Thread.sleep(5);
        }
    }

    /** An authenticated raw initiator (node 2) on node {@code a}'s Netty port. */
    private static RawPeer channel(TcpTransport a) throws Exception {
        RawPeer p = new RawPeer(a.localAddress(), 20_000);
        assertEquals(Frame.OP_WELCOME, RawPeer.wrap(p.handshake(SECRET, 2, 5, 1, a.incarnation())).opcode());
        return p;
    }

    /** An authenticated raw initiator (node 2) on node {@code a}'s lane port. */
    private static RawPeer lane(TcpTransport a) throws Exception {
        RawPeer p = new RawPeer("127.0.0.1:" + a.lanePort(), 20_000);
        assertEquals(Frame.OP_WELCOME, RawPeer.wrap(p.laneHandshake(SECRET, 2, 5, 1, a.incarnation())).opcode());
        return p;
    }

    /** Checks that no frame arrives for {@link #QUIET_MILLIS}, then restores the peer's read timeout. */
    private static void assertNoAnswer(RawPeer p, String what) throws Exception {
        p.socket.setSoTimeout(QUIET_MILLIS);
        try {
            byte[] f = p.readFrame();
            throw new AssertionError(what + ": got " + (f == null ? "the end of the stream" : "a frame, correlationId="
                    + RawPeer.wrap(f).correlationId()));
        } catch (SocketTimeoutException expected) {
            // nothing came
        } finally {
            p.socket.setSoTimeout(20_000);
        }
    }

    private static Frame answer(RawPeer p, long corr, byte opcode) throws Exception {
        byte[] bytes = p.readFrame();
        assertTrue(bytes != null, "the connection stayed open for answer " + corr);
        Frame f = RawPeer.wrap(bytes);
        assertEquals(corr, f.correlationId(), "answers in request order");
        assertEquals(opcode, f.opcode(), "answer " + corr + (f.opcode() == Frame.OP_ERROR ? ": " + f.errorMessage()
                : ""));
        return f;
    }

    @Test
    void aChannelsAnswersWaitBehindOneThatWaitsForItsAckAndThenGoInOrder() throws Exception {
        TcpTransport a = node(1);
        Segment replicated = a.table().get(0);
        Segment plain = a.table().get(1);
        gate.need(1);
        try (RawPeer p = channel(a)) {
            p.send(b -> {
                Frame.writeFaa(b, 1, plain.pointer(0), plain.remoteKey(), 1); // before the waiting one: leaves
                Frame.writeWrite(b, 2, replicated.pointer(64), replicated.remoteKey(), new byte[]{1, 2, 3, 4}, 0, 4);
                Frame.writeFaa(b, 3, plain.pointer(0), plain.remoteKey(), 10);
                Frame.writeRead(b, 4, plain.pointer(0), plain.remoteKey(), 8);
            });
            assertEquals(0, answer(p, 1, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
            // the verbs behind the waiting answer ran ...
            eventually(() -> plain.readLong(0) == 11, "the FAA behind the waiting write ran");
            byte[] written = new byte[4];
            replicated.read(64, written, 0, 4);
            assertArrayEquals(new byte[]{1, 2, 3, 4}, written, "the write ran at once; only its answer waits");
            // ... but no answer leaves before the write's
            assertNoAnswer(p, "an answer left before the write's ack");
            assertEquals(1, gate.waiting(), "one callback for the one answer that waits");
            gate.ack(1);
            answer(p, 2, Frame.OP_OK);
            assertEquals(1, answer(p, 3, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
            assertEquals(11, answer(p, 4, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
            // a need acknowledged already answers at once, no callback
            p.send(b -> Frame.writeFaa(b, 5, replicated.pointer(0), replicated.remoteKey(), 1));
            answer(p, 5, Frame.OP_OK);
            assertEquals(0, gate.waiting());
        }
    }

    @Test
    void eachWaitingAnswerWaitsForItsOwnNeed() throws Exception {
        TcpTransport a = node(1);
        Segment replicated = a.table().get(0);
        try (RawPeer p = channel(a)) {
            gate.need(1);
            p.send(b -> Frame.writeFaa(b, 1, replicated.pointer(0), replicated.remoteKey(), 1));
            eventually(() -> gate.waiting() == 1, "the first FAA waits for 1");
            gate.need(2);
            p.send(b -> Frame.writeFaa(b, 2, replicated.pointer(0), replicated.remoteKey(), 1));
            eventually(() -> gate.waiting() == 2, "the second FAA waits for 2");
            gate.ack(1);
            assertEquals(0, answer(p, 1, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
            assertNoAnswer(p, "the second answer left with the first, before its own need was acknowledged");
            gate.ack(2);
            assertEquals(1, answer(p, 2, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
        }
    }

    @Test
    void aReadsAnswerWaitsForTheNeedItSaw() throws Exception {
        TcpTransport a = node(1);
        Segment replicated = a.table().get(0);
        replicated.write(128, new byte[]{9, 8, 7, 6, 5, 4, 3, 2}, 0, 8);
        gate.ack(4);
        gate.need(5); // a change the read may have seen is not on every copy yet
        try (RawPeer p = channel(a)) {
            p.send(b -> Frame.writeRead(b, 1, replicated.pointer(128), replicated.remoteKey(), 8));
            eventually(() -> gate.waiting() == 1, "the read ran and waits for need 5");
            assertNoAnswer(p, "the read answered before its need was acknowledged");
            gate.ack(5);
            Frame f = answer(p, 1, Frame.OP_OK);
            assertArrayEquals(new byte[]{9, 8, 7, 6, 5, 4, 3, 2}, f.bytesAt(Frame.HEADER_LENGTH, 8));
        }
    }

    @Test
    void aFailedGroupAnswersTheWaitingVerbWithATypedUnknownOutcomeAndTheChannelGoesOn() throws Exception {
        TcpTransport a = node(1);
        Segment replicated = a.table().get(0);
        Segment plain = a.table().get(1);
        gate.need(1);
        try (RawPeer p = channel(a)) {
            p.send(b -> {
                Frame.writeFaa(b, 1, replicated.pointer(0), replicated.remoteKey(), 1);
                // linked to the FAA, which ran: it runs, whatever the FAA's group says later
                Frame.writeLinkedCas(b, 2, plain.pointer(0), plain.remoteKey(), 0, 5);
                Frame.writeFaa(b, 3, plain.pointer(0), plain.remoteKey(), 1);
            });
            eventually(() -> plain.readLong(0) == 6, "the verbs behind the waiting one ran (the linked CAS too)");
            gate.fail(new NodeUnavailableException(1, "test: the group was fenced by a promotion"));
            Frame error = answer(p, 1, Frame.OP_ERROR);
            DsmException decoded = ErrorFrames.decode(error, new PeerInfo(1, a.incarnation(), "test"));
            NodeUnavailableException n = assertInstanceOf(NodeUnavailableException.class, decoded);
            assertTrue(n.mayHaveRun(), "the change may be on copies: " + n.getMessage());
            assertTrue(n.getMessage().contains("fenced by a promotion"), n.getMessage());
            assertEquals(1, replicated.readLong(0), "the FAA ran here");
            assertEquals(0, answer(p, 2, Frame.OP_OK).longAt(Frame.HEADER_LENGTH), "LINKED decided by execution");
            assertEquals(5, answer(p, 3, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
            p.send(b -> Frame.writeFaa(b, 4, plain.pointer(0), plain.remoteKey(), 1));
            assertEquals(6, answer(p, 4, Frame.OP_OK).longAt(Frame.HEADER_LENGTH), "the channel keeps working");
        }
    }

    @Test
    void aChannelWhoseAnswersPileUpStopsBeingReadAndCatchesUpInOrder() throws Exception {
        TcpTransport a = node(1);
        Segment replicated = a.table().get(0);
        gate.need(1);
        // far more than the limit plus one read of requests (a read batch is parked whole)
        int verbs = ServerHandler.MAX_PENDING + 8000;
        try (RawPeer p = channel(a)) {
            Thread sender = new Thread(() -> {
                try {
                    p.send(b -> {
                        for (int i = 0; i < verbs; i++) {
                            Frame.writeFaa(b, i, replicated.pointer(0), replicated.remoteKey(), 1);
                        }
                    });
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            }, "test-sender");
            sender.start();
            eventually(() -> gate.waiting() >= ServerHandler.MAX_PENDING, "the limit of waiting answers was reached");
            assertNoAnswer(p, "an answer left before the ack");
            long ran = replicated.readLong(0);
            assertTrue(ran < verbs, "reading stopped at the limit: " + ran + " of " + verbs + " verbs ran");
            gate.ack(1);
            for (int i = 0; i < verbs; i++) {
                assertEquals(i, answer(p, i, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
            }
            sender.join(WAIT.toMillis());
            assertFalse(sender.isAlive());
            assertEquals(verbs, replicated.readLong(0));
        }
    }

    @Test
    void anInitiatorsPipelinedVerbsCompleteAfterTheAckAndAFailedGroupFailsTyped() throws Exception {
        TcpTransport a = node(1);
        TcpTransport b = node(2);
        RemoteMemory memory = new RemoteMemory(b, directory, WAIT);
        long replicated = RemotePtr.pack(1, 0, 0);
        long plain = RemotePtr.pack(1, 1, 0);
        gate.need(1);
        CompletableFuture<Long> first = memory.fetchAndAddAsync(replicated, 1);
        CompletableFuture<Long> second = memory.fetchAndAddAsync(plain, 1);
        eventually(() -> a.table().get(1).readLong(0) == 1, "both verbs ran");
        assertFalse(first.isDone(), "the replicated FAA is not answered before its ack");
        assertFalse(second.isDone(), "the FAA behind it waits too");
        gate.ack(1);
        assertEquals(0, first.get(20, TimeUnit.SECONDS));
        assertEquals(0, second.get(20, TimeUnit.SECONDS));
        gate.need(2);
        CompletableFuture<Long> third = memory.fetchAndAddAsync(replicated, 1);
        eventually(() -> gate.waiting() == 1, "the third FAA waits");
        gate.fail(new NodeUnavailableException(1, "test: the group was closed"));
        ExecutionException e = assertThrows(ExecutionException.class, () -> third.get(20, TimeUnit.SECONDS));
        NodeUnavailableException n = assertInstanceOf(NodeUnavailableException.class, e.getCause());
        assertTrue(n.mayHaveRun(), n.getMessage());
        assertEquals(1, memory.fetchAndAddAsync(plain, 1).get(20, TimeUnit.SECONDS),
                "the connection still serves the other segment");
    }

    @Test
    void aLaneWaitsForTheAckWritingTheAnswersBeforeItFirst() throws Exception {
        TcpTransport a = node(1);
        Segment replicated = a.table().get(0);
        Segment plain = a.table().get(1);
        gate.need(1);
        try (RawPeer p = lane(a)) {
            p.send(b -> {
                Frame.writeFaa(b, 1, plain.pointer(0), plain.remoteKey(), 1);
                Frame.writeCas(b, 2, replicated.pointer(0), replicated.remoteKey(), 0, 7);
                Frame.writeFaa(b, 3, plain.pointer(0), plain.remoteKey(), 1);
            });
            assertEquals(0, answer(p, 1, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
            eventually(() -> gate.waiting() == 1, "the CAS ran and waits");
            assertEquals(7, replicated.readLong(0));
            assertNoAnswer(p, "the CAS answered before its ack");
            assertEquals(1, plain.readLong(0), "a lane runs one verb at a time: the FAA behind waits unrun");
            gate.ack(1);
            assertEquals(0, answer(p, 2, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
            assertEquals(1, answer(p, 3, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
            // a failed group: typed, unknown outcome, the lane goes on
            gate.need(2);
            p.send(b -> Frame.writeFaa(b, 4, replicated.pointer(0), replicated.remoteKey(), 1));
            eventually(() -> gate.waiting() == 1, "the FAA waits");
            gate.fail(new NodeUnavailableException(1, "test: the group was fenced"));
            DsmException decoded = ErrorFrames.decode(answer(p, 4, Frame.OP_ERROR),
                    new PeerInfo(1, a.incarnation(), "test"));
            assertTrue(assertInstanceOf(NodeUnavailableException.class, decoded).mayHaveRun());
            p.send(b -> Frame.writeFaa(b, 5, plain.pointer(0), plain.remoteKey(), 1));
            assertEquals(2, answer(p, 5, Frame.OP_OK).longAt(Frame.HEADER_LENGTH));
        }
    }

    @Test
    void aLaneTimesOutTypedAfterTheOperationTimeoutAndGoesOn() throws Exception {
        TcpTransport a = node(1, Duration.ofMillis(500));
        TcpTransport b = node(2);
        RemoteMemory memory = new RemoteMemory(b, directory, WAIT);
        memory.writeLong(RemotePtr.pack(1, 1, 0), 1); // opens the connection: the next blocking verb takes a lane
        gate.need(1);
        // node 2's blocking verb takes a lane; node 1 gives up after its own operation timeout
        DsmTimeoutException t = assertThrows(DsmTimeoutException.class,
                () -> memory.writeLong(RemotePtr.pack(1, 0, 8), 42));
        assertTrue(t.mayHaveRun(), t.getMessage());
        assertTrue(t.getMessage().contains("replica group"), t.getMessage());
        assertEquals(42, a.table().get(0).readLong(8), "the write ran and stays");
        assertEquals(1, a.lanesServed(), "it went over node 1's lane server");
        memory.writeLong(RemotePtr.pack(1, 1, 8), 43);
        assertEquals(43, memory.readLong(RemotePtr.pack(1, 1, 8)), "the lane goes on");
    }

    @Test
    void closingTheNodeEndsALanesWait() throws Exception {
        TcpTransport a = node(1);
        Segment replicated = a.table().get(0);
        gate.need(1);
        try (RawPeer p = lane(a)) {
            p.send(b -> Frame.writeFaa(b, 1, replicated.pointer(0), replicated.remoteKey(), 1));
            eventually(() -> gate.waiting() == 1, "the FAA waits");
            a.close();
            p.awaitClosed();
            eventually(() -> Thread.getAllStackTraces().keySet().stream()
                    .noneMatch(th -> th.getName().startsWith("membus-lane-1-")), "the lane's thread ended");
        }
    }

    /**
     * Random verbs, half of them on the replicated word, pipelined in random chunks by one
     * thread while the test's thread acknowledges random prefixes of the sequences handed
     * out (not the I/O thread: the release crosses threads): every answer comes in request
     * order, and none of the replicated word's leaves before its own sequence was
     * acknowledged (the k-th FAA on it reads k - 1 and waits for sequence k; the test's
     * thread is the only one that acknowledges, so what it reads was acknowledged when it
     * reads it). Prints its seed ({@code -Dmembus.seed} replays the verbs and the
     * acknowledgement steps; thread timing is not replayed).
     */
    @Test
    void acksFromAnotherThreadReleaseEveryAnswerInOrderAndNoneEarly() throws Exception {
        long seed = io.membus.core.test.Seeds.seed("membus.seed", "TcpAckGateTest.acks");
        java.util.SplittableRandom random = new java.util.SplittableRandom(seed);
        TestGate counting = TestGate.counting();
        TcpTransport a = node(1);
        a.gateLookup = ptr -> RemotePtr.segmentIndex(ptr) == 0 ? counting : null;
        Segment replicated = a.table().get(0);
        Segment plain = a.table().get(1);
        int verbs = 3000;
        boolean[] gated = new boolean[verbs];
        int[] chunkEnds = new int[verbs];
        int chunks = 0;
        for (int i = 0; i < verbs; i++) {
            gated[i] = random.nextBoolean();
        }
        for (int end = 0; end < verbs; ) {
            end = Math.min(verbs, end + 1 + random.nextInt(64));
            chunkEnds[chunks++] = end;
        }
        int chunkCount = chunks;
        try (RawPeer p = channel(a)) {
            java.util.concurrent.atomic.AtomicReference<Throwable> sendFailure = new java.util.concurrent.atomic.AtomicReference<>();
            Thread sender = new Thread(() -> {
                try {
                    int from = 0;
                    for (int c = 0; c < chunkCount; c++) {
                        int f = from;
                        int to = chunkEnds[c];
                        p.send(b -> {
                            for (int i = f; i < to; i++) {
                                Segment s = gated[i] ? replicated : plain;
                                Frame.writeFaa(b, i, s.pointer(0), s.remoteKey(), 1);
                            }
                        });
                        from = to;
                    }
                } catch (Throwable t) {
                    sendFailure.set(t);
                }
            }, "test-sender");
            sender.start();
            int acks = 0;
            long until = System.nanoTime() + WAIT.toNanos();
            while (read < verbs) {
                assertTrue(System.nanoTime() < until, "answers stopped at " + read + " of " + verbs + ", seed " + seed);
                if (p.socket.getInputStream().available() > 0) {
                    readOne(p, counting, gated, seed);
                    continue;
                }
                long acked = counting.acked();
                long issued = counting.issued();
                if (issued > acked && random.nextInt(4) == 0) { // a random prefix, at most half: some still wait
                    counting.ack(acked + 1 + random.nextLong(Math.max(1, (issued - acked) / 2)));
                    acks++;
                } else {
                    java.util.concurrent.locks.LockSupport.parkNanos(20_000L + random.nextLong(200_000L));
                }
            }
            sender.join(WAIT.toMillis());
            assertFalse(sender.isAlive());
            assertEquals(null, sendFailure.get());
            assertTrue(acks > 1, "the answers were released by several acknowledgements, seed " + seed);
        }
    }

    private int read;
    private int readGated;

    /** Reads answer {@link #read}: in order, and a replicated word's only after its sequence was acknowledged. */
    private void readOne(RawPeer p, TestGate counting, boolean[] gated, long seed) throws Exception {
        Frame f = answer(p, read, Frame.OP_OK);
        long old = f.longAt(Frame.HEADER_LENGTH);
        if (gated[read]) {
            assertEquals(readGated, old, "seed " + seed);
            assertTrue(counting.acked(old + 1), "answer " + read + " (sequence " + (old + 1) + ") left before its ack"
                    + ", seed " + seed);
            readGated++;
        }
        read++;
    }

    @Test
    void segmentsWithoutAGateAnswerAsBefore() throws Exception {
        TcpTransport a = node(1);
        Segment plain = a.table().get(1);
        gate.need(1); // never acknowledged: nothing may touch it
        try (RawPeer p = channel(a)) {
            p.send(b -> {
                Frame.writeFaa(b, 1, plain.pointer(0), plain.remoteKey(), 1);
                Frame.writeWrite(b, 2, plain.pointer(64 * 1024 - 4), plain.remoteKey(), new byte[8], 0, 8);
                Frame.writeLinkedCas(b, 3, plain.pointer(0), plain.remoteKey(), 1, 9);
            });
            answer(p, 1, Frame.OP_OK);
            assertEquals(ErrorCode.OUT_OF_BOUNDS.wire(), RawPeer.errorCode(p.readFrame()));
            assertEquals(ErrorCode.NOT_RUN.wire(), RawPeer.errorCode(p.readFrame()));
        }
        assertEquals(0, gate.waiting());
    }
}
