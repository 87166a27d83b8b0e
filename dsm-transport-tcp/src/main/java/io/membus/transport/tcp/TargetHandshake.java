package io.membus.transport.tcp;

import io.membus.core.auth.PeerAuth;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.transport.message.HandshakeRecord;
import io.netty.buffer.ByteBuf;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The target's side of the handshake of one accepted connection, as decisions: what
 * to answer a HELLO (the CHALLENGE with this node's proof), and whether an AUTH is
 * admitted (the initiator's proof under the cluster secret, the node and incarnation
 * it asked for, fencing, a newer incarnation of the initiator). Both ways a target
 * serves a connection use it: the Netty channel ({@link ServerHandler}) and the
 * blocking lane server ({@link LaneServer}); each writes the frames its own way. The
 * frames' bodies are dsm-core {@link HandshakeRecord}s: a refusal is a
 * {@link HandshakeRecord.Refusal}, sent in a REFUSED frame.
 *
 * <p><b>Note:</b> not thread-safe: one per connection, used by the thread that serves it.
 */
final class TargetHandshake {
    private static final Logger LOG = LoggerFactory.getLogger(TargetHandshake.class);

    private final TcpTransport transport;
    private final String peer;
    private int initiatorNode = -1;
    private long claimedIncarnation;
    private int targetNodeClaimed;
    private long targetIncarnationClaimed;
    private byte[] clientNonce;
    private byte[] serverNonce;

    TargetHandshake(TcpTransport transport, String peer) {
        this.transport = transport;
        this.peer = peer;
    }

    /** The node the HELLO claimed (trusted only once {@link #auth} admitted it); -1 before a HELLO. */
    int initiatorNode() {
        return initiatorNode;
    }

    /** The incarnation the HELLO claimed (trusted only once {@link #auth} admitted it). */
    long claimedIncarnation() {
        return claimedIncarnation;
    }

    /**
     * Takes a HELLO ({@code frame}, validated, opcode HELLO) and writes the CHALLENGE into
     * {@code out} (nothing when it throws).
     *
     * @throws io.membus.core.error.ProtocolException when its record is malformed or of another version
     */
    void hello(Frame frame, ByteBuf out) {
        HandshakeRecord.Hello hello = (HandshakeRecord.Hello) frame.handshakeRecord(peer);
        initiatorNode = hello.node();
        claimedIncarnation = hello.incarnation();
        targetNodeClaimed = hello.targetNode();
        targetIncarnationClaimed = hello.targetIncarnation();
        clientNonce = hello.nonce();
        serverNonce = PeerAuth.nonce();
        byte[] proof = transport.handshake.proof(PeerAuth.Role.TARGET, initiatorNode, claimedIncarnation,
                transport.nodeId(), transport.incarnation(), clientNonce, serverNonce);
        Frame.writeChallenge(out, transport.nodeId(), transport.incarnation(), serverNonce, proof);
    }

    /**
     * Checks an AUTH ({@code frame}, validated, opcode AUTH) after {@link #hello}: null when
     * the initiator is admitted (and recorded with {@link TcpTransport#admitInitiator}, which
     * closes the connections of its earlier incarnations other than {@code owner}), else
     * why it is refused (the text already logged where it always was).
     *
     * @throws io.membus.core.error.ProtocolException when its record is malformed or of another version
     */
    HandshakeRecord.Refusal auth(Frame frame, Object owner) {
        byte[] received = ((HandshakeRecord.Auth) frame.handshakeRecord(peer)).proof();
        byte[] expected = transport.handshake.proof(PeerAuth.Role.INITIATOR, initiatorNode, claimedIncarnation,
                transport.nodeId(), transport.incarnation(), clientNonce, serverNonce);
        if (!PeerAuth.matches(expected, received)) {
            AuthenticationException e = new AuthenticationException(peer + " (claims node " + initiatorNode + ")",
                    "reason=the client proof does not verify under this node's cluster secret");
            transport.refusals.warn(e.getMessage() + "; disconnected");
            return refusal(ErrorCode.AUTHENTICATION, 0, e.getMessage());
        }
        if (targetNodeClaimed != transport.nodeId()) {
            return refusal(ErrorCode.NODE_UNAVAILABLE, 0, "this address serves node " + transport.nodeId()
                    + ", not node " + targetNodeClaimed + "; the directory entry of node " + targetNodeClaimed
                    + " is out of date");
        }
        if (targetIncarnationClaimed != transport.incarnation()) {
            StaleIncarnationException e = new StaleIncarnationException(transport.nodeId(), targetIncarnationClaimed,
                    transport.incarnation());
            LOG.info("peer node {} at {} asked for an earlier incarnation: {}", initiatorNode, peer, e.getMessage());
            return refusal(ErrorCode.STALE_INCARNATION, transport.incarnation(), e.getMessage());
        }
        String fence = transport.fenceReason(initiatorNode);
        if (fence != null) {
            return new HandshakeRecord.Refusal(ErrorCode.NODE_UNAVAILABLE, HandshakeRecord.REASON_FENCED, 0,
                    "node " + transport.nodeId() + " fenced node " + initiatorNode + ": " + fence);
        }
        if (!transport.serving()) {
            return refusal(ErrorCode.NODE_UNAVAILABLE, 0, "node " + transport.nodeId() + " is shutting down");
        }
        long newer = transport.admitInitiator(initiatorNode, claimedIncarnation, owner);
        if (newer != 0) {
            StaleIncarnationException e = new StaleIncarnationException(initiatorNode, claimedIncarnation, newer);
            transport.refusals.warn("peer " + peer + " authenticated as an earlier incarnation of node "
                    + initiatorNode + ": " + e.getMessage());
            return refusal(ErrorCode.STALE_INCARNATION, newer, e.getMessage());
        }
        return null;
    }

    /** A refusal without reason bits. */
    static HandshakeRecord.Refusal refusal(ErrorCode code, long detail, String text) {
        return new HandshakeRecord.Refusal(code, 0, detail, text);
    }
}
