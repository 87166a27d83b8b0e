package io.membus.core.error;

/**
 * A message named a channel that no handler is registered for on its receiver.
 * The receiver answered with this failure instead of dropping the message; the
 * handler was not run.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class UnknownChannelException extends ChannelException {

    /** Refused before anything was sent or executed. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
    private static final long serialVersionUID = 1L;

    public UnknownChannelException(int nodeId, int channel) {
        super(ErrorCode.UNKNOWN_CHANNEL, "unknown channel: node=" + nodeId + ", channel=" + channel
                + "; register a handler for channel " + channel + " on node " + nodeId + " before sending to it", nodeId, channel);
    }
}
