package io.membus.collections;

import io.membus.core.Backoff;

/**
 * One blocked call's waiting between attempts: a few short {@link Backoff} pauses
 * first (a wait of microseconds costs no messages), then wake-ups
 * ({@link WakeUps}): register this node in the waiters word, let the caller look
 * once more, then sleep until a wake-up message or the fallback look.
 *
 * <pre>
 *   while (!attempt()) {
 *       if (!waiting.next(deadline, interruptible)) return false;   // deadline passed
 *   }
 *   waiting.done();                                                   // restores a kept interrupt
 * </pre>
 *
 * <p><b>Note:</b> not thread-safe: one per blocked call.
 */
final class Waiting {
    private static final int SPINS = 4;

    private final WakeUps wakeUps;
    private final long waitersPtr;
    private Backoff backoff; // made at the first pause, with the call's deadline
    private int pauses;
    private boolean registered;
    private long generation;
    private boolean interrupted;

    Waiting(WakeUps wakeUps, long waitersPtr) {
        this.wakeUps = wakeUps;
        this.waitersPtr = waitersPtr;
    }

    /**
     * Waits before the caller's next attempt.
     *
     * @return false when the deadline has passed (no wait was made)
     * @throws InterruptedException when interruptible and the thread is interrupted
     */
    boolean next(long deadline, boolean interruptible) throws InterruptedException {
        if (wakeUps == null || !wakeUps.armed() || pauses < SPINS) {
            pauses++;
            if (backoff == null) {
                backoff = new Backoff(Backoff.POLL, deadline);
            }
            return interruptible ? backoff.pauseInterruptibly() : backoff.pauseUninterruptibly();
        }
        long left = Backoff.remaining(deadline);
        if (left <= 0) {
            return false;
        }
        WakeUps.Signal signal = wakeUps.signal(waitersPtr);
        if (!registered) {
            generation = signal.generation();
            wakeUps.register(waitersPtr);
            registered = true;
            return true; // the caller looks once more, now that a change will wake it
        }
        registered = false;
        try {
            signal.await(generation, Math.min(WakeUps.FALLBACK_NANOS, left));
        } catch (InterruptedException e) {
            if (interruptible) {
                throw e;
            }
            interrupted = true;
        }
        if (Thread.interrupted()) {
            if (interruptible) {
                throw new InterruptedException();
            }
            interrupted = true;
        }
        return true;
    }

    /** Restores an interrupt an uninterruptible wait kept. */
    void done() {
        if (backoff != null) {
            backoff.restoreInterrupt();
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
