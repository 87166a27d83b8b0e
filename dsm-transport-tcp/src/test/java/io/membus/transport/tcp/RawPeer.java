package io.membus.transport.tcp;

import io.membus.core.auth.PeerAuth;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.function.Consumer;

/**
 * A hand-driven peer for protocol tests: a blocking socket that sends whatever
 * bytes a test builds (valid or not) and reads frames back. It knows the
 * handshake only through {@link PeerAuth} and {@link Frame}, like a real peer.
 *
 * <p><b>Note:</b> not thread-safe; one test thread owns it.
 */
final class RawPeer implements AutoCloseable {
    final Socket socket;
    private final OutputStream out;
    private final DataInputStream in;
    byte[] clientNonce;

    RawPeer(String address, int readTimeoutMillis) throws IOException {
        socket = new Socket();
        socket.connect(io.membus.core.config.HostPort.parse("peer address", address).socketAddress(), 5000);
        socket.setSoTimeout(readTimeoutMillis);
        socket.setTcpNoDelay(true);
        out = socket.getOutputStream();
        InputStream is = socket.getInputStream();
        in = new DataInputStream(is);
    }

    /** Encodes with {@code writer} and sends. */
    void send(Consumer<ByteBuf> writer) throws IOException {
        ByteBuf b = Unpooled.buffer();
        writer.accept(b);
        byte[] bytes = new byte[b.readableBytes()];
        b.readBytes(bytes);
        b.release();
        send(bytes);
    }

    void send(byte[] bytes) throws IOException {
        out.write(bytes);
        out.flush();
    }

    /** One whole frame (its length field included), or {@code null} at end of stream. */
    byte[] readFrame() throws IOException {
        byte[] len = new byte[4];
        try {
            in.readFully(len);
        } catch (EOFException e) {
            return null;
        }
        int n = (len[0] & 0xff) | (len[1] & 0xff) << 8 | (len[2] & 0xff) << 16 | (len[3] & 0xff) << 24;
        byte[] f = new byte[4 + n];
        System.arraycopy(len, 0, f, 0, 4);
        in.readFully(f, 4, n);
        return f;
    }

    /** The header of the next frame (its body skipped), or {@code null} at end of stream. */
    Frame readHeaderSkippingBody() throws IOException {
        byte[] h = new byte[Frame.HEADER_LENGTH];
        try {
            in.readFully(h);
        } catch (EOFException e) {
            return null;
        }
        Frame f = wrap(h);
        in.skipNBytes(f.bodyLength());
        return f;
    }

    /** Reads until the peer closes; throws when it does not within the read timeout. */
    void awaitClosed() throws IOException {
        while (true) {
            try {
                if (in.read() < 0) {
                    return;
                }
            } catch (SocketTimeoutException e) {
                throw new AssertionError("the node did not close the connection", e);
            } catch (IOException e) {
                return; // reset by the node: closed too
            }
        }
    }

    /**
     * Sends a fetch-and-add before any handshake and checks that the node answers with a
     * PROTOCOL error that names the missing HELLO, then closes the connection.
     */
    void sendVerbBeforeHelloAndExpectRefusal(long ptr, long remoteKey) throws IOException {
        send(b -> Frame.writeFaa(b, 1, ptr, remoteKey, 1));
        byte[] answer = readFrame();
        if (answer == null || errorCode(answer) != io.membus.core.error.ErrorCode.PROTOCOL.wire()
                || !errorMessage(answer).contains("before the handshake (expected HELLO)")) {
            throw new AssertionError("expected a PROTOCOL error naming the missing HELLO, got "
                    + (answer == null ? "the end of the stream" : wrap(answer).opcode() + ": " + errorMessage(answer)));
        }
        awaitClosed();
    }

    static Frame wrap(byte[] frame) {
        return new Frame().wrap(Unpooled.wrappedBuffer(frame), 0);
    }

    /** The text of an ERROR frame, or of a REFUSED frame's record. */
    static String errorMessage(byte[] frame) {
        Frame f = wrap(frame);
        return f.opcode() == Frame.OP_REFUSED ? refusal(frame).text() : f.errorMessage();
    }

    /** The code of an ERROR frame, or of a REFUSED frame's record. */
    static int errorCode(byte[] frame) {
        Frame f = wrap(frame);
        return f.opcode() == Frame.OP_REFUSED ? refusal(frame).code().wire() & 0xff
                : f.intAt(Frame.ERROR_CODE_FIELD_OFFSET) & 0xff;
    }

    /** The detail of an ERROR frame, or of a REFUSED frame's record. */
    static long errorDetail(byte[] frame) {
        Frame f = wrap(frame);
        return f.opcode() == Frame.OP_REFUSED ? refusal(frame).detail() : f.longAt(Frame.ERROR_DETAIL_FIELD_OFFSET);
    }

    /** The refusal record of a REFUSED frame (a ProtocolException for anything else). */
    static io.membus.core.transport.message.HandshakeRecord.Refusal refusal(byte[] frame) {
        Frame f = wrap(frame);
        if (f.opcode() != Frame.OP_REFUSED) {
            throw new AssertionError("expected REFUSED, got " + Frame.opName(f.opcode()));
        }
        return (io.membus.core.transport.message.HandshakeRecord.Refusal) f.handshakeRecord("the target");
    }

    /** Sends HELLO, reads CHALLENGE; returns it. */
    byte[] hello(int nodeId, long incarnation, int targetNode, long targetIncarnation) throws IOException {
        clientNonce = PeerAuth.nonce();
        send(b -> Frame.writeHello(b, nodeId, incarnation, targetNode, targetIncarnation, clientNonce));
        return readFrame();
    }

    /**
     * A full handshake with {@code secret}.
     *
     * @return the frame that answered AUTH (WELCOME, REFUSED, or ERROR for a bad frame); after WELCOME the node's message credit grant
     * (CREDIT) is read too, so the next frame is an answer to this peer's first request
     */
    byte[] handshake(byte[] secret, int nodeId, long incarnation, int targetNode, long targetIncarnation)
            throws IOException {
        return handshake(secret, nodeId, incarnation, targetNode, targetIncarnation, true);
    }

    /** A full handshake with {@code secret} on a node's lane server, which grants no message credits. */
    byte[] laneHandshake(byte[] secret, int nodeId, long incarnation, int targetNode, long targetIncarnation)
            throws IOException {
        return handshake(secret, nodeId, incarnation, targetNode, targetIncarnation, false);
    }

    private byte[] handshake(byte[] secret, int nodeId, long incarnation, int targetNode, long targetIncarnation,
                             boolean credits) throws IOException {
        byte[] challenge = hello(nodeId, incarnation, targetNode, targetIncarnation);
        Frame c = wrap(challenge);
        if (c.opcode() != Frame.OP_CHALLENGE) {
            return challenge;
        }
        byte[] serverNonce = c.bytesAt(Frame.CHALLENGE_NONCE_FIELD_OFFSET, Frame.NONCE_LENGTH);
        byte[] proof = new PeerAuth(secret, "tcp").proof(PeerAuth.Role.INITIATOR, nodeId, incarnation,
                c.intAt(Frame.CHALLENGE_NODE_FIELD_OFFSET), c.longAt(Frame.CHALLENGE_INCARNATION_FIELD_OFFSET),
                clientNonce, serverNonce);
        send(b -> Frame.writeAuth(b, proof));
        byte[] answer = readFrame();
        if (credits && answer != null && wrap(answer).opcode() == Frame.OP_WELCOME) {
            byte[] credit = readFrame();
            if (credit == null || wrap(credit).opcode() != Frame.OP_MSG_CREDIT) {
                throw new AssertionError("WELCOME was not followed by the message credit grant");
            }
        }
        return answer;
    }

    static byte[] secret(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
