package io.membus.transport.rdma;

import io.membus.core.Access;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.transport.message.HandshakeRecord;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What the contract suite does not cover: catalog pushes, registration, the handshake's secret, loopback. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaTransportSoftTest {
    private static final Duration WAIT = Duration.ofSeconds(20);
    private final List<Transport> nodes = new ArrayList<>();

    private Transport node(int id, String secret) {
        Transport t = Transports.create("rdma-soft", TransportConfig.builder(id)
                .property("rdma.host", "127.0.0.1").property("rdma.secret", secret).build());
        nodes.add(t);
        return t;
    }

    @AfterEach
    void close() {
        nodes.forEach(Transport::close);
    }

    private static <T> T await(CompletableFuture<T> f) {
        return RemoteMemory.await(f, WAIT);
    }

    @Test
    void segmentsExportedAfterConnectingAreReachableWhenExportReturnsAndGoneWhenUnexported() {
        Transport a = node(1, "a-secret-of-16-bytes");
        Transport b = node(2, "a-secret-of-16-bytes");
        Connection ba = await(b.connect(a.self()));
        Segment late = a.export(new SegmentSpec(5, 4096, Access.ALL, null));
        assertEquals(0L, await(ba.fetchAndAdd(late.pointer(8), late.remoteKey(), 7)),
                "the catalog push was acknowledged before export returned");
        assertEquals(7L, late.readLong(8));
        assertTrue(a.unexport(5, false));
        assertThrows(UnknownSegmentException.class, () -> await(ba.read(late.pointer(0), late.remoteKey(), 8)));
        assertTrue(ba.isOpen(), "a refused verb posts nothing and leaves the connection up");
    }

    @Test
    void concurrentExportsAndUnexportsAreEachReachableWhenTheirExportReturns() throws Exception {
        Transport a = node(1, "a-secret-of-16-bytes");
        Transport b = node(2, "a-secret-of-16-bytes");
        Connection ba = await(b.connect(a.self()));
        int threads = 6;
        int rounds = 40;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int index = 10 + t;
                done.add(pool.submit(() -> {
                    for (int r = 0; r < rounds; r++) {
                        Segment s = a.export(SegmentSpec.of(index, 4096));
                        // another thread's push must not stand in for this export's, nor its unexport
                        // deregister this segment's region before it is published
                        assertEquals(0L, await(ba.fetchAndAdd(s.pointer(0), s.remoteKey(), 1)),
                                "segment " + index + " round " + r);
                        assertTrue(a.unexport(index, false));
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertTrue(ba.isOpen());
    }

    @Test
    void closingAnOldConnectionLeavesTheNewOneOfTheSameNodeUp() {
        Transport a = node(1, "a-secret-of-16-bytes");
        Transport b = node(2, "a-secret-of-16-bytes");
        Segment s = a.export(SegmentSpec.of(0, 4096));
        for (int round = 0; round < 5; round++) {
            Connection c = await(b.connect(a.self()));
            assertEquals((long) round, await(c.fetchAndAdd(s.pointer(0), s.remoteKey(), 1)));
            c.close(); // the target releases this session's queue pair only
        }
        Connection last = await(b.connect(a.self()));
        for (int i = 0; i < 50; i++) {
            assertEquals(5L + i, await(last.fetchAndAdd(s.pointer(0), s.remoteKey(), 1)));
        }
        assertTrue(last.isOpen());
    }

    @Test
    void refusedHandshakesComeBackTypedFromTheirRefusalRecords() {
        Transport a = node(31, "a-secret-of-16-bytes");
        Transport b = node(32, "a-secret-of-16-bytes");
        StaleIncarnationException stale = assertThrows(StaleIncarnationException.class,
                () -> await(b.connect(new PeerInfo(31, a.incarnation() - 1, a.self().address()))));
        assertEquals(a.incarnation(), stale.actual(), "the refusal's detail: the target's incarnation");
        a.fence(32, "downed by the test");
        NodeUnavailableException fenced = assertThrows(NodeUnavailableException.class,
                () -> await(b.connect(a.self())));
        assertTrue(fenced.fenced(), "the refusal's FENCED bit: " + fenced.getMessage());
        assertTrue(fenced.getMessage().contains("refused by the peer: fenced: downed by the test"), fenced.getMessage());
    }

    @Test
    void aHelloRecordOfAnotherVersionIsRefusedBeforeAnythingIsAnswered() throws Exception {
        Transport a = node(33, "a-secret-of-16-bytes");
        java.net.InetSocketAddress control = io.membus.core.config.HostPort.parse("peer address", a.self().address(),
                2, 1).get(0).socketAddress();
        byte[] hello = new HandshakeRecord.Hello(34, 1, 33, a.incarnation(), new byte[32]).encode();
        hello[HandshakeRecord.VERSION_OFFSET] = 9;
        try (java.net.Socket s = new java.net.Socket()) {
            s.connect(control, 10_000);
            s.setSoTimeout(20_000);
            java.io.DataOutputStream out = new java.io.DataOutputStream(s.getOutputStream());
            out.writeInt(ControlFrames.MAGIC);
            out.writeByte(ControlFrames.VERSION);
            out.writeShort(hello.length);
            out.write(hello);
            out.flush();
            assertEquals(-1, s.getInputStream().read(), "closed without a CHALLENGE");
        }
        Transport b = node(34, "a-secret-of-16-bytes");
        assertTrue(await(b.connect(a.self())).isOpen(), "the node serves well-formed handshakes still");
    }

    @Test
    void closingNodesLeavesNoTransportThreadBehind() {
        Transport a = node(21, "a-secret-of-16-bytes");
        Transport b = node(22, "a-secret-of-16-bytes");
        Segment s = a.export(SegmentSpec.of(0, 4096));
        Segment t = b.export(SegmentSpec.of(0, 4096));
        await(await(b.connect(a.self())).fetchAndAdd(s.pointer(0), s.remoteKey(), 1));
        await(await(a.connect(b.self())).fetchAndAdd(t.pointer(0), t.remoteKey(), 1));
        a.close();
        b.close();
        assertFalse(s.isOpen() || t.isOpen(), "segments are freed with their transport");
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (true) {
            List<String> left = Thread.getAllStackTraces().keySet().stream().map(Thread::getName)
                    .filter(n -> n.startsWith("membus-rdma-") && (n.endsWith("-21") || n.endsWith("-22"))).toList();
            if (left.isEmpty()) {
                break;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("threads still alive after close: " + left);
            }
            Thread.onSpinWait();
            Thread.yield();
        }
    }

    @Test
    void aCompletionQueueThatCannotBePolledFailsItsVerbsWithNodeUnavailableAndClosesTheConnection() {
        Transport a = node(1, "a-secret-of-16-bytes");
        Transport b = node(2, "a-secret-of-16-bytes");
        Segment s = a.export(SegmentSpec.of(0, 4096));
        Connection ba = await(b.connect(a.self()));
        assertEquals(0L, await(ba.fetchAndAdd(s.pointer(0), s.remoteKey(), 1)));
        ((SoftFabric.SoftQueuePair) ((RdmaTransport) b).queuePair(ba)).failPolls = true;
        // not DsmTimeoutException after the operation timeout: the poll failure fails the verb at once
        NodeUnavailableException e = assertThrows(NodeUnavailableException.class,
                () -> await(ba.fetchAndAdd(s.pointer(0), s.remoteKey(), 1)));
        assertTrue(e.getMessage().contains("polling the completion queue failed"), e.getMessage());
        assertFalse(ba.isOpen());
        Connection again = await(b.connect(a.self()));
        long word = s.readLong(0); // 1 or 2: the failed verb may or may not have reached the NIC before the close
        assertEquals(word, await(again.fetchAndAdd(s.pointer(0), s.remoteKey(), 1)), "a new connection works");
    }

    @Test
    void theRemoteKeyCarriesTheRegionsRkeyAndARandomHighWord() {
        Transport a = node(1, "a-secret-of-16-bytes");
        Segment s1 = a.export(SegmentSpec.of(0, 4096));
        Segment s2 = a.export(SegmentSpec.of(1, 4096));
        assertTrue((s1.remoteKey() >>> 32) != 0 && (s2.remoteKey() >>> 32) != 0);
        assertTrue(CatalogEntry.rkeyOf(s1.remoteKey()) != CatalogEntry.rkeyOf(s2.remoteKey()), "one region each");
    }

    @Test
    void aPeerWithAnotherSecretIsRefused() {
        Transport a = node(1, "a-secret-of-16-bytes");
        Transport b = node(2, "another-secret-16-bytes");
        AuthenticationException e = assertThrows(AuthenticationException.class, () -> await(b.connect(a.self())));
        assertTrue(e.getMessage().contains("HMAC-SHA256 with membus.transports.rdma.secret does not match"), e.getMessage());
    }

    @Test
    void aNodeReachesItsOwnWordsThroughALoopbackConnection() {
        Transport a = node(1, "a-secret-of-16-bytes");
        assertFalse(a.localAtomicsCoherent(), "no IBV_ATOMIC_GLOB declared: CPU atomics race with the NIC's");
        Segment s = a.export(SegmentSpec.of(0, 4096));
        Connection self = await(a.connect(a.self()));
        assertEquals(0L, await(self.compareAndSwap(s.pointer(0), s.remoteKey(), 0, 9)));
        assertEquals(9L, s.readLong(0));
        Transport glob = Transports.create("rdma-soft", TransportConfig.builder(3).property("rdma.host", "127.0.0.1")
                .property("rdma.secret", "a-secret-of-16-bytes").property("rdma.atomic-glob", "true").build());
        nodes.add(glob);
        assertTrue(glob.localAtomicsCoherent());
    }

    @Test
    void fileBackedAndOversizedSegmentsAreRefusedWithTheReason() {
        Transport a = node(1, "a-secret-of-16-bytes");
        DsmConfigException file = assertThrows(DsmConfigException.class,
                () -> a.export(new SegmentSpec(0, 4096, Access.ALL, Path.of("seg0"))));
        assertTrue(file.getMessage().contains("exports native segments only"), file.getMessage());
        DsmConfigException big = assertThrows(DsmConfigException.class,
                () -> a.export(new SegmentSpec(1, 1L << 31, Access.ALL, null)));
        assertEquals("segment size", big.key());
        assertTrue(a.segments().isEmpty());
    }
}
