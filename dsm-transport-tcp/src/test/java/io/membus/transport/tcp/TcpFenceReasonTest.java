package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeFencedException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.message.HandshakeRecord;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.DataInputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A fence is recognised by its typed reason (the FENCED bit of an ERROR frame or of a
 * REFUSED frame's handshake record, the
 * {@link NodeFencedException} type), never by the words of a message: a refusal
 * whose text does not say "fenced" still ends the reconnects, and one whose text
 * says "fenced" without the bit is an ordinary refusal.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpFenceReasonTest {
    private final Nodes nodes = new Nodes();

    @AfterEach
    void close() {
        nodes.close();
    }

    private static Frame errorFrame(int reasons, String text) {
        ByteBuf b = Unpooled.buffer();
        Frame.writeError(b, 0, ErrorCode.NODE_UNAVAILABLE.wire(), reasons, 0, 0, 0, text);
        return new Frame().wrap(b, 0);
    }

    @Test
    void theFencedBitAndNotTheTextMakesAFencedFailure() {
        PeerInfo peer = new PeerInfo(7, 1, "127.0.0.1:1");
        NodeUnavailableException bit = assertInstanceOf(NodeFencedException.class,
                ErrorFrames.decode(errorFrame(Frame.ERROR_REASON_FENCED, "go away"), peer));
        assertTrue(bit.fenced());
        assertEquals(7, bit.nodeId());
        NodeUnavailableException text = assertInstanceOf(NodeUnavailableException.class,
                ErrorFrames.decode(errorFrame(0, "node 7 fenced node 2: words only"), peer));
        assertFalse(text.fenced(), "a message's words are not a reason");
        assertFalse(text instanceof NodeFencedException);

        // a handshake's REFUSED frame: the record's FENCED bit, the same way
        assertInstanceOf(NodeFencedException.class, ErrorFrames.decode(refusedFrame(
                HandshakeRecord.REASON_FENCED, "go away"), peer));
        NodeUnavailableException refusedText = assertInstanceOf(NodeUnavailableException.class,
                ErrorFrames.decode(refusedFrame(0, "node 7 fenced node 2: words only"), peer));
        assertFalse(refusedText.fenced(), "a refusal's words are not a reason");
    }

    private static Frame refusedFrame(int reasons, String text) {
        ByteBuf b = Unpooled.buffer();
        Frame.writeRefused(b, new HandshakeRecord.Refusal(ErrorCode.NODE_UNAVAILABLE, reasons, 0, text));
        return new Frame().wrap(b, 0);
    }

    /**
     * The connection is established with a real target, which then goes away; a stand-in
     * at the same address refuses every handshake with a FENCED refusal whose text never
     * says "fenced". The connection must stop reconnecting after the first refusal.
     */
    @Test
    void aFencedRefusalWhoseTextDoesNotSayFencedEndsTheReconnects() throws Exception {
        int port;
        try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = probe.getLocalPort();
        }
        Transport target = nodes.start(1, "tcp.port", Integer.toString(port));
        Transport initiator = nodes.start(2);
        Segment seg = target.export(SegmentSpec.of(0, 4096));
        Connection c = RemoteMemory.await(initiator.connect(target.self()), Duration.ofSeconds(20));
        assertEquals(0L, RemoteMemory.await(c.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1), Duration.ofSeconds(20)));

        AtomicInteger hellos = new AtomicInteger();
        try (ServerSocket standIn = new ServerSocket()) {
            standIn.setReuseAddress(true);
            target.close();
            standIn.bind(new java.net.InetSocketAddress(InetAddress.getLoopbackAddress(), port));
            Thread server = new Thread(() -> {
                while (!standIn.isClosed()) {
                    try (Socket s = standIn.accept()) {
                        DataInputStream in = new DataInputStream(s.getInputStream());
                        byte[] len = new byte[4];
                        in.readFully(len);
                        int n = (len[0] & 0xff) | (len[1] & 0xff) << 8 | (len[2] & 0xff) << 16 | (len[3] & 0xff) << 24;
                        in.readFully(new byte[n]); // the HELLO
                        hellos.incrementAndGet();
                        ByteBuf b = Unpooled.buffer();
                        Frame.writeRefused(b, new HandshakeRecord.Refusal(ErrorCode.NODE_UNAVAILABLE,
                                HandshakeRecord.REASON_FENCED, 0, "go away, node 2")); // as a target refuses
                        byte[] bytes = new byte[b.readableBytes()];
                        b.readBytes(bytes);
                        OutputStream out = s.getOutputStream();
                        out.write(bytes);
                        out.flush();
                        s.shutdownOutput();
                        in.read(); // until the initiator closes
                    } catch (java.io.IOException e) {
                        // closed by the test, or the initiator hung up
                    }
                }
            }, "stand-in target");
            server.setDaemon(true);
            server.start();
            // reconnect backoff is 20..200 ms: without the typed reason it would knock many times in 3 s
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (hellos.get() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertEquals(1, hellos.get(), "the connection tried to reconnect to the stand-in");
            Thread.sleep(3000);
            assertEquals(1, hellos.get(), "the connection kept reconnecting after a fenced refusal");
            assertFalse(c.isOpen());
        }
    }
}
