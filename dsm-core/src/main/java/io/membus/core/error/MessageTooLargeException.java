package io.membus.core.error;

/**
 * A message or a reply is larger than its receiver's maximum message size
 * ({@code membus.transports.messages.max-size}). Refused before anything was sent or run.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class MessageTooLargeException extends ChannelException {

    /** Refused before anything was sent or executed. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
    private static final long serialVersionUID = 1L;

    private final int size;
    private final int maxSize;

    public MessageTooLargeException(int nodeId, int channel, int size, int maxSize) {
        super(ErrorCode.MESSAGE_TOO_LARGE, "message too large: node=" + nodeId + ", channel=" + channel + ", size="
                + size + ", maxSize=" + maxSize + "; split the payload, or put it in remote memory and send its pointer,"
                + " or raise membus.transports.messages.max-size on every node", nodeId, channel);
        this.size = size;
        this.maxSize = maxSize;
    }

    public int size() {
        return size;
    }

    public int maxSize() {
        return maxSize;
    }
}
