package io.membus.core.error;

/**
 * A message handler threw on its receiver. The receiver logged the failure and
 * answered with this exception; the connection stays open and later messages
 * are handled. {@link #failure()} is the handler's exception as text
 * ({@code Throwable.toString()}), since the exception itself stays on the receiver.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class HandlerFailedException extends ChannelException {
    private static final long serialVersionUID = 1L;

    private final String failure;

    public HandlerFailedException(int nodeId, int channel, String failure) {
        super(ErrorCode.HANDLER_FAILED, "message handler failed: node=" + nodeId + ", channel=" + channel
                + ", failure=" + failure + "; see the log of node " + nodeId, nodeId, channel);
        this.failure = failure;
    }

    public String failure() {
        return failure;
    }
}
