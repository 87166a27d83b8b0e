package io.membus.transport.tcp;

import io.membus.core.time.TimerWheel;
import io.netty.util.concurrent.EventExecutor;

import java.util.concurrent.RejectedExecutionException;

/**
 * A delayed task of a channel that must run on its event loop (it touches loop-confined
 * state: the channel, the reconnect attempt count, the handshake's outcome, a target's
 * held verbs), timed by the JVM's one timer, the shared {@link TimerWheel}: when due, the
 * wheel's thread hands the task to the loop ({@link EventExecutor#execute}) and never runs
 * it itself. A loop already shut down refuses the task; it is dropped (the transport is
 * closing, and its close fails what is left).
 *
 * <p><b>Note:</b> thread-safe: {@link #cancel()} may be called from any thread; a task
 * handed to the loop before the cancel still runs, so a task checks the state it acts on
 * (as it would with Netty's own schedule).
 *
 * <p>Every delayed task of the tcp transport goes through here (the initiator's connect
 * deadline and reconnect backoff, the target's handshake timeout, its injected verb
 * delays and the close of a refused peer that does not read its ERROR frame): none uses
 * Netty's own scheduler, whose per-loop timer queue would be a second timer beside the
 * wheel. Running on the loop is what a channel-bound task needs, not the loop's timer.
 */
final class LoopTimer extends TimerWheel.Timeout {
    private final EventExecutor loop;
    private final Runnable task;
    private volatile boolean cancelled;

    private LoopTimer(EventExecutor loop, Runnable task) {
        this.loop = loop;
        this.task = task;
    }

    /** Runs {@code task} on {@code loop} once {@code delayNanos} have passed (to within the wheel's tick). */
    static LoopTimer schedule(EventExecutor loop, Runnable task, long delayNanos) {
        LoopTimer t = new LoopTimer(loop, task);
        TimerWheel.SHARED.arm(t, System.nanoTime() + Math.max(0, delayNanos));
        return t;
    }

    /** Disarms it; a task already handed to the loop still runs. */
    void cancel() {
        cancelled = true;
        TimerWheel.SHARED.cancel(this);
    }

    @Override
    protected void expired() {
        if (cancelled) {
            return;
        }
        try {
            loop.execute(task);
        } catch (RejectedExecutionException e) {
            // the loop is shutting down: the transport's close fails what the task would have
        }
    }
}
