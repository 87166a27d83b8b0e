package io.membus.transport.tcp;

import io.membus.core.auth.PeerAuth;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Peer authentication: a peer that has not proven it holds the cluster secret
 * is disconnected and none of its frames runs; the handshake binds both node
 * identities and incarnations.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpAuthTest {
    private final Nodes nodes = new Nodes();

    @AfterEach
    void close() {
        nodes.close();
    }

    private static Connection connect(Transport from, PeerInfo to) {
        return RemoteMemory.await(from.connect(to), Duration.ofSeconds(20));
    }

    @Test
    void aNodeWithAnotherSecretIsRefusedAndNothingRuns() {
        Transport a = nodes.start(1);
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        Transport intruder = nodes.start(2, "tcp.secret", "another-secret-of-enough-length");
        AuthenticationException e = assertThrows(AuthenticationException.class, () -> connect(intruder, a.self()));
        assertTrue(e.getMessage().startsWith("authentication failed: peer=node 1"), e.getMessage());
        assertTrue(e.getMessage().contains("same cluster secret"), e.getMessage());
        assertEquals(0, seg.readLong(0));
        // the node keeps serving peers with the right secret
        Transport friend = nodes.start(3);
        assertEquals(0L, RemoteMemory.await(connect(friend, a.self()).fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1),
                Duration.ofSeconds(20)));
    }

    @Test
    void aWrongClientProofIsRefusedWithAnErrorAndTheConnectionClosed() throws Exception {
        Transport a = nodes.start(1);
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        try (RawPeer p = new RawPeer(a.localAddress(), 10_000)) {
            byte[] answer = p.handshake(RawPeer.secret("not-the-cluster-secret!!"), 2, 5, 1, a.incarnation());
            assertEquals(Frame.OP_REFUSED, RawPeer.wrap(answer).opcode(), "a handshake's refusal record");
            assertEquals(ErrorCode.AUTHENTICATION.wire(), RawPeer.errorCode(answer));
            assertTrue(RawPeer.errorMessage(answer).contains("the client proof does not verify"),
                    RawPeer.errorMessage(answer));
            // a verb sent right after is never executed: the node stopped reading
            p.send(b -> Frame.writeFaa(b, 1, seg.pointer(0), seg.remoteKey(), 1));
            p.awaitClosed();
        }
        assertEquals(0, seg.readLong(0));
    }

    @Test
    void aHelloRecordOfAnotherVersionIsAProtocolErrorNamingBothVersions() throws Exception {
        Transport a = nodes.start(1);
        try (RawPeer p = new RawPeer(a.localAddress(), 10_000)) {
            p.send(b -> {
                int start = b.writerIndex();
                Frame.writeHello(b, 2, 5, 1, a.incarnation(), io.membus.core.auth.PeerAuth.nonce());
                b.setByte(start + Frame.HEADER_LENGTH + io.membus.core.transport.message.HandshakeRecord.VERSION_OFFSET, 9);
            });
            byte[] answer = p.readFrame();
            assertEquals(Frame.OP_ERROR, RawPeer.wrap(answer).opcode(), "a bad frame: tcp's own ERROR frame");
            assertEquals(ErrorCode.PROTOCOL.wire(), RawPeer.errorCode(answer));
            assertTrue(RawPeer.errorMessage(answer).contains("handshake record version=9, supported=1: mixed-version"
                    + " clusters are not supported"), RawPeer.errorMessage(answer));
            p.awaitClosed();
        }
    }

    @Test
    void verbsBeforeTheHandshakeAreNeverExecuted() throws Exception {
        Transport a = nodes.start(1);
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        // the right pointer and key, but no handshake at all
        try (RawPeer p = new RawPeer(a.localAddress(), 10_000)) {
            p.sendVerbBeforeHelloAndExpectRefusal(seg.pointer(0), seg.remoteKey());
        }
        // HELLO, then a verb instead of AUTH
        try (RawPeer p = new RawPeer(a.localAddress(), 10_000)) {
            assertEquals(Frame.OP_CHALLENGE, RawPeer.wrap(p.hello(2, 5, 1, a.incarnation())).opcode());
            p.send(b -> Frame.writeWrite(b, 1, seg.pointer(0), seg.remoteKey(), new byte[]{9, 9, 9, 9}, 0, 4));
            assertEquals(ErrorCode.PROTOCOL.wire(), RawPeer.errorCode(p.readFrame()));
            p.awaitClosed();
        }
        assertEquals(0, seg.readLong(0));
    }

    @Test
    void anUnauthenticatedPeerCannotMakeTheNodeBufferALargeFrame() throws Exception {
        Transport a = nodes.start(1);
        try (RawPeer p = new RawPeer(a.localAddress(), 10_000)) {
            // a length far below tcp.max-frame, but far above any handshake frame: refused from its header alone
            p.send(b -> b.writeIntLE(100_000).writeZero(12));
            byte[] answer = p.readFrame();
            assertEquals(ErrorCode.PROTOCOL.wire(), RawPeer.errorCode(answer));
            assertTrue(RawPeer.errorMessage(answer).contains("frameLength=100000, allowed=12..1060 (before the handshake)"),
                    RawPeer.errorMessage(answer));
            p.awaitClosed();
        }
    }

    @Test
    void aReplayedHandshakeDoesNotAuthenticate() throws Exception {
        Transport a = nodes.start(1);
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        byte[] secret = RawPeer.secret(Nodes.SECRET);
        // an eavesdropper records a genuine handshake...
        byte[] recordedHello;
        byte[] recordedAuth;
        try (RawPeer genuine = new RawPeer(a.localAddress(), 10_000)) {
            byte[] challenge = genuine.hello(2, 7, 1, a.incarnation());
            Frame c = RawPeer.wrap(challenge);
            byte[] proof = new PeerAuth(secret, "tcp").proof(PeerAuth.Role.INITIATOR, 2, 7, 1, a.incarnation(), genuine.clientNonce,
                    c.bytesAt(Frame.CHALLENGE_NONCE_FIELD_OFFSET, Frame.NONCE_LENGTH));
            byte[] nonce = genuine.clientNonce;
            recordedHello = bytes(b -> Frame.writeHello(b, 2, 7, 1, a.incarnation(), nonce));
            recordedAuth = bytes(b -> Frame.writeAuth(b, proof));
            genuine.send(recordedAuth);
            assertEquals(Frame.OP_WELCOME, RawPeer.wrap(genuine.readFrame()).opcode(), "the genuine peer is welcome");
        }
        // ...and replays it on a new connection, followed by a verb
        try (RawPeer replay = new RawPeer(a.localAddress(), 10_000)) {
            replay.send(recordedHello);
            assertEquals(Frame.OP_CHALLENGE, RawPeer.wrap(replay.readFrame()).opcode());
            replay.send(recordedAuth);
            replay.send(b -> Frame.writeFaa(b, 1, seg.pointer(0), seg.remoteKey(), 1));
            byte[] answer = replay.readFrame();
            assertEquals(ErrorCode.AUTHENTICATION.wire(), RawPeer.errorCode(answer), "a fresh nonce defeats the replay");
            replay.awaitClosed();
        }
        assertEquals(0, seg.readLong(0), "the replayed peer's verb never ran");
    }

    private static byte[] bytes(java.util.function.Consumer<io.netty.buffer.ByteBuf> writer) {
        io.netty.buffer.ByteBuf b = io.netty.buffer.Unpooled.buffer();
        writer.accept(b);
        byte[] out = new byte[b.readableBytes()];
        b.readBytes(out);
        b.release();
        return out;
    }

    @Test
    void staleIncarnationsAreRefusedOnBothSides() throws Exception {
        Transport a = nodes.start(1);
        Transport b = nodes.start(2);
        // the initiator expects an earlier incarnation of the target
        StaleIncarnationException e = assertThrows(StaleIncarnationException.class,
                () -> connect(b, new PeerInfo(1, a.incarnation() - 1, a.localAddress())));
        assertEquals(a.incarnation(), e.actual());
        // the target checks it too, for a peer that does not check itself
        byte[] secret = RawPeer.secret(Nodes.SECRET);
        try (RawPeer p = new RawPeer(a.localAddress(), 10_000)) {
            byte[] answer = p.handshake(secret, 2, b.incarnation(), 1, a.incarnation() - 5);
            assertEquals(ErrorCode.STALE_INCARNATION.wire(), RawPeer.errorCode(answer));
            assertEquals(a.incarnation(), RawPeer.errorDetail(answer));
            p.awaitClosed();
        }
        // an initiator that authenticates as an earlier incarnation of a node the target has seen
        connect(b, a.self());
        try (RawPeer p = new RawPeer(a.localAddress(), 10_000)) {
            byte[] answer = p.handshake(secret, 2, b.incarnation() - 1, 1, a.incarnation());
            assertEquals(ErrorCode.STALE_INCARNATION.wire(), RawPeer.errorCode(answer));
            assertTrue(RawPeer.errorMessage(answer).contains("stale incarnation: node=2"), RawPeer.errorMessage(answer));
            p.awaitClosed();
        }
        // a wrong node id at the address is refused too
        try (RawPeer p = new RawPeer(a.localAddress(), 10_000)) {
            byte[] answer = p.handshake(secret, 2, b.incarnation(), 9, a.incarnation());
            assertEquals(ErrorCode.NODE_UNAVAILABLE.wire(), RawPeer.errorCode(answer));
            assertTrue(RawPeer.errorMessage(answer).contains("serves node 1, not node 9"), RawPeer.errorMessage(answer));
        }
    }

    @Test
    void aPeerThatNeverHandshakesIsDisconnected() throws Exception {
        Transport a = nodes.start(1, "tcp.handshake-timeout", "200ms");
        try (RawPeer p = new RawPeer(a.localAddress(), 20_000)) {
            p.awaitClosed();
        }
        try (RawPeer p = new RawPeer(a.localAddress(), 20_000)) {
            assertEquals(Frame.OP_CHALLENGE, RawPeer.wrap(p.hello(2, 5, 1, a.incarnation())).opcode());
            p.awaitClosed(); // HELLO alone does not keep a connection
        }
    }

    @Test
    void aFloodOfUnauthenticatedConnectionsIsBoundedAndAuthenticatedOnesDoNotCount() throws Exception {
        Transport a = nodes.start(1, "tcp.handshake-timeout", "30s", "tcp.max-handshaking", "2");
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        try (RawPeer p1 = new RawPeer(a.localAddress(), 10_000); RawPeer p2 = new RawPeer(a.localAddress(), 10_000)) {
            assertEquals(Frame.OP_CHALLENGE, RawPeer.wrap(p1.hello(2, 5, 1, a.incarnation())).opcode());
            assertEquals(Frame.OP_CHALLENGE, RawPeer.wrap(p2.hello(2, 6, 1, a.incarnation())).opcode());
            // beyond the slots the next connections of this source wait unread (as many as the slots), and the
            // one after them is closed at once, not after 30 s
            try (RawPeer p3 = new RawPeer(a.localAddress(), 400); RawPeer p4 = new RawPeer(a.localAddress(), 400);
                 RawPeer p5 = new RawPeer(a.localAddress(), 10_000)) {
                p5.awaitClosed();
                p3.send(b -> Frame.writeHello(b, 2, 7, 1, a.incarnation(), io.membus.core.auth.PeerAuth.nonce()));
                assertThrows(java.net.SocketTimeoutException.class, p3::readFrame, "a waiting connection is not read");
                p1.close(); // its slot goes to the oldest waiting connection
                p3.socket.setSoTimeout(10_000);
                assertEquals(Frame.OP_CHALLENGE, RawPeer.wrap(p3.readFrame()).opcode(), "admitted when a slot freed");
                assertEquals(1, ((TcpTransport) a).slots.waiting(), "p4 still waits");
            }
        }
        // the two slots free up as the node sees the closes; then a real peer gets in
        Transport b = nodes.start(3);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        Connection ba = null;
        while (ba == null) {
            try {
                ba = connect(b, a.self());
            } catch (io.membus.core.error.NodeUnavailableException e) {
                if (System.nanoTime() - deadline > 0) {
                    throw e;
                }
                Thread.sleep(20);
            }
        }
        assertEquals(0L, RemoteMemory.await(ba.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1),
                Duration.ofSeconds(20)));
        // an authenticated connection holds no handshake slot
        try (RawPeer p4 = new RawPeer(a.localAddress(), 10_000); RawPeer p5 = new RawPeer(a.localAddress(), 10_000)) {
            assertEquals(Frame.OP_CHALLENGE, RawPeer.wrap(p4.hello(2, 7, 1, a.incarnation())).opcode());
            assertEquals(Frame.OP_CHALLENGE, RawPeer.wrap(p5.hello(2, 8, 1, a.incarnation())).opcode());
        }
    }

    @Test
    void aDroppedPeerThatDoesNotReadIsStillDisconnected() throws Exception {
        Transport a = nodes.start(1, "tcp.handshake-timeout", "300ms");
        Segment seg = a.export(SegmentSpec.of(0, 1 << 20));
        try (RawPeer p = new RawPeer(a.localAddress(), 10_000)) {
            assertEquals(Frame.OP_WELCOME, RawPeer.wrap(p.handshake(RawPeer.secret(Nodes.SECRET), 2, 42, 1,
                    a.incarnation())).opcode());
            // one fetch-and-add, then 32 MiB of reads whose answers this peer never takes: the node's socket
            // and outbound buffer fill, so a goodbye frame cannot leave
            p.send(b -> {
                Frame.writeFaa(b, 1, seg.pointer(0), seg.remoteKey(), 1);
                for (int i = 0; i < 2048; i++) {
                    Frame.writeRead(b, 2 + i, seg.pointer(0), seg.remoteKey(), 16 * 1024);
                }
            });
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (seg.readLong(0) == 0 && System.nanoTime() - deadline < 0) {
                Thread.sleep(10);
            }
            assertEquals(1, ((TcpTransport) a).disconnect(2, "test"));
            while (((TcpTransport) a).servedCount() > 0 && System.nanoTime() - deadline < 0) {
                Thread.sleep(10);
            }
            assertEquals(0, ((TcpTransport) a).servedCount(), "a dropped peer that does not read keeps its channel");
        }
    }

    @Test
    void ipv6LoopbackAddressesWork() {
        Transport a;
        try {
            a = nodes.start(1, "tcp.host", "::1");
        } catch (io.membus.core.error.TransportUnavailableException noIpv6) {
            System.out.println("no IPv6 loopback on this machine: " + noIpv6.getMessage());
            return; // nothing to test here; every other test covers IPv4
        }
        assertTrue(a.localAddress().startsWith("[::1]:"), a.localAddress());
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        Transport b = nodes.start(2);
        assertEquals(0L, RemoteMemory.await(connect(b, a.self()).fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1),
                Duration.ofSeconds(20)));
    }

    @Test
    void theSecretIsRequiredAndLongEnough() {
        DsmConfigException missing = assertThrows(DsmConfigException.class, () -> Transports.create("tcp",
                TransportConfig.builder(1).property("tcp.port", "0").build()));
        assertEquals("membus.transports.tcp.secret", missing.key());
        assertTrue(missing.getMessage().startsWith("bad config: key=membus.transports.tcp.secret, value=<missing>"), missing.getMessage());
        DsmConfigException shortOne = assertThrows(DsmConfigException.class, () -> Transports.create("tcp",
                TransportConfig.builder(1).properties(Map.of("tcp.secret", "short", "tcp.port", "0")).build()));
        assertEquals("membus.transports.tcp.secret", shortOne.key());
        assertTrue(shortOne.getMessage().contains("5 bytes"), shortOne.getMessage());
        assertTrue(!shortOne.getMessage().contains("short"), "the message never shows the secret");
        DsmConfigException io = assertThrows(DsmConfigException.class, () -> nodes.start(1, "tcp.io", "kqueue"));
        assertEquals("membus.transports.tcp.io", io.key());
    }
}
