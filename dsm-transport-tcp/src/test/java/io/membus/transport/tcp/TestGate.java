package io.membus.transport.tcp;

import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.replication.AckGate;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * An {@link AckGate} a test drives by hand, standing for a replica group whose copies
 * acknowledge when the test says: {@link #need(long)} sets what a verb run now must
 * wait for, {@link #ack(long)} advances the acknowledgement (and runs the callbacks it
 * satisfies on the test's thread, as the thread that advanced it), {@link #fail} fails
 * every wait, present and future, with a typed failure. A {@linkplain #counting() counting}
 * gate instead gives each verb the next sequence (its {@link #need()} counts the calls,
 * one per verb the executor ran: the k-th verb on it waits for k).
 *
 * <p><b>Note:</b> thread-safe: {@link #need()} and {@link #acked(long)} are volatile
 * reads; the waiters are guarded by this object's monitor, and callbacks run outside it.
 */
final class TestGate implements AckGate {
    private final boolean counting;
    private final java.util.concurrent.atomic.AtomicLong need = new java.util.concurrent.atomic.AtomicLong();
    private volatile long acked;
    private volatile DsmException failure;
    private final List<Waiter> waiters = new ArrayList<>();

    private record Waiter(long seq, Done done) {
    }

    TestGate() {
        this(false);
    }

    private TestGate(boolean counting) {
        this.counting = counting;
    }

    /** A gate whose need is the number of times it was asked: each verb gets a sequence of its own. */
    static TestGate counting() {
        return new TestGate(true);
    }

    /** The latest need handed out (a counting gate) or set. */
    long issued() {
        return need.get();
    }

    /** What a verb that runs from now on must wait for. */
    void need(long seq) {
        need.set(seq);
    }

    /** The acknowledged sequence. */
    long acked() {
        return acked;
    }

    /** Callbacks registered and not yet called. */
    synchronized int waiting() {
        return waiters.size();
    }

    /** Every copy has every change up to {@code seq}: the waits it satisfies are released on this thread. */
    void ack(long seq) {
        List<Done> due = new ArrayList<>();
        synchronized (this) {
            acked = Math.max(acked, seq);
            for (Iterator<Waiter> i = waiters.iterator(); i.hasNext(); ) {
                Waiter w = i.next();
                if (w.seq() <= acked) {
                    due.add(w.done());
                    i.remove();
                }
            }
        }
        due.forEach(d -> d.done(null));
    }

    /** The group stops being served here: every wait fails with {@code e}, now and later. */
    void fail(DsmException e) {
        List<Waiter> all;
        synchronized (this) {
            failure = e;
            all = new ArrayList<>(waiters);
            waiters.clear();
        }
        all.forEach(w -> w.done().done(e));
    }

    @Override
    public long need() {
        return counting ? need.incrementAndGet() : need.get();
    }

    @Override
    public boolean acked(long seq) {
        return seq <= acked;
    }

    @Override
    public void whenAcked(long seq, Done done) {
        DsmException f;
        synchronized (this) {
            f = failure;
            if (f == null && !acked(seq)) {
                waiters.add(new Waiter(seq, done));
                return;
            }
        }
        done.done(f);
    }

    @Override
    public void await(long seq, long deadlineNanos) {
        while (!acked(seq)) {
            DsmException f = failure;
            if (f != null) {
                throw f.forCaller();
            }
            long left = deadlineNanos - System.nanoTime();
            if (left <= 0) {
                throw new DsmTimeoutException("await of a test gate", 0, Duration.ofNanos(0));
            }
            LockSupport.parkNanos(Math.min(left, 1_000_000L));
        }
    }
}
