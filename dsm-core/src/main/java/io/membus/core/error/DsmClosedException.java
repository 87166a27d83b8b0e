package io.membus.core.error;

/**
 * The object was closed on this node ({@code close()} was called on it, or on the
 * node or {@code Membus} instance that owns it) and cannot be used again. Names
 * what was closed ({@link #what()}: "membus instance of node 2", "transport tcp of
 * node 2", "DsmMap 'orders'", ...). Not a configuration error, not a timeout and not
 * an unavailable node: a retry meets the same closed object, so create a new
 * instance instead. Thrown at once, before anything is sent: {@link #mayHaveRun()}
 * is false.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class DsmClosedException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String what;

    /** {@code what} names the closed object, e.g. {@code "membus instance of node 2"}. */
    public DsmClosedException(String what) {
        super(ErrorCode.CLOSED, "closed: " + what + " was closed on this node; do not use it after close():"
                + " create a new instance");
        this.what = what;
    }

    /** What was closed, as named in the message. */
    public String what() {
        return what;
    }

    /** Refused before anything was sent or executed. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
}
