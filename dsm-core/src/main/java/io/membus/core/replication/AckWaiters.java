package io.membus.core.replication;

import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.PriorityQueue;
import java.util.concurrent.locks.LockSupport;

/**
 * The answers that wait for one {@link ReplicaGroup}'s copies: blocked threads
 * ({@link #await}) and callbacks ({@link #whenAcked}), ordered by the sequence each needs,
 * released when the group's watermark passes it or failed all at once when the group
 * stops. The {@link AckGate} side of a group; the group owns the watermark and the stop
 * state, this class only reads them.
 *
 * <p><b>No waiter is stranded (issue 27).</b> Whoever moves the watermark past a waiter
 * wakes it: an acknowledgement ({@link #release()} after the group's lock), and a change
 * that acknowledged itself ({@link #releaseAfterChange()}: with no copy in sync). A waiter's
 * adder reads the watermark after queueing it; a change reads {@link #waiting} after its
 * volatile store of the watermark; so one of the two always runs {@link #release()}. A
 * callback that throws is logged and does not keep the others from running.
 *
 * <p><b>Note:</b> thread-safe. The queue is guarded by its own monitor (never held while a
 * waiter runs, and never together with the group's lock); {@link #waiting}, a waiter's
 * {@code finished} and {@code failure} are volatile, written before the waiter is unparked
 * or called.
 */
final class AckWaiters {
    private static final Logger LOG = LoggerFactory.getLogger(ReplicaGroup.class); // the group's lines, as before
    private final ReplicaGroup group;
    private final int self;
    private final Duration waitTimeout;
    private final PriorityQueue<Waiter> waiters = new PriorityQueue<>((a, b) -> Long.compare(a.seq, b.seq));
    /**
     * Waiters queued (written under the queue's monitor): a change that advanced the watermark
     * itself (no copy in sync) reads it after that volatile store, a waiter's adder reads the
     * watermark after raising it, so one of the two always runs {@link #release()} (issue 27).
     */
    private volatile int waiting;

    private static final class Waiter {
        final long seq;
        final Thread thread;
        final AckGate.Done done;
        volatile boolean finished;
        volatile DsmException failure;

        Waiter(long seq, Thread thread, AckGate.Done done) {
            this.seq = seq;
            this.thread = thread;
            this.done = done;
        }
    }

    /**
     * @param group       the group whose watermark ({@link ReplicaGroup#watermark()}) and stop
     *                    ({@link ReplicaGroup#waitFailure()}) release the waiters
     * @param waitTimeout what a timed-out blocked waiter's error names
     */
    AckWaiters(ReplicaGroup group, int self, Duration waitTimeout) {
        this.group = group;
        this.self = self;
        this.waitTimeout = waitTimeout;
    }

    /** {@link AckGate#whenAcked}: {@code done} runs once {@code seq} is acknowledged (at once if it is). */
    void whenAcked(long seq, AckGate.Done done) {
        if (group.acked(seq)) {
            done.done(null);
            return;
        }
        ReplicationCounts.gateWaits.increment();
        Waiter w = new Waiter(seq, null, done);
        synchronized (waiters) {
            waiters.add(w);
            waiting = waiters.size();
        }
        release(); // the watermark or the stop may have passed while it was added
    }

    /** {@link AckGate#await}: blocks (not interruptibly) until {@code seq} is acknowledged or the deadline. */
    void await(long seq, long deadlineNanos) {
        if (group.acked(seq)) {
            return;
        }
        ReplicationCounts.gateWaits.increment();
        Waiter w = new Waiter(seq, Thread.currentThread(), null);
        synchronized (waiters) {
            waiters.add(w);
            waiting = waiters.size();
        }
        release();
        boolean interrupted = false;
        try {
            while (!w.finished) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    synchronized (waiters) {
                        waiters.remove(w);
                        waiting = waiters.size();
                    }
                    if (w.finished) {
                        break;
                    }
                    throw new DsmTimeoutException("replicated verb on segment " + GroupId.toString(group.group())
                            + " (waiting for its copies to acknowledge sequence " + seq + ", acknowledged "
                            + group.watermark() + ")", self, waitTimeout, "a copy is slow or unreachable; it leaves"
                            + " the group only when membership removes its node");
                }
                LockSupport.parkNanos(group, left);
                if (Thread.interrupted()) {
                    interrupted = true; // not interruptible (the change ran): wait on, set the status again after
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        if (w.failure != null) {
            throw w.failure.forCaller();
        }
    }

    /** Runs the waiters whose sequence is acknowledged, or fails them all once stopped. */
    void release() {
        List<Waiter> ready = null;
        DsmException failure = group.waitFailure();
        synchronized (waiters) {
            Waiter w;
            while ((w = waiters.peek()) != null && (failure != null || w.seq <= group.watermark())) {
                waiters.poll();
                waiting = waiters.size();
                if (ready == null) {
                    ready = new ArrayList<>();
                }
                ready.add(w);
            }
        }
        if (ready == null) {
            return;
        }
        ReplicationCounts.wakeups.add(ready.size());
        for (Waiter w : ready) {
            boolean acked = w.seq <= group.watermark();
            w.failure = acked ? null : failure;
            w.finished = true;
            finish(w, acked ? null : failure);
        }
    }

    /**
     * After a change advanced the watermark itself (no copy in sync): wakes the waiters it
     * passed. A waiter added between the change's publish and that store found the watermark
     * below its sequence; before issue 27 nothing woke it until a copy's next
     * acknowledgement, which may never come.
     */
    void releaseAfterChange() {
        if (waiting != 0) {
            release();
        }
    }

    /** Fails every waiter with {@code failure} (the group stopped: their changes may be on copies). */
    void failAll(NodeUnavailableException failure) {
        List<Waiter> all;
        synchronized (waiters) {
            all = new ArrayList<>(waiters);
            waiters.clear();
            waiting = 0;
        }
        for (Waiter w : all) {
            w.failure = failure;
            w.finished = true;
            finish(w, failure);
        }
    }

    /**
     * Wakes a blocked waiter or runs a callback. A callback that throws is logged and does
     * not stop the others: they were taken off the queue already, and nothing would ever
     * wake them again (issue 27: their answers would wait out their deadlines).
     */
    private void finish(Waiter w, DsmException failure) {
        if (w.thread != null) {
            LockSupport.unpark(w.thread);
            return;
        }
        try {
            w.done.done(failure);
        } catch (RuntimeException | Error e) {
            LOG.error("replication: an acknowledgement callback of segment {} failed", GroupId.toString(group.group()),
                    e);
        }
    }

    /** The waiters' count and the first one's sequence (diagnostics). */
    void describe(StringBuilder b) {
        synchronized (waiters) {
            b.append(" waiters=").append(waiters.size());
            Waiter first = waiters.peek();
            if (first != null) {
                b.append(" (first seq ").append(first.seq).append(')');
            }
        }
    }
}
