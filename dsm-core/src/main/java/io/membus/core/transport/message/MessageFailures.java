package io.membus.core.transport.message;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.HandlerFailedException;
import io.membus.core.error.MessageTooLargeException;
import io.membus.core.error.NodeFencedException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.UnknownChannelException;

/**
 * The wire form of a message failure — {@code (code, detail, text)} — and its
 * decoding back into the same typed exception on the sender, for transports that
 * carry failures as bytes ({@code tcp}, {@code shm}, {@code rdma}).
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class MessageFailures {
    private MessageFailures() {
    }

    /** The one number a failure carries besides its code: the channel, or size and limit packed. */
    public static long detail(DsmException e) {
        if (e instanceof UnknownChannelException u) {
            return u.channel();
        }
        if (e instanceof MessageTooLargeException m) {
            return ((long) m.size() << 32) | (m.maxSize() & 0xffffffffL);
        }
        if (e instanceof NodeUnavailableException n && n.fenced()) {
            return NodeFencedException.MESSAGE_DETAIL;
        }
        return 0;
    }

    /** The text a failure carries: a handler's failure, or the message of any other exception. */
    public static String text(DsmException e) {
        if (e instanceof HandlerFailedException h) {
            return h.failure();
        }
        return e.getMessage();
    }

    /**
     * Rebuilds the failure {@code node} answered a message on {@code channel} with.
     */
    public static DsmException decode(int node, int channel, ErrorCode code, long detail, String text) {
        return switch (code) {
            case UNKNOWN_CHANNEL -> new UnknownChannelException(node, (int) detail);
            case MESSAGE_TOO_LARGE -> new MessageTooLargeException(node, channel, (int) (detail >>> 32), (int) detail);
            case HANDLER_FAILED -> new HandlerFailedException(node, channel, text);
            case NODE_UNAVAILABLE -> detail == NodeFencedException.MESSAGE_DETAIL
                    ? NodeFencedException.unknownOutcome(node, "node " + node + " answered: " + text)
                    : new NodeUnavailableException(node, "node " + node + " answered: " + text);
            default -> DsmException.decoded(code, node, "message failed: node=" + node + ", channel=" + channel
                    + ", code=" + code + ", detail=" + text);
        };
    }
}
