package io.membus.core.transport;

import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadFactory;

/**
 * Marks the threads transports own (I/O threads, completion pollers, the deadline
 * timer) so that blocking calls can refuse to run on them (see
 * {@link io.membus.core.error.BlockingCallOnTransportThreadException}): a verb
 * awaited on the thread that must complete it would deadlock.
 *
 * <p><b>Note:</b> thread-safe; the mark is a thread-local set by the marked thread
 * itself before it runs anything else.
 */
public final class TransportThreads {
    private static final ThreadLocal<Boolean> MARK = new ThreadLocal<>();
    private static final ThreadLocal<Executor> TURN = new ThreadLocal<>();
    private static final ThreadLocal<Boolean> SERVES_BLOCKING = new ThreadLocal<>();

    private TransportThreads() {
    }

    /** Marks the calling thread as a transport thread for the rest of its life. */
    public static void markCurrentThread() {
        MARK.set(Boolean.TRUE);
    }

    /** Whether the calling thread is a transport thread. */
    public static boolean isTransportThread() {
        return MARK.get() == Boolean.TRUE;
    }

    /**
     * Says that the calling thread is an event loop whose {@code loop} runs a task handed to
     * it from this thread after the I/O of the current turn (Netty's event loop: a task
     * queued from inside the loop runs once the selected channels were read, on this very
     * thread, with no wake-up). Set by a transport on its I/O threads; see
     * {@link #runAfterTurn}.
     */
    public static void setTurnExecutor(Executor loop) {
        TURN.set(loop);
    }

    /**
     * Hands {@code task} to the end of the calling event loop's turn, so work that many
     * events of one read batch ask for (a replication stream's send, docs/replication.md
     * §3.5) is done once for all of them.
     *
     * @return {@code false} when the calling thread is no such loop (or it is shutting
     * down): the caller runs the work now
     */
    public static boolean runAfterTurn(Runnable task) {
        Executor loop = TURN.get();
        if (loop == null) {
            return false;
        }
        try {
            loop.execute(task);
            return true;
        } catch (RejectedExecutionException e) {
            return false;
        }
    }

    /**
     * Marks the calling transport thread as one that serves one blocking verb at a time and
     * waits for each verb's answer itself (a tcp lane's server thread): it may exchange a
     * message on a blocking socket instead of handing it to an I/O thread
     * ({@link io.membus.core.transport.Connection#requestDirect}).
     */
    public static void markServesBlockingVerbs() {
        markCurrentThread();
        SERVES_BLOCKING.set(Boolean.TRUE);
    }

    /** Whether the calling thread was marked by {@link #markServesBlockingVerbs()}. */
    public static boolean servesBlockingVerbs() {
        return SERVES_BLOCKING.get() == Boolean.TRUE;
    }

    /** A factory whose threads mark themselves before running their task. */
    public static ThreadFactory marking(ThreadFactory delegate) {
        return r -> delegate.newThread(() -> {
            markCurrentThread();
            r.run();
        });
    }

    /** Starts a daemon transport thread running {@code task}. */
    public static Thread startDaemon(String name, Runnable task) {
        Thread t = new Thread(() -> {
            markCurrentThread();
            task.run();
        }, name);
        t.setDaemon(true);
        t.start();
        return t;
    }
}
