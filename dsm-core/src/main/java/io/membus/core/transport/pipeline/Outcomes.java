package io.membus.core.transport.pipeline;

import io.membus.core.error.DsmTimeoutException;
import io.membus.core.transport.VerbObserver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The outcome delivery of one {@link VerbPipeline}: verbs resolved under the pipeline's
 * lock are queued here in resolution order and delivered outside the lock, by one thread
 * at a time, each reported to the {@link VerbObserver} first; and the count of verbs
 * issued whose outcome is not delivered yet ({@link #pending()}). One job: ordered,
 * off-lock completion; which verb is resolved when is the pipeline's.
 *
 * <p><b>Note:</b> thread-safe under the pipeline's lock, which it shares: {@link #add} and
 * {@link #issued} are called holding it; {@link #deliver()} takes it to dequeue and runs
 * callbacks without it. Memory ordering: the lock orders a verb's outcome (set before
 * {@link #add}) before its delivery on whichever thread dequeues it; {@link #pending()}
 * is a volatile read of a count written under the lock after the delivery returned.
 */
final class Outcomes {
    /** The pipeline's logger: a throwing callback is logged where it always was. */
    private static final Logger LOG = LoggerFactory.getLogger(VerbPipeline.class);

    private final Object lock;
    private final int peer;
    private final VerbObserver observer;

    // guarded by lock
    private Verb doneHead;
    private Verb doneTail;
    private Thread deliverer;         // the thread delivering outcomes, or null
    private int pendingCount;
    private volatile int pending;     // verbs issued whose outcome is not yet delivered

    Outcomes(Object lock, int peer, VerbObserver observer) {
        this.lock = lock;
        this.peer = peer;
        this.observer = observer;
    }

    /** One more verb issued; its delivery will count it out. Under the lock. */
    void issued() {
        pendingCount++;
        pending = pendingCount;
    }

    /** Queues resolved {@code v} for delivery, after those resolved before it. Under the lock. */
    void add(Verb v) {
        if (doneTail == null) {
            doneHead = v;
        } else {
            doneTail.nextDone = v;
        }
        doneTail = v;
    }

    /** See {@link VerbPipeline#deliver()}. */
    void deliver() {
        // a racy read is enough here: outcomes this thread added are visible to it, and an outcome another
        // thread added is delivered by that thread's own call (or by the thread delivering, before it stops)
        if (doneHead == null || Thread.holdsLock(lock)) {
            return;
        }
        Thread me = Thread.currentThread();
        Verb v = null;
        while (true) {
            synchronized (lock) {
                if (v != null) {
                    pendingCount--; // after its delivery: pending() == 0 means every outcome was delivered
                    pending = pendingCount;
                }
                if (deliverer != null && deliverer != me) {
                    return; // that thread takes ours too, before it stops
                }
                v = doneHead;
                if (v == null) {
                    deliverer = null;
                    return;
                }
                doneHead = v.nextDone;
                if (doneHead == null) {
                    doneTail = null;
                }
                v.nextDone = null;
                deliverer = me;
            }
            try {
                report(v);
                v.deliver();
            } catch (RuntimeException e) { // a callback that throws must not stop the others
                LOG.warn("a completion callback of a verb to node {} threw", peer, e);
            }
        }
    }

    private void report(Verb v) {
        if (observer == VerbObserver.NONE) {
            return;
        }
        Throwable e = v.failure();
        if (e == null) {
            observer.completed(peer, v.kind, v.length, System.nanoTime() - v.issuedNanos);
        } else if (e instanceof DsmTimeoutException) {
            observer.timedOut(peer, v.kind);
        } else {
            observer.failed(peer, v.kind);
        }
    }

    /** Verbs issued whose outcome is not delivered yet. */
    int pending() {
        return pending;
    }
}
