package io.membus.transport.rdma;

import io.membus.core.auth.PeerAuth;
import io.membus.core.config.HostPort;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeFencedException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.transport.message.HandshakeRecord;
import io.membus.core.directory.PeerInfo;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.security.SecureRandom;
import java.util.List;

/**
 * The initiator's side of one rdma control channel: the TCP handshake with the target
 * (HELLO, CHALLENGE or REFUSAL, AUTH: dsm-core {@link HandshakeRecord}s, both proofs), the
 * first catalog, the RC queue pair set up through the RDMA CM (catalog pushes may come before the target's READY), and then, for the
 * connection's life, the target's catalog pushes ({@link #catalogLoop}). Every step of the
 * handshake ends by the connect deadline. One job: the control channel's wire; the
 * connection made over the queue pair is assembled by {@link RdmaTransport}.
 *
 * <p><b>Note:</b> not thread-safe: made and {@linkplain #handshake run} by the connecting
 * thread; after the handshake, only the catalog thread reads its streams. The handshake's
 * results are handed to that thread by {@link Thread#start()}, which orders them.
 */
final class ControlDial {
    private static final SecureRandom RANDOM = new SecureRandom();

    private final int nodeId;
    private final long incarnation;
    private final RdmaSettings settings;
    private final Fabric fabric;
    private final PeerInfo peer;
    /** {@code host:controlPort} and {@code host:cmPort} of the peer. */
    private final List<HostPort> parts;
    final String who;
    final Socket socket;
    private DataInputStream in;
    private DataOutputStream out;
    private byte[] nonceI;
    /** The sequence number of the target's next catalog push. */
    private long seq = 1;
    private RemoteCatalog catalog;

    /** @throws io.membus.core.error.DsmConfigException when the peer's address is not {@code host:controlPort:cmPort} */
    ControlDial(int nodeId, long incarnation, RdmaSettings settings, Fabric fabric, PeerInfo peer) {
        this.nodeId = nodeId;
        this.incarnation = incarnation;
        this.settings = settings;
        this.fabric = fabric;
        this.peer = peer;
        // host:controlPort:cmPort of an rdma node (a DsmConfigException naming the address otherwise)
        this.parts = HostPort.parse("peer address", peer.address(), 2, 1);
        this.who = "node " + peer.nodeId() + " at " + peer.address();
        this.socket = new Socket();
    }

    /** The peer's catalog, filled by the handshake and kept current by {@link #catalogLoop}. */
    RemoteCatalog catalog() {
        return catalog;
    }

    /**
     * Runs the handshake through the queue pair's set-up, every step by {@code deadline}.
     *
     * @return the connected queue pair (the caller owns it)
     * @throws java.net.SocketTimeoutException when the deadline passed
     */
    Fabric.QueuePair handshake(long deadline) throws IOException {
        socket.connect(parts.get(0).socketAddress(), millisLeft(deadline));
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(millisLeft(deadline));
        out = new DataOutputStream(new java.io.BufferedOutputStream(socket.getOutputStream()));
        in = new DataInputStream(new java.io.BufferedInputStream(socket.getInputStream()));
        nonceI = new byte[ControlFrames.NONCE_BYTES];
        RANDOM.nextBytes(nonceI);
        out.writeInt(ControlFrames.MAGIC);
        out.writeByte(ControlFrames.VERSION);
        ControlFrames.writeRecord(out, new HandshakeRecord.Hello(nodeId, incarnation, peer.nodeId(),
                peer.incarnation(), nonceI));
        out.flush();
        HandshakeRecord.Record answer = ControlFrames.readRecord(in, who, HandshakeRecord.KIND_CHALLENGE, true);
        if (answer instanceof HandshakeRecord.Refusal refusal) {
            throw refused(refusal);
        }
        HandshakeRecord.Challenge challenge = (HandshakeRecord.Challenge) answer;
        int node = challenge.node();
        long inc = challenge.incarnation();
        byte[] nonceT = challenge.nonce();
        byte[] macT = challenge.proof();
        ControlFrames.checkMac(ControlFrames.proof(settings.secret(), PeerAuth.Role.TARGET, nodeId, incarnation,
                node, inc, nonceI, nonceT), macT, who, "target proof");
        if (node != peer.nodeId() || inc != peer.incarnation()) {
            throw new StaleIncarnationException(peer.nodeId(), peer.incarnation(), inc);
        }
        ControlFrames.writeRecord(out, new HandshakeRecord.Auth(ControlFrames.proof(settings.secret(),
                PeerAuth.Role.INITIATOR, nodeId, incarnation, node, inc, nonceI, nonceT)));
        out.flush();
        byte[] session = new byte[ControlFrames.SESSION_BYTES];
        catalog = new RemoteCatalog(peer.nodeId());
        if (in.readUnsignedByte() != ControlFrames.CATALOG) {
            throw new ProtocolException(who, "expected the catalog after the handshake");
        }
        catalog.replaceAll(ControlFrames.readCatalog(in, settings.secret(), nonceI, 0, session, who));
        out.writeByte(ControlFrames.ACK);
        out.flush();
        InetSocketAddress cmTarget = parts.get(1).socketAddress();
        return fabric.connect(cmTarget, local -> {
            ControlFrames.writeCmSource(out, settings.secret(), nonceI, session, local);
            byte[] scratch = new byte[ControlFrames.SESSION_BYTES];
            while (true) { // catalog pushes may come before the target's READY
                socket.setSoTimeout(millisLeft(deadline)); // each wait ends by the connect deadline
                int kind = in.readUnsignedByte();
                if (kind == ControlFrames.CATALOG) {
                    catalog.replaceAll(ControlFrames.readCatalog(in, settings.secret(), nonceI, seq++, scratch, who));
                    out.writeByte(ControlFrames.ACK);
                    out.flush();
                } else if (kind == ControlFrames.READY) {
                    ControlFrames.readReady(in, settings.secret(), nonceI, session, local, who);
                    return;
                } else {
                    throw new ProtocolException(who, "unexpected control frame: kind=" + kind);
                }
            }
        }, deadline);
    }

    /** The typed failure of the target's refusal (nothing was sent: connecting again may help, unless fenced). */
    private DsmException refused(HandshakeRecord.Refusal refusal) {
        if (refusal.code() == ErrorCode.STALE_INCARNATION) {
            return new StaleIncarnationException(peer.nodeId(), peer.incarnation(), refusal.detail());
        }
        if (refusal.fenced()) {
            return NodeFencedException.notSent(peer.nodeId(), "refused by the peer: " + refusal.text());
        }
        return NodeUnavailableException.notSent(peer.nodeId(), "refused by the peer: " + refusal.text());
    }

    /** Applies the target's catalog pushes for the connection's life; the connection closes with the channel. */
    void catalogLoop(RdmaConnection connection) {
        byte[] token = new byte[ControlFrames.SESSION_BYTES];
        try {
            while (true) {
                int kind = in.readUnsignedByte();
                if (kind != ControlFrames.CATALOG) {
                    throw new ProtocolException(who, "unexpected control frame: kind=" + kind);
                }
                connection.catalog().replaceAll(ControlFrames.readCatalog(in, settings.secret(), nonceI, seq++, token,
                        who));
                out.writeByte(ControlFrames.ACK);
                out.flush();
            }
        } catch (IOException | DsmException e) {
            connection.close("control channel closed: " + who + " (" + e.getMessage() + ")");
        }
    }

    private static int millisLeft(long deadline) throws IOException {
        long ms = (deadline - System.nanoTime()) / 1_000_000;
        if (ms <= 0) {
            throw new java.net.SocketTimeoutException("connect deadline passed");
        }
        return (int) Math.min(ms, Integer.MAX_VALUE);
    }
}
