package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.test.TestJvm;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A lost connection fails every verb in flight at once with a typed error naming
 * the peer, the connection comes back by itself, and no verb is ever executed
 * twice; a bounded window of verbs in flight keeps the issue order.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
class TcpConnectionLossTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private final Nodes nodes = new Nodes();

    @AfterEach
    void close() {
        nodes.close();
    }

    private static Connection connect(Transport from, Transport to) {
        return RemoteMemory.await(from.connect(to.self()), WAIT);
    }

    /** The failure of a future that must fail within {@code WAIT}. */
    private static Throwable failure(CompletableFuture<?> f) throws InterruptedException {
        try {
            f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (java.util.concurrent.TimeoutException e) {
            throw new AssertionError("a verb neither completed nor failed within " + WAIT, e);
        }
    }

    @Test
    void aCutFailsEveryVerbInFlightAtOnceAndTheConnectionComesBackWithoutResending() throws Exception {
        Transport a = nodes.start(1);
        Transport b = nodes.start(2);
        java.util.concurrent.atomic.AtomicInteger completed = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicInteger failed = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicInteger reconnected = new java.util.concurrent.atomic.AtomicInteger();
        ((TcpTransport) b).observe(new io.membus.core.transport.VerbObserver() {
            @Override
            public void completed(int peer, int kind, int bytes, long latencyNanos) {
                completed.incrementAndGet();
            }

            @Override
            public void failed(int peer, int kind) {
                failed.incrementAndGet();
            }

            @Override
            public void reconnected(int peer) {
                assertEquals(1, peer);
                reconnected.incrementAndGet();
            }
        });
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        Connection ba = connect(b, a);
        long ptr = seg.pointer(0);
        long key = seg.remoteKey();
        assertEquals(0L, await(ba.compareAndSwap(ptr, key, 0, 0)));

        a.faults().delay(2, Duration.ofMinutes(5)); // the target holds node 2's verbs: they cannot complete
        List<CompletableFuture<Long>> inFlight = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            inFlight.add(ba.fetchAndAdd(ptr, key, 1));
            inFlight.add(ba.compareAndSwap(ptr, key, i, i + 1));
        }
        assertTrue(((TcpTransport) a).disconnect(2, "cut by the test") >= 1);
        for (CompletableFuture<Long> f : inFlight) {
            Throwable t = failure(f);
            NodeUnavailableException e = assertInstanceOf(NodeUnavailableException.class, t,
                    "failed at once by the loss, not by the 20 s deadline");
            assertEquals(1, e.nodeId());
            assertTrue(e.getMessage().contains("cut by the test"), e.getMessage());
            assertTrue(e.getMessage().contains("node 1 (incarnation " + a.incarnation() + ") at " + a.localAddress()),
                    e.getMessage());
        }
        a.faults().clear();
        assertEquals(0, seg.readLong(0), "held verbs of a lost connection are never executed");

        // the same connection reconnects with backoff
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!ba.isOpen()) {
            if (System.nanoTime() > deadline) {
                fail("the connection did not come back within " + WAIT);
            }
            Thread.sleep(10);
        }
        assertEquals(0L, await(ba.fetchAndAdd(ptr, key, 1)), "no lost verb was resent after the reconnect");
        assertEquals(1, seg.readLong(0));
        // the observer saw every outcome and the reconnect; an atomic completes with a primitive too
        CompletableFuture<Long> viaSink = new CompletableFuture<>();
        ba.fetchAndAdd(ptr, key, 1, (value, e) -> {
            if (e != null) {
                viaSink.completeExceptionally(e);
            } else {
                viaSink.complete(value);
            }
        });
        assertEquals(1L, await(viaSink));
        assertEquals(3, completed.get());
        assertEquals(100, failed.get());
        assertEquals(1, reconnected.get());
    }

    @Test
    void aCutFailsEveryMessageInFlightAndTheConnectionComesBackWithFreshCreditsWithoutResending() throws Exception {
        Transport a = nodes.start(1);
        Transport b = nodes.start(2);
        java.util.concurrent.CountDownLatch entered = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        AtomicInteger handled = new AtomicInteger();
        a.messages().register((short) 7, "held", (from, payload) -> {
            handled.incrementAndGet();
            entered.countDown();
            try {
                release.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return payload;
        });
        Connection ba = connect(b, a);
        List<CompletableFuture<?>> inFlight = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            inFlight.add(i % 2 == 0 ? ba.send((short) 7, new byte[]{(byte) i}) : ba.request((short) 7, new byte[]{1}));
        }
        assertTrue(entered.await(30, TimeUnit.SECONDS), "the first message is being handled");
        assertTrue(((TcpTransport) a).disconnect(2, "cut by the test") >= 1);
        for (CompletableFuture<?> f : inFlight) {
            NodeUnavailableException e = assertInstanceOf(NodeUnavailableException.class, failure(f),
                    "failed at once by the loss, not by the deadline");
            assertEquals(1, e.nodeId());
            assertTrue(e.mayHaveRun(), "a message on the wire at the cut may have run: " + e.getMessage());
        }
        release.countDown();
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!ba.isOpen()) {
            if (System.nanoTime() > deadline) {
                fail("the connection did not come back within " + WAIT);
            }
            Thread.sleep(10);
        }
        // the new connection has its own credits: all of them, none leaked by the lost messages
        List<CompletableFuture<byte[]>> after = new ArrayList<>();
        for (int i = 0; i < 64 * 3; i++) {
            after.add(ba.request((short) 7, new byte[]{(byte) i}));
        }
        for (int i = 0; i < after.size(); i++) {
            assertEquals((byte) i, await(after.get(i))[0]);
        }
        // at most once: the message being handled at the cut ran, the ones already in the receiver's inbox may
        // still run (their senders were told the outcome is unknown), and none ran twice or was resent
        int ran = handled.get() - after.size();
        assertTrue(ran >= 1 && ran <= inFlight.size(), "between 1 and " + inFlight.size()
                + " of the messages sent before the cut ran, each once; none was resent: ran=" + ran);
    }

    @Test
    void aTargetRestartedAtTheSameAddressIsNeverReachedThroughTheOldConnection() throws Exception {
        int port;
        try (java.net.ServerSocket probe = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = probe.getLocalPort();
        }
        Transport first = nodes.start(1, "tcp.port", Integer.toString(port));
        Transport b = nodes.start(2);
        Segment seg = first.export(SegmentSpec.of(0, 4096));
        Connection ba = connect(b, first);
        assertEquals(0L, await(ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1)));
        PeerInfo old = first.self();
        first.close();

        Transport second = nodes.start(1, "tcp.port", Integer.toString(port)); // a new incarnation, same address
        assertEquals(old.address(), second.localAddress());
        Segment again = second.export(SegmentSpec.of(0, 4096));
        // the old connection's reconnect meets the new incarnation and gives up for good
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (true) {
            Throwable t = failure(ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1));
            NodeUnavailableException e = assertInstanceOf(NodeUnavailableException.class, t);
            if (e.getMessage().contains("stale incarnation")) {
                break;
            }
            if (System.nanoTime() > deadline) {
                fail("the old connection did not close on the new incarnation: " + e.getMessage());
            }
            Thread.sleep(10);
        }
        assertFalse(ba.isOpen());
        StaleIncarnationException stale = assertThrows(StaleIncarnationException.class,
                () -> RemoteMemory.await(b.connect(old), WAIT));
        assertEquals(second.incarnation(), stale.actual());
        assertEquals(0, again.readLong(0), "the new incarnation's memory was never reached");
        assertEquals(0L, await(connect(b, second).fetchAndAdd(again.pointer(0), again.remoteKey(), 1)));
    }

    @Test
    void aVerbDroppedByTheTargetTimesOutAndLaterVerbsStillComplete() throws Exception {
        Transport a = nodes.start(1);
        // a window of one: the unanswered verb must give its slot back when its deadline passes
        Transport b = nodes.start(2, Duration.ofMillis(300), "tcp.max-in-flight", "1");
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        Connection ba = connect(b, a);
        a.faults().drop(2);
        CompletableFuture<Long> dropped = ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1);
        DsmTimeoutException timeout = assertInstanceOf(DsmTimeoutException.class, failure(dropped));
        assertEquals(1, timeout.nodeId());
        assertEquals(0, seg.readLong(0), "a dropped verb is never executed");
        a.faults().heal(2);
        assertEquals(0L, await(ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1)));
        assertEquals(1, seg.readLong(0));
        assertTrue(ba.isOpen());
    }

    @Test
    void verbsThatTimeOutOnTheWireAreForgottenSoASilentTargetCannotGrowTheWindow() throws Exception {
        Transport a = nodes.start(1);
        Transport b = nodes.start(2, Duration.ofMillis(100), "tcp.max-in-flight", "4");
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        TcpConnection ba = (TcpConnection) connect(b, a);
        a.faults().drop(2); // the target takes every verb and never answers
        for (int burst = 0; burst < 10; burst++) {
            List<CompletableFuture<Long>> fs = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                fs.add(ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1));
            }
            for (CompletableFuture<Long> f : fs) {
                assertInstanceOf(DsmTimeoutException.class, failure(f));
            }
        }
        long deadline = System.nanoTime() + WAIT.toNanos();
        int held;
        while ((held = ba.inFlightCount().get(WAIT.toSeconds(), TimeUnit.SECONDS)) > 0
                && System.nanoTime() - deadline < 0) {
            Thread.sleep(10);
        }
        assertEquals(0, held, "timed-out verbs still held in the window of a target that never answers");
        a.faults().heal(2);
        assertEquals(0, seg.readLong(0), "a dropped verb is never executed");
        // the connection serves again: a read, tried until it answers (this node's operation timeout is 100 ms,
        // which a loaded machine can exceed on a healthy connection; a read may be tried again, a FAA not)
        long until = System.nanoTime() + WAIT.toNanos();
        byte[] word = null;
        while (word == null) {
            try {
                word = await(ba.read(seg.pointer(0), seg.remoteKey(), 8));
            } catch (DsmTimeoutException e) {
                if (System.nanoTime() - until > 0) {
                    throw e;
                }
            }
        }
        assertEquals(8, word.length);
        assertTrue(ba.isOpen());
    }

    @Test
    void aLateAnswerToAForgottenVerbIsIgnoredAndTheConnectionStays() throws Exception {
        Transport a = nodes.start(1);
        Transport b = nodes.start(2, Duration.ofMillis(100), "tcp.max-in-flight", "4");
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        TcpConnection ba = (TcpConnection) connect(b, a);
        a.faults().delay(2, Duration.ofMillis(400)); // answered, but after the deadline
        List<CompletableFuture<Long>> late = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            late.add(ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1));
        }
        for (CompletableFuture<Long> f : late) {
            assertInstanceOf(DsmTimeoutException.class, failure(f));
        }
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (ba.inFlightCount().get(WAIT.toSeconds(), TimeUnit.SECONDS) > 0 && System.nanoTime() - deadline < 0) {
            Thread.sleep(10);
        }
        a.faults().heal(2);
        while (seg.readLong(0) < 3 && System.nanoTime() - deadline < 0) {
            Thread.sleep(10); // the held verbs run late at the target, and their answers go out
        }
        // on the stream behind the late answers: they arrive first and must be ignored
        assertEquals(3L, await(ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1)));
        assertTrue(ba.isOpen(), "a late answer closed the connection");
        for (CompletableFuture<Long> f : late) {
            assertInstanceOf(DsmTimeoutException.class, failure(f), "a timed-out verb was reported twice");
        }
    }

    @Test
    void closingTheTransportsLeavesNoIoThreadsAndFailsWhatWasInFlight() throws Exception {
        Transport a = nodes.start(77);
        Transport b = nodes.start(78);
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        Connection ba = connect(b, a);
        assertEquals(0L, await(ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1)));
        a.faults().delay(78, Duration.ofSeconds(60));
        CompletableFuture<Long> held = ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1);
        assertTrue(threads("membus-tcp-77-") > 0 && threads("membus-tcp-78-") > 0);
        b.close();
        assertInstanceOf(NodeUnavailableException.class, failure(held));
        a.close();
        // close() returns when the loops have terminated; a thread may take a moment more to exit after that
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("membus-tcp-77-") || t.getName().startsWith("membus-tcp-78-")) {
                t.join(WAIT.toMillis());
            }
        }
        assertEquals(0, threads("membus-tcp-77-") + threads("membus-tcp-78-"), "I/O threads alive after close()");
    }

    private static int threads(String prefix) {
        int n = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith(prefix) && t.isAlive()) {
                n++;
            }
        }
        return n;
    }

    @Test
    void aVerbTooLargeForTcpMaxFrameIsRefusedAtIssueAndTheConnectionStays() throws Exception {
        Transport a = nodes.start(1, "tcp.max-frame", "65536");
        Transport b = nodes.start(2, "tcp.max-frame", "65536");
        Segment seg = a.export(SegmentSpec.of(0, 1 << 20));
        Connection ba = connect(b, a);
        CompletableFuture<Long> before = ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1);
        io.membus.core.error.BadLengthException w = assertInstanceOf(io.membus.core.error.BadLengthException.class,
                failure(ba.write(seg.pointer(8), seg.remoteKey(), new byte[65536], 0, 65536)));
        assertEquals(65536 - Frame.HEADER_LENGTH - Frame.WRITE_FIXED_BODY_LENGTH, w.maxLength());
        io.membus.core.error.BadLengthException r = assertInstanceOf(io.membus.core.error.BadLengthException.class,
                failure(ba.read(seg.pointer(8), seg.remoteKey(), 65536)));
        assertEquals(65536 - Frame.HEADER_LENGTH, r.maxLength());
        assertEquals(0L, await(before), "a verb issued before the refused ones");
        assertEquals(1L, await(ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1)));
        assertEquals(65536 - Frame.HEADER_LENGTH, await(ba.read(seg.pointer(0), seg.remoteKey(),
                65536 - Frame.HEADER_LENGTH)).length);
        assertTrue(ba.isOpen());
    }

    @Test
    void aBurstOfLargeReadsIsAnsweredWithoutBufferingEveryAnswerOnTheTarget() throws Exception {
        // 280 reads of 4 MiB in one write: 1.1 GiB of answers, more than this JVM's direct memory (-Xmx1g). The
        // target must stream them out as the peer takes them, not build them all in one batch buffer.
        Transport a = nodes.start(1);
        int size = 4 << 20;
        int n = 280;
        Segment seg = a.export(SegmentSpec.of(0, size));
        seg.writeLong(size - 8, 42);
        try (RawPeer p = new RawPeer(a.localAddress(), 30_000)) {
            assertEquals(Frame.OP_WELCOME, RawPeer.wrap(p.handshake(RawPeer.secret(Nodes.SECRET), 2, 42, 1,
                    a.incarnation())).opcode());
            p.send(b -> {
                for (int i = 1; i <= n; i++) {
                    Frame.writeRead(b, i, seg.pointer(0), seg.remoteKey(), size);
                }
            });
            for (int i = 1; i <= n; i++) {
                Frame f = p.readHeaderSkippingBody();
                assertTrue(f != null, "the target closed the connection after " + (i - 1) + " answers");
                assertEquals(Frame.OP_OK, f.opcode());
                assertEquals(i, f.correlationId());
                assertEquals(size, f.bodyLength());
            }
        }
    }

    @Test
    void aSmallWindowKeepsIssueOrderAndExactValues() throws Exception {
        Transport a = nodes.start(1);
        Transport b = nodes.start(2, "tcp.max-in-flight", "4");
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        Connection ba = connect(b, a);
        a.faults().delay(2, Duration.ofMillis(1));
        int n = 300;
        // the contract: when a verb's future completes, every verb issued before it has completed. (A list of
        // callback invocations would not show it: a thread waiting in get() may run a callback itself.)
        AtomicInteger outOfOrder = new AtomicInteger();
        List<CompletableFuture<Long>> adds = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            CompletableFuture<Long> previous = i == 0 ? null : adds.get(i - 1);
            CompletableFuture<Long> f = ba.fetchAndAdd(seg.pointer(8), seg.remoteKey(), 1);
            f.whenComplete((v, e) -> {
                if (previous != null && !previous.isDone()) {
                    outOfOrder.incrementAndGet();
                }
            });
            adds.add(f);
        }
        for (int i = 0; i < n; i++) {
            assertEquals((long) i, await(adds.get(i)));
        }
        assertEquals(0, outOfOrder.get(), "verbs that completed before an earlier one");
        assertEquals(n, seg.readLong(8));
    }

    @Test
    void aKilledTargetProcessFailsVerbsWithNodeUnavailableNeverByDeadline() throws Exception {
        Transport b = nodes.start(2);
        try (TestJvm jvm = new TestJvm()) {
            Process child = jvm.start(TcpNodeChild.class, List.of("1", Nodes.SECRET));
            String ready = awaitLine(jvm, 0, "READY ");
            String[] f = ready.split(" ");
            PeerInfo target = new PeerInfo(1, Long.parseLong(f[1]), f[2]);
            long key = Long.parseLong(f[3]);
            long ptr = RemotePtr.pack(1, 0, 0);
            Connection c = RemoteMemory.await(b.connect(target), WAIT);
            assertEquals(0L, await(c.fetchAndAdd(ptr, key, 1)));

            List<CompletableFuture<Long>> inFlight = new ArrayList<>();
            for (int i = 0; i < 2000; i++) {
                inFlight.add(c.fetchAndAdd(ptr, key, 1));
            }
            child.destroyForcibly();
            long succeeded = 0;
            long previous = 0;
            for (CompletableFuture<Long> v : inFlight) {
                Throwable t = failure(v);
                if (t == null) {
                    long old = v.join();
                    assertTrue(old > previous, "values grow in issue order");
                    previous = old;
                    succeeded++;
                } else {
                    NodeUnavailableException e = assertInstanceOf(NodeUnavailableException.class, t);
                    assertEquals(1, e.nodeId());
                }
            }
            assertTrue(child.waitFor(30, TimeUnit.SECONDS));
            // after the loss: verbs fail at once (the connection is down), and connecting again fails
            NodeUnavailableException after = assertThrows(NodeUnavailableException.class,
                    () -> RemoteMemory.await(c.fetchAndAdd(ptr, key, 1), WAIT));
            assertEquals(1, after.nodeId());
            assertFalse(c.isOpen());
            assertThrows(NodeUnavailableException.class, () -> RemoteMemory.await(b.connect(target), WAIT));
            System.out.println("verbs completed before the kill: " + succeeded + " of " + inFlight.size());
        }
    }

    private static String awaitLine(TestJvm jvm, int child, String prefix) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            for (String line : jvm.output(child).split("\n")) {
                if (line.startsWith(prefix)) {
                    return line.trim();
                }
            }
            Thread.sleep(20);
        }
        throw new AssertionError("child did not print " + prefix + " within " + WAIT + ":\n" + jvm.output(child));
    }

    private static <T> T await(CompletableFuture<T> f) {
        return RemoteMemory.await(f, WAIT);
    }
}
