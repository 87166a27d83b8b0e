package io.membus.core.error;

/**
 * A failure of a two-sided message on one channel of one receiver: the shape that
 * {@link UnknownChannelException}, {@link MessageTooLargeException} and
 * {@link HandlerFailedException} share. Catch it to handle every message-channel
 * failure at once; {@link #nodeId()} and {@link #channel()} say where.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public abstract class ChannelException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final int nodeId;
    private final int channel;

    protected ChannelException(ErrorCode code, String message, int nodeId, int channel) {
        super(code, message);
        this.nodeId = nodeId;
        this.channel = channel;
    }

    /** The receiving node the failure concerns. */
    public int nodeId() {
        return nodeId;
    }

    public int channel() {
        return channel;
    }
}
