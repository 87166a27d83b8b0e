package io.membus.transport.tcp;

import io.membus.core.error.AuthenticationException;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeFencedException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.error.VerbException;
import io.membus.core.transport.message.HandshakeRecord;
import io.membus.core.directory.PeerInfo;

/**
 * Rebuilds the typed failure an ERROR frame from a target carries, on the initiator: a
 * verb failure through {@link VerbException#decode} (same message and fields as a local
 * one), a refusal by the frame's code and its reason bits (the {@code FENCED} bit makes a
 * {@link NodeFencedException}; the text is never parsed). A REFUSED frame (a handshake's
 * {@link HandshakeRecord.Refusal}) is rebuilt the same way from the record's code, reason
 * bits, detail and text. Used by the pipelined
 * connection ({@link TcpConnection}, {@link ClientHandler}) and the blocking lanes
 * ({@link TcpLane}).
 *
 * <p><b>Note:</b> stateless and thread-safe; it reads only the frame it is given, on the
 * caller's thread.
 */
final class ErrorFrames {
    private ErrorFrames() {
    }

    /** The typed failure an ERROR or REFUSED frame from {@code peer} carries. */
    static DsmException decode(Frame f, PeerInfo peer) {
        if (f.opcode() == Frame.OP_REFUSED) {
            HandshakeRecord.Refusal r;
            try {
                r = (HandshakeRecord.Refusal) f.handshakeRecord(peer.toString());
            } catch (ProtocolException e) {
                return e;
            }
            return refusal(r.code(), r.fenced(), r.detail(), r.text(), peer);
        }
        ErrorCode code = ErrorCode.fromWire(f.intAt(Frame.ERROR_CODE_FIELD_OFFSET) & 0xff);
        long ptr = f.longAt(Frame.ERROR_PTR_FIELD_OFFSET);
        int length = f.intAt(Frame.ERROR_LENGTH_FIELD_OFFSET);
        long detail = f.longAt(Frame.ERROR_DETAIL_FIELD_OFFSET);
        VerbException v = VerbException.decode(code, ptr, length, detail);
        if (v != null) {
            return v;
        }
        return refusal(code, (f.errorReasons() & Frame.ERROR_REASON_FENCED) != 0, detail, f.errorMessage(), peer);
    }

    /** A refusal (not a verb's failure) by its code, fenced bit, detail and text. */
    private static DsmException refusal(ErrorCode code, boolean fenced, long detail, String message, PeerInfo peer) {
        return switch (code) {
            case NODE_UNAVAILABLE -> fenced
                    ? NodeFencedException.unknownOutcome(peer.nodeId(), message)
                    : new NodeUnavailableException(peer.nodeId(), message);
            case STALE_INCARNATION -> new StaleIncarnationException(peer.nodeId(), peer.incarnation(), detail);
            case AUTHENTICATION -> new AuthenticationException(peer.toString(), "reason=refused by the peer: " + message);
            case PROTOCOL -> new ProtocolException(peer.toString(), "refused by the peer: " + message);
            default -> DsmException.decoded(code, peer.nodeId(), message.isEmpty() ? "verb failed on node "
                    + peer.nodeId() + ": code=" + code : message);
        };
    }
}
