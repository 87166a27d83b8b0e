package io.membus.core.transport;

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
