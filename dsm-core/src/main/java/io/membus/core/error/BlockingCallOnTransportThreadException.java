package io.membus.core.error;

/**
 * A blocking call (a plain-named method such as {@code RemoteMemory.read}) was made
 * on a transport thread: an I/O thread, a completion poller or the deadline timer.
 * Waiting there could deadlock, since the thread that would complete the call is
 * the one waiting, so the call fails at once instead. Use the {@code *Async} form
 * and compose on its future, or hand the work to an executor of your own.
 *
 * <p><b>Note:</b> immutable once thrown; thread-safe.
 */
public final class BlockingCallOnTransportThreadException extends DsmException {

    /** Refused before anything was sent or executed. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
    private static final long serialVersionUID = 1L;

    private final String threadName;

    public BlockingCallOnTransportThreadException(String threadName) {
        super(ErrorCode.WRONG_THREAD, "blocking call on a transport thread: thread=" + threadName
                + "; waiting here could deadlock: use the *Async form and compose on its future,"
                + " or run the blocking call on an executor of your own");
        this.threadName = threadName;
    }

    public String threadName() {
        return threadName;
    }
}
