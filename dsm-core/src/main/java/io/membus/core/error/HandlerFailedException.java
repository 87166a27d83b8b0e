package io.membus.core.error;

/**
 * A message handler threw on its receiver. The receiver logged the failure and
 * answered with this exception; the connection stays open and later messages
 * are handled. {@link #failure()} is the handler's exception as text
 * ({@code Throwable.toString()}), since the exception itself stays on the receiver.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class HandlerFailedException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final int nodeId;
    private final int channel;
    private final String failure;

    public HandlerFailedException(int nodeId, int channel, String failure) {
        super(ErrorCode.HANDLER_FAILED, "message handler failed: node=" + nodeId + ", channel=" + channel
                + ", failure=" + failure + "; see the log of node " + nodeId);
        this.nodeId = nodeId;
        this.channel = channel;
        this.failure = failure;
    }

    /** The receiver whose handler threw. */
    public int nodeId() {
        return nodeId;
    }

    public int channel() {
        return channel;
    }

    public String failure() {
        return failure;
    }
}
