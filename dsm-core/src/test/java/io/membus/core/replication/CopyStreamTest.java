package io.membus.core.replication;

import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.fault.FaultInjector;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The primary side of a stream against a scripted carrier: group commit within the
 * in-flight limit, release on acknowledgement, resend after a failed message or a gap,
 * the window, and the fault rules.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CopyStreamTest {
    private static final int COPY = 2;

    /** Records what is sent; the test answers each message. */
    private static class Script implements CopyStream.Carrier {
        final List<byte[]> sent = new ArrayList<>();
        final List<CompletableFuture<byte[]>> replies = new ArrayList<>();
        final FaultInjector faults = new FaultInjector();
        final List<long[]> acks = new ArrayList<>();
        volatile boolean reachable = true;
        /** Thrown by the next acknowledgement (a group whose waiter's callback failed). */
        volatile RuntimeException throwOnAck;

        @Override
        public synchronized CompletableFuture<byte[]> send(int node, byte[] payload) {
            sent.add(payload);
            CompletableFuture<byte[]> f = new CompletableFuture<>();
            replies.add(f);
            return f;
        }

        @Override
        public synchronized void acknowledged(int copyNode, int group, byte status, long epoch, long applied,
                                              boolean inSync) {
            acks.add(new long[]{group, status, applied});
            RuntimeException e = throwOnAck;
            if (e != null) {
                throwOnAck = null;
                throw e;
            }
        }

        @Override
        public boolean reachable(int node) {
            return reachable;
        }

        @Override
        public int maxMessageSize() {
            return 1024;
        }

        @Override
        public FaultInjector faults() {
            return faults;
        }

        synchronized int count() {
            return sent.size();
        }

        synchronized long firstRecord(int message) {
            return new ReplicationCodec.Reader(sent.get(message), 9, "test").i64();
        }

        synchronized int records(int message) {
            ReplicationCodec.Reader r = new ReplicationCodec.Reader(sent.get(message), 17, "test");
            return r.i32();
        }

        synchronized long streamId(int message) {
            return new ReplicationCodec.Reader(sent.get(message), 1, "test").i64();
        }

        /** Answers message {@code i}: the copy processed records up to {@code applied}. */
        void ack(int i, long applied, boolean gap) {
            CompletableFuture<byte[]> f;
            long id;
            synchronized (this) {
                f = replies.get(i);
                id = streamId(i);
            }
            f.complete(new ReplicationCodec.Writer(1 + 8 + 8 + 1 + 4 + 22).u8(ReplicationCodec.ACK).i64(id)
                    .i64(applied).u8(gap ? 1 : 0).i32(1).i32(7).u8(ReplicationCodec.OK).i64(1).i64(applied).u8(1)
                    .array());
        }

        void fail(int i) {
            CompletableFuture<byte[]> f;
            synchronized (this) {
                f = replies.get(i);
            }
            f.completeExceptionally(new NodeUnavailableException(COPY, "test: message lost"));
        }
    }

    private static byte[] record(int n) {
        return ReplicationCodec.done(7, 1, n);
    }

    private static CopyStream stream(Script s, int windowEffects) {
        ReplicationConfig c = new ReplicationConfig(1, windowEffects, 1 << 20, 4096, 0);
        return new CopyStream(COPY, s, c, Duration.ofSeconds(5));
    }

    private static void waitFor(String what, java.util.function.BooleanSupplier cond) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                fail("not reached: " + what);
            }
            Thread.onSpinWait();
        }
    }

    @Test
    void recordsAppendedWhileMessagesAreInFlightGoTogetherInTheNext() {
        Script s = new Script();
        CopyStream cs = stream(s, 4096);
        for (int i = 1; i <= CopyStream.MAX_IN_FLIGHT; i++) {
            cs.append(record(i));
            cs.flush();
        }
        assertEquals(CopyStream.MAX_IN_FLIGHT, s.count(), "one message per flush while the limit allows");
        for (int i = 0; i < 10; i++) {
            cs.append(record(100 + i));
            cs.flush();
        }
        assertEquals(CopyStream.MAX_IN_FLIGHT, s.count(), "nothing more while the limit is reached");
        s.ack(0, 1, false);
        assertEquals(CopyStream.MAX_IN_FLIGHT + 1, s.count(), "an answer lets the next message go");
        assertEquals(CopyStream.MAX_IN_FLIGHT + 1, s.firstRecord(CopyStream.MAX_IN_FLIGHT));
        assertEquals(10, s.records(CopyStream.MAX_IN_FLIGHT), "the ten records appended meanwhile, in one message");
        assertEquals(1, s.acks.size(), "the group's acknowledgement was reported");
        for (int i = 1; i <= CopyStream.MAX_IN_FLIGHT; i++) {
            s.ack(i, i == CopyStream.MAX_IN_FLIGHT ? 14 : i + 1, false);
        }
        assertEquals(0, cs.retained(), "every record acknowledged is released");
    }

    @Test
    void aFailedMessageIsSentAgainFromTheFirstUnacknowledgedRecord() {
        Script s = new Script();
        CopyStream cs = stream(s, 4096);
        cs.append(record(1));
        cs.flush();
        cs.append(record(2));
        cs.flush();
        s.ack(0, 1, false);
        s.fail(1);
        waitFor("the record sent again", () -> s.count() == 3);
        assertEquals(2, s.firstRecord(2), "from the first record the copy did not acknowledge");
        s.ack(2, 2, false); // the resend's sender (the timer thread) may attach its reply handler after this
        waitFor("the resent record acknowledged", () -> cs.retained() == 0);
    }

    @Test
    void aGapReplySendsAgainFromWhatTheCopyHas() {
        Script s = new Script();
        CopyStream cs = stream(s, 4096);
        for (int i = 1; i <= 3; i++) {
            cs.append(record(i));
            cs.flush();
        }
        s.ack(0, 1, false);
        s.ack(1, 1, true); // the copy missed nothing but says it has only record 1 (a lost message before it)
        assertTrue(s.count() >= 4, "sent again");
        assertEquals(2, s.firstRecord(3), "from the copy's next record");
    }

    @Test
    void aFullWindowHoldsChangesUntilAcknowledged() {
        Script s = new Script();
        CopyStream cs = stream(s, 2);
        cs.append(record(1));
        cs.append(record(2));
        cs.flush();
        assertTrue(cs.windowFull());
        DsmTimeoutException e = assertThrows(DsmTimeoutException.class,
                () -> cs.awaitWindow(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(20)));
        assertFalse(e.mayHaveRun(), "a change that waited for the window never ran");
        s.ack(0, 2, false);
        assertFalse(cs.windowFull());
        cs.awaitWindow(System.nanoTime()); // returns at once
    }

    @Test
    void aHeldStreamSendsNothingUntilReleasedAndACutOneStopsForGood() {
        Script s = new Script();
        CopyStream cs = stream(s, 4096);
        s.faults.stream(COPY).hold();
        cs.append(record(1));
        cs.flush();
        assertEquals(0, s.count(), "held: nothing sent");
        s.faults.stream(COPY).release();
        assertEquals(1, s.count(), "released: sent");
        s.faults.stream(COPY).cutAfter(1);
        s.ack(0, 1, false);
        cs.append(record(2));
        cs.flush();
        assertEquals(2, s.count(), "one more message");
        s.ack(1, 2, false);
        cs.append(record(3));
        cs.flush();
        assertEquals(2, s.count(), "then none");
        assertEquals(1, cs.retained(), "the record stays for the copy");
    }

    /** Issue 27: a group that fails with its acknowledgement must not keep the stream's records or its window. */
    @Test
    void aGroupFailingWithItsAcknowledgementStillReleasesTheRecords() {
        Script s = new Script();
        CopyStream cs = stream(s, 2);
        cs.append(record(1));
        cs.append(record(2));
        cs.flush();
        assertTrue(cs.windowFull());
        s.throwOnAck = new IllegalStateException("test: a waiter's callback failed");
        s.ack(0, 2, false);
        assertEquals(0, cs.retained(), "the acknowledged records are released");
        assertFalse(cs.windowFull(), "the window is open again");
        cs.append(record(3));
        cs.flush();
        assertEquals(2, s.count(), "the stream goes on");
        assertEquals(3, s.firstRecord(1));
    }

    /**
     * A carrier whose lane exchanges ({@link CopyStream.Carrier#sendNow}) wait for the test's go, then
     * acknowledge everything; posted messages are only recorded ({@link Script#count()}).
     */
    private static final class Lanes extends Script {
        final List<byte[]> lane = new ArrayList<>();
        final java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);

        @Override
        public byte[] sendNow(int node, byte[] payload) {
            synchronized (this) {
                lane.add(payload);
            }
            try {
                if (!go.await(30, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("test: never released");
                }
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
            ReplicationCodec.Reader r = new ReplicationCodec.Reader(payload, 1, "test");
            long id = r.i64();
            long first = r.i64();
            int count = r.i32();
            return new ReplicationCodec.Writer(1 + 8 + 8 + 1 + 4).u8(ReplicationCodec.ACK).i64(id)
                    .i64(first + count - 1).u8(0).i32(0).array();
        }

        synchronized int laneRecords(int message) {
            return new ReplicationCodec.Reader(lane.get(message), 17, "test").i32();
        }

        synchronized int laneCount() {
            return lane.size();
        }
    }

    private static byte[] effect(int seq) {
        return ReplicationCodec.effect(7, 1, seq, 8L * seq, new byte[8], 0, 8, true);
    }

    /**
     * Issue 28 (docs/replication.md §3.5.2): blocking-verb threads whose changes find the stream in
     * another one's lane exchange post nothing; the first waits and then sends every record
     * appended meanwhile in one lane message, the others return at once.
     */
    @Test
    void changesDuringALaneExchangeGoTogetherInTheNextLaneMessageNotPosted() throws Exception {
        Lanes s = new Lanes();
        CopyStream cs = new CopyStream(COPY, s, new ReplicationConfig(1, 4096, 1 << 20, 4096, 0), Duration.ofSeconds(20));
        long nextSendersBefore = ReplicationCounts.nextSenders.sum();
        java.util.concurrent.ExecutorService lanes = java.util.concurrent.Executors.newFixedThreadPool(3, r -> {
            Thread t = new Thread(() -> {
                io.membus.core.transport.TransportThreads.markServesBlockingVerbs();
                r.run();
            }, "test-lane");
            t.setDaemon(true);
            return t;
        });
        try {
            java.util.concurrent.Future<?> first = lanes.submit(() -> {
                cs.append(effect(1));
                cs.flush();
            });
            waitFor("the first change's lane exchange", () -> s.laneCount() == 1);
            java.util.concurrent.Future<?> next = lanes.submit(() -> {
                cs.append(effect(2));
                cs.flush();
            });
            waitFor("the second change waiting to send next",
                    () -> ReplicationCounts.nextSenders.sum() - nextSendersBefore == 1);
            java.util.concurrent.Future<?> third = lanes.submit(() -> {
                cs.append(effect(3));
                cs.flush();
            });
            third.get(30, TimeUnit.SECONDS); // returns at once: its record is left to the next sender
            assertEquals(1, s.laneCount(), "nothing more sent while the first exchange is on its way");
            assertEquals(0, s.count(), "nothing posted");
            s.go.countDown();
            first.get(30, TimeUnit.SECONDS);
            next.get(30, TimeUnit.SECONDS);
            assertEquals(2, s.laneCount(), "one more lane message");
            assertEquals(1, s.laneRecords(0));
            assertEquals(2, s.laneRecords(1), "the two records appended during the first exchange, together");
            assertEquals(0, s.count(), "nothing posted");
            assertEquals(0, cs.retained(), "every record acknowledged");
        } finally {
            s.go.countDown();
            lanes.shutdownNow();
            assertTrue(lanes.awaitTermination(30, TimeUnit.SECONDS));
        }
    }
}
