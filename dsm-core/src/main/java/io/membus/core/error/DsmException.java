package io.membus.core.error;

/**
 * Root of every failure Membus reports. Unchecked, like the failures of
 * {@code java.util.concurrent} collections; every subclass names its
 * {@link ErrorCode} and carries the facts of the failure as fields, and its
 * message is written as {@code key=value} pairs followed by what to do.
 *
 * <p><b>Note:</b> immutable once thrown; thread-safe.
 */
public class DsmException extends RuntimeException implements Cloneable {
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;
    /** Set on a copy made by {@link #forCaller()}: the exception as the failing thread threw it. */
    private transient DsmException thrownElsewhere;

    public DsmException(ErrorCode code, String message) {
        super(message);
        this.code = code;
    }

    public DsmException(ErrorCode code, String message, Throwable cause) {
        super(message, cause);
        this.code = code;
    }

    /**
     * A failure that has no category of its own ({@link ErrorCode#INTERNAL}); the message
     * says what happened. Every other category has its own subclass: throw that, so that
     * {@code catch (DsmTimeoutException e)} and the like see it (a test keeps
     * {@code new DsmException(...)} out of the main sources).
     */
    public static DsmException internal(String message, Throwable cause) {
        return new DsmException(ErrorCode.INTERNAL, message, cause);
    }

    /** {@link #internal(String, Throwable)} without a cause. */
    public static DsmException internal(String message) {
        return new DsmException(ErrorCode.INTERNAL, message);
    }

    /**
     * The typed failure for {@code code} that node {@code nodeId} reported with only a
     * text (a transport's error frame, a message failure): the subclass of that category
     * when it can be rebuilt from a text ({@link NodeUnavailableException},
     * {@link DsmTimeoutException}, {@link ProtocolException}, {@link AuthenticationException},
     * {@link TransportUnavailableException}, {@link NotPrimaryException} with its group, epoch
     * and hint read back from its text), else this class with the code: categories a
     * peer never reports by text alone (a verb's are rebuilt from their fields by
     * {@link VerbException#decode}, a message's by {@code MessageFailures}, a setting or a
     * wrong thread is refused before anything is sent), those whose subclass lives in
     * another module, {@link ErrorCode#NOT_RUN} and {@link ErrorCode#INTERNAL}. A peer's {@link ErrorCode#CLOSED} is something closed on
     * that node: for this node, that node is unavailable.
     */
    public static DsmException decoded(ErrorCode code, int nodeId, String message) {
        String text = message == null || message.isEmpty() ? "failed on node " + nodeId + ": code=" + code : message;
        return switch (code) {
            case NODE_UNAVAILABLE, CLOSED -> new NodeUnavailableException(nodeId, "node " + nodeId + " answered: "
                    + text);
            case TIMEOUT -> DsmTimeoutException.reported(nodeId, text);
            case PROTOCOL -> new ProtocolException("node " + nodeId, "refused by the peer: " + text);
            case AUTHENTICATION -> new AuthenticationException("node " + nodeId, "reason=refused by the peer: " + text);
            case TRANSPORT_UNAVAILABLE -> new TransportUnavailableException("(on node " + nodeId + ")", text);
            case NOT_PRIMARY -> NotPrimaryException.decoded(nodeId, text); // routing re-issues it to the hint
            default -> new DsmException(code, text);
        };
    }

    public ErrorCode code() {
        return code;
    }

    /**
     * Whether the operation that failed may have taken effect at its target. False
     * means it certainly did not (it was refused before it was sent, or the target
     * refused it before touching anything): it is safe to retry. True means the outcome
     * is unknown (a deadline fired or a connection was lost while it was in flight): a
     * retry could apply it twice, so read back first. Unknown unless a subclass knows
     * better.
     */
    public boolean mayHaveRun() {
        return true;
    }

    /**
     * A copy of this exception for a thread that waited for the failed operation:
     * the same type, fields and message, the stack of the calling thread (so the
     * caller's own frames show where it waited), and this exception, with the stack
     * of the thread that failed (an I/O or timer thread), as its
     * {@linkplain #getCause() cause}. What a blocking call throws; the original is
     * not changed, so one failure may be handed to many waiters.
     */
    public DsmException forCaller() {
        DsmException copy;
        try {
            copy = (DsmException) clone();
        } catch (CloneNotSupportedException e) {
            throw new AssertionError("DsmException is Cloneable", e);
        }
        copy.thrownElsewhere = this;
        StackTraceElement[] here = new Throwable().getStackTrace();
        copy.setStackTrace(here.length > 1 ? java.util.Arrays.copyOfRange(here, 1, here.length) : here);
        return copy;
    }

    /** The cause; for a {@link #forCaller()} copy, the exception the failing thread threw. */
    @Override
    public synchronized Throwable getCause() {
        return thrownElsewhere != null ? thrownElsewhere : super.getCause();
    }
}
