package io.membus.core.transport.pipeline;

import io.membus.core.OperationDeadline;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.fault.FaultInjector;
import io.membus.core.time.TimerWheel;
import io.membus.core.transport.VerbObserver;

import java.time.Duration;
import java.util.function.Supplier;

/**
 * The in-order verb engine of one connection, shared by every transport: issue order,
 * an in-flight window, a backlog, deadlines, fault holds and completion in issue order.
 * The transport plugs in only its {@link Wire} (encode and send, or post) and reports
 * each verb's outcome back.
 *
 * <h2>Structure</h2>
 * One ring of verbs in issue order (it grows by doubling, never per verb, and shrinks
 * back when a large one empties), with cursors:
 * {@code head} (oldest verb kept), {@code sentEnd} (the next verb to post: before it the
 * verbs went to the wire or were passed over, after it is the backlog) and {@code tail}.
 * A verb's sequence number is its place in the ring (1, 2, ...), which tcp uses as its
 * correlation id. {@link #pump()} posts backlog verbs in order while fewer than
 * {@code window} verbs await their answer and the wire has room; a verb held by an
 * injected delay stops the pump (later verbs wait behind it: the order holds) until its
 * release time. A verb dropped by a fault rule is never posted and waits for its deadline.
 *
 * <h2>Deadlines</h2>
 * Every verb's deadline is its issue time plus the connection's one operation timeout,
 * so deadlines grow with sequence numbers and the oldest unresolved verb's deadline is the
 * earliest. The pipeline keeps one {@link TimerWheel} entry, armed at that deadline (or
 * at a held verb's release, if earlier) and re-armed when it fires: no timer task, no
 * allocation per verb. When it fires, expired verbs fail with {@link DsmTimeoutException}
 * (on the wheel thread); one that was on the wire frees its window slot at once, and is
 * forgotten once every older verb is resolved: its late answer ({@link #answering} of a
 * forgotten sequence number, or {@link #complete} of a resolved verb) is ignored, so a
 * peer that never answers cannot stall the connection or grow the window.
 *
 * <h2>Completion</h2>
 * A verb is resolved under the lock (exactly once: the first of answer, failure, deadline
 * or close wins) and its outcome is delivered outside it, by one thread at a time, in
 * the order of resolution: when a verb's future completes, every verb resolved before it
 * has completed. Answers come in issue order (the transports' wires are ordered), so
 * resolution order is issue order except for verbs that time out, which the contract lets
 * fail at their deadline. Each outcome is reported to the {@link VerbObserver}; with
 * {@link VerbObserver#NONE} that is one reference comparison. The queue of resolved
 * verbs and their delivery are {@link Outcomes}'; this class keeps the ring, the window,
 * the backlog and the deadlines.
 *
 * <p><b>Note:</b> thread-safe: one lock ({@link #lock()}) guards the ring; any thread may
 * issue; the wire's {@link Wire#post} and {@link Wire#flush} run under the lock, on the
 * thread that pumps. Outcomes are delivered on the thread that resolved them (a
 * transport's I/O or completion thread, the wheel thread for deadlines, or the caller),
 * or by a thread already delivering this pipeline's outcomes, never under the lock;
 * callbacks must not block (a blocked callback holds every later completion of the
 * connection). Memory ordering: the lock orders a
 * verb's operands (written before {@link #issue}) before its post, and the wire's result
 * (passed to {@link #complete}) before its delivery.
 */
public final class VerbPipeline<V extends Verb> {
    /** {@link #issue}'s hold for a verb a fault rule drops ({@link FaultInjector#holdNanos}): its deadline fires. */
    public static final long DROP = FaultInjector.DROP;
    private static final long NOT_ARMED = Long.MIN_VALUE;
    private static final int SHRINK_ABOVE = 4096;

    private final Object lock = new Object();
    private final int peer;
    private final Duration timeout;
    private final long timeoutNanos;
    private final int window;
    /** Resolved verbs waiting for delivery, delivered off the lock in resolution order. */
    private final Outcomes outcomes;
    private final Wire<V> wire;
    private final boolean postsOnAnyThread;
    private final TimerWheel wheel;
    private final TimerWheel.Timeout expiry = new TimerWheel.Timeout() {
        @Override
        protected void expired() {
            expire();
        }

        @Override
        public String toString() {
            return "deadlines of the verbs to node " + peer;
        }
    };

    // guarded by lock
    private Verb[] ring = new Verb[16];
    private int mask = 15;
    private long head = 1;
    private long sentEnd = 1;
    private long tail = 1;
    private long expireFrom = 1;      // every verb before it is resolved (or forgotten)
    private long answeredThrough = 1; // every sent verb before it is answered, skipped or resolved
    private int onWire;               // verbs sent whose answer is awaited (the window)
    private int queued;               // verbs in the backlog (held ones included)
    private Supplier<? extends Throwable> closed; // what a verb issued after close fails with
    private long armedAt = NOT_ARMED;
    /**
     * Unresolved verbs (as of the last expiry scan, plus those issued since) whose deadline is
     * their thread's {@link OperationDeadline}, earlier than issue plus the timeout: while
     * there are any, deadlines do not grow with sequence numbers and the expiry scans every verb.
     */
    private int earlyDeadlines;
    /** Bumped when every verb held is failed (the connection lost or closed): see {@link VerbOwner}. */
    private volatile long epoch;

    /**
     * @param peer     the node the verbs go to (errors and the observer name it)
     * @param timeout  every verb's deadline, from its issue
     * @param window   at most this many verbs await their answer on the wire
     *                 ({@link Integer#MAX_VALUE}: the wire alone decides, by {@link Wire#post}'s result)
     * @param observer where outcomes are reported ({@link VerbObserver#NONE}: nowhere)
     * @param postsOnAnyThread whether {@link Wire#post} may run on the issuing thread; if so a
     *                 verb is posted in the same critical section that enqueues it, else
     *                 {@link Wire#wake} is called
     */
    public VerbPipeline(int peer, Duration timeout, int window, VerbObserver observer, Wire<V> wire,
                        boolean postsOnAnyThread) {
        this(peer, timeout, window, observer, wire, postsOnAnyThread, TimerWheel.SHARED);
    }

    VerbPipeline(int peer, Duration timeout, int window, VerbObserver observer, Wire<V> wire,
                 boolean postsOnAnyThread, TimerWheel wheel) {
        if (window < 1) {
            throw new IllegalArgumentException("window must be at least 1: window=" + window);
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive: timeout=" + timeout);
        }
        this.peer = peer;
        this.timeout = timeout;
        this.timeoutNanos = timeout.toNanos();
        this.window = window;
        this.outcomes = new Outcomes(lock, peer, observer);
        this.wire = wire;
        this.postsOnAnyThread = postsOnAnyThread;
        this.wheel = wheel;
    }

    /** The lock guarding the pipeline; a wire may take it to make its own bookkeeping atomic with the pipeline's. */
    public Object lock() {
        return lock;
    }

    // ------------------------------------------------------------------ issue and post

    /**
     * Issues {@code v}: stamps its deadline, puts it at the end of the backlog and gets it
     * posted (on this thread, or by {@link Wire#wake}). A pipeline that is closed fails
     * it at once.
     *
     * @param hold 0, an injected delay in nanoseconds, or {@link #DROP}
     */
    public void issue(V v, long hold) {
        boolean wake;
        synchronized (lock) {
            wake = enqueueLocked(v, hold);
            if (wake && postsOnAnyThread) {
                pumpLocked();
                wake = false;
            }
        }
        if (wake) {
            wire.wake(this);
        }
        deliver();
    }

    /**
     * Enqueues {@code v} like {@link #issue} but posts nothing: the caller calls
     * {@link #wake()} once after a burst (a batch: one wake-up, one flush).
     *
     * @return whether {@code v} waits to be posted
     */
    public boolean enqueue(V v, long hold) {
        boolean waits;
        synchronized (lock) {
            waits = enqueueLocked(v, hold);
        }
        deliver();
        return waits;
    }

    /** Gets the backlog posted: {@link Wire#wake}. */
    public void wake() {
        wire.wake(this);
    }

    private boolean enqueueLocked(V v, long hold) {
        if (closed != null) {
            v.seq = 0;
            v.issuedNanos = System.nanoTime();
            v.resolve(null, 0, closed.get());
            outcomes.add(v);
            outcomes.issued();
            return false;
        }
        if (tail - head == ring.length) {
            grow();
        }
        long now = System.nanoTime();
        v.seq = tail;
        v.issuedNanos = now;
        // the issuing thread's operation deadline, when it is earlier than the connection's timeout
        long deadline = OperationDeadline.until(now, timeoutNanos);
        v.deadlineNanos = deadline;
        boolean early = deadline != now + timeoutNanos;
        if (early) {
            earlyDeadlines++;
        }
        v.sent = false;
        VerbOwner o = v.owner;
        if (o != null) {
            v.settled = false;
            o.unsettled = o.unsettled + 1; // under the lock: the only writers
        }
        ring[(int) tail & mask] = v;
        tail++;
        outcomes.issued();
        boolean waits;
        if (hold == DROP) {
            v.state = Verb.SKIPPED; // never posted, never answered: its deadline fires
            waits = false;
        } else {
            v.state = Verb.QUEUED;
            v.word = hold > 0 ? now + hold : 0;
            queued++;
            waits = true;
        }
        if (armedAt == NOT_ARMED || early) {
            armAtMost(deadline);
        }
        return waits;
    }

    private void grow() {
        Verb[] bigger = new Verb[ring.length * 2];
        int m = bigger.length - 1;
        for (long s = head; s < tail; s++) {
            bigger[(int) s & m] = ring[(int) s & mask];
        }
        ring = bigger;
        mask = m;
    }

    /**
     * Posts backlog verbs in issue order while the window and the wire have room and
     * the next one is not held; one {@link Wire#flush} after them. Runs where the wire
     * may post (see {@link Wire#wake}).
     */
    public void pump() {
        synchronized (lock) {
            pumpLocked();
        }
        deliver();
    }

    @SuppressWarnings("unchecked")
    private void pumpLocked() {
        if (sentEnd < head) {
            sentEnd = head;
        }
        boolean any = false;
        long now = 0;
        while (closed == null && sentEnd < tail && onWire < window) {
            V v = (V) ring[(int) sentEnd & mask];
            if (v.state == Verb.SKIPPED || (v.state == Verb.DONE && !wire.mustFinish(v))) {
                sentEnd++; // dropped by a fault rule, or timed out in the backlog: never posted
                continue;
            }
            if (v.state == Verb.QUEUED && v.word != 0) {
                if (now == 0) {
                    now = System.nanoTime();
                }
                if (v.word - now > 0) {
                    armAtMost(v.word); // held: every later verb waits behind it
                    break;
                }
            }
            boolean wasQueued = v.state == Verb.QUEUED;
            if (wasQueued) {
                v.state = Verb.SENT; // before post: a wire may report the outcome from inside post
                onWire++;
                queued--;
            }
            v.sent = true;
            sentEnd++;
            if (!wire.post(v)) { // no room: nothing was resolved, undo and wait for room
                sentEnd--;
                v.sent = false;
                if (wasQueued) {
                    v.state = Verb.QUEUED;
                    onWire--;
                    queued++;
                }
                break;
            }
            any = true;
        }
        if (any) {
            wire.flush();
        }
    }

    // ------------------------------------------------------------------ outcomes

    /**
     * The verb an answer with sequence number {@code seq} is for, on a wire that answers
     * in order: every older verb still awaiting its answer was dropped by the target and
     * now waits only for its deadline.
     *
     * @return the verb, or null when its answer is late (it timed out; it may have been forgotten)
     * @throws IllegalArgumentException when {@code seq} names no verb that was sent
     */
    @SuppressWarnings("unchecked")
    public V answering(long seq) {
        synchronized (lock) {
            if (seq < head && seq > 0) {
                return null; // forgotten after its deadline
            }
            if (seq <= 0 || seq >= sentEnd || !ring[(int) seq & mask].sent) {
                throw new IllegalArgumentException("seq=" + seq + " answers no verb on the wire (head=" + head
                        + ", posted through " + (sentEnd - 1) + ")");
            }
            for (long s = Math.max(answeredThrough, head); s < seq; s++) {
                Verb o = ring[(int) s & mask];
                if (o.state == Verb.SENT) {
                    o.state = Verb.SKIPPED; // no answer will come: it frees its slot and waits for its deadline
                    onWire--;
                    settle(o, false); // the target dropped it: it never runs
                }
            }
            answeredThrough = Math.max(answeredThrough, seq + 1);
            V v = (V) ring[(int) seq & mask];
            return v.state == Verb.SENT ? v : null;
        }
    }

    /** {@code v} succeeded with {@code value} ({@code byte[]} of a read, null of a write); false if it was resolved already. */
    public boolean complete(V v, Object value) {
        return resolve(v, value, 0, null);
    }

    /** {@code v}, an atomic, succeeded with the word's previous value; false if it was resolved already. */
    public boolean completeLong(V v, long value) {
        return resolve(v, null, value, null);
    }

    /** {@code v} failed with {@code failure}; false if it was resolved already (a late outcome is ignored). */
    public boolean fail(V v, Throwable failure) {
        return resolve(v, null, 0, failure);
    }

    private boolean resolve(V v, Object value, long longValue, Throwable failure) {
        synchronized (lock) {
            if (v.state != Verb.SENT || v.seq < head) {
                return false; // timed out, failed or closed already: a late outcome is ignored
            }
            onWire--;
            v.resolve(value, longValue, failure);
            settle(v, false);
            outcomes.add(v);
            advanceHead();
        }
        deliver();
        return true;
    }

    /**
     * Fails every verb the pipeline holds, in issue order: those on the wire with
     * {@code onWire} (they may have run), the others with {@code notSent}. The pipeline
     * stays usable (tcp: the connection reconnects).
     */
    public void failAll(Throwable onWire, Throwable notSent) {
        synchronized (lock) {
            failAllLocked(onWire, notSent);
        }
        deliver();
    }

    /**
     * Closes for good: fails every verb held as {@link #failAll} does, and every verb
     * issued later with what {@code later} supplies. Idempotent: the first close wins.
     *
     * @return whether this call closed it
     */
    public boolean close(Throwable onWire, Throwable notSent, Supplier<? extends Throwable> later) {
        synchronized (lock) {
            if (closed != null) {
                return false;
            }
            closed = later;
            failAllLocked(onWire, notSent);
        }
        deliver();
        return true;
    }

    /** Whether {@link #close} was called. */
    public boolean isClosed() {
        synchronized (lock) {
            return closed != null;
        }
    }

    private void failAllLocked(Throwable onWireFailure, Throwable notSentFailure) {
        for (long s = head; s < tail; s++) {
            int i = (int) s & mask;
            Verb v = ring[i];
            ring[i] = null;
            if (v.state != Verb.DONE) {
                v.resolve(null, 0, v.sent ? onWireFailure : notSentFailure);
                outcomes.add(v);
            }
            settle(v, false);
        }
        epoch++; // verbs that timed out on the wire of the old connection can no longer run after this one
        head = tail;
        sentEnd = tail;
        expireFrom = tail;
        answeredThrough = tail;
        onWire = 0;
        queued = 0;
        earlyDeadlines = 0;
        if (ring.length > SHRINK_ABOVE) {
            ring = new Verb[16];
            mask = 15;
        }
        if (armedAt != NOT_ARMED) {
            wheel.cancel(expiry);
            armedAt = NOT_ARMED;
        }
    }

    private void advanceHead() {
        while (head < tail) {
            int i = (int) head & mask;
            Verb v = ring[i];
            if (v.state != Verb.DONE || (head >= sentEnd && mustFinish(v))) {
                break;
            }
            ring[i] = null;
            head++;
        }
        if (expireFrom < head) {
            expireFrom = head;
        }
        if (answeredThrough < head) {
            answeredThrough = head;
        }
        if (head == tail && ring.length > SHRINK_ABOVE) {
            ring = new Verb[16]; // a burst grew it; an empty pipeline gives the memory back
            mask = 15;
        }
    }

    @SuppressWarnings("unchecked")
    private boolean mustFinish(Verb v) {
        return wire.mustFinish((V) v);
    }

    /** Counts {@code v} out of its owner once; {@code mayStillRun}: it timed out on the wire. */
    private void settle(Verb v, boolean mayStillRun) {
        VerbOwner o = v.owner;
        if (o == null || v.settled) {
            return;
        }
        v.settled = true;
        if (mayStillRun) {
            o.unsettledEpoch = epoch; // before the count drops: a reader that sees 0 sees the mark
        }
        o.unsettled = o.unsettled - 1;
    }

    /**
     * Whether every verb {@code owner}'s thread issued on this pipeline is settled, so a
     * verb it sends another way (tcp's blocking lanes) cannot overtake one of them: none
     * is waiting, on the wire or timed out on the wire of the current connection.
     */
    public boolean settledFor(VerbOwner owner) {
        return owner.unsettled == 0 && owner.unsettledEpoch != epoch;
    }

    // ------------------------------------------------------------------ deadlines

    private void armAtMost(long at) {
        if (armedAt == NOT_ARMED || at - armedAt < 0) {
            armedAt = at;
            wheel.arm(expiry, at);
        }
    }

    /** The wheel fired: fail what expired, let held verbs go, re-arm at the next deadline or release. */
    private void expire() {
        boolean wake = false;
        synchronized (lock) {
            armedAt = NOT_ARMED;
            long now = System.nanoTime();
            if (expireFrom < head) {
                expireFrom = head;
            }
            long next = 0;
            boolean anyLeft = false;
            int early = 0;
            for (long at = expireFrom; at < tail; at++) {
                Verb v = ring[(int) at & mask];
                if (v.state == Verb.DONE) {
                    if (at == expireFrom) {
                        expireFrom++;
                    }
                    continue;
                }
                if (v.deadlineNanos - now > 0) {
                    if (!anyLeft || v.deadlineNanos - next < 0) {
                        next = v.deadlineNanos;
                        anyLeft = true;
                    }
                    if (v.deadlineNanos != v.issuedNanos + timeoutNanos) {
                        early++;
                    }
                    if (earlyDeadlines == 0) {
                        break; // deadlines grow with sequence numbers: nothing later has expired
                    }
                    continue; // a verb issued under an earlier operation deadline may follow: look at every one
                }
                if (v.state == Verb.SENT) {
                    onWire--; // its slot in the window is free again
                    settle(v, true); // it may still run: its owner keeps to the pipeline until the next epoch
                } else {
                    if (v.state == Verb.QUEUED) {
                        queued--; // never posted
                    }
                    settle(v, false);
                }
                // a verb that never left (backlog, held, dropped by a fault rule) certainly did not run
                v.resolve(null, 0, v.sent ? new DsmTimeoutException(Verb.operationName(v.kind), peer, timeout)
                        : DsmTimeoutException.notSent(Verb.operationName(v.kind), peer, timeout));
                outcomes.add(v);
                if (at == expireFrom) {
                    expireFrom++;
                }
            }
            earlyDeadlines = early;
            advanceHead();
            if (sentEnd < head) {
                sentEnd = head;
            }
            if (anyLeft) {
                armAtMost(next);
            }
            if (sentEnd < tail && closed == null) {
                wake = true; // a held verb's release came, or expired verbs freed the window
                if (postsOnAnyThread) {
                    pumpLocked();
                    wake = false;
                }
            }
        }
        deliver();
        if (wake) {
            wire.wake(this);
        }
    }

    // ------------------------------------------------------------------ delivery

    /**
     * Delivers resolved outcomes, in resolution order, on this thread unless another
     * thread is delivering (it takes these too) or this thread holds the lock (the
     * outermost call delivers). Every public method calls it; a wire that resolves verbs
     * while holding {@link #lock()} calls it after releasing the lock. Re-entrant: a
     * callback that issues a verb whose outcome is decided at once gets it delivered
     * by the same loop, after the outcomes resolved before it, so a callback that waits
     * for such a verb does not wait for itself.
     */
    public void deliver() {
        outcomes.deliver();
    }

    // ------------------------------------------------------------------ gauges

    /** Verbs on the wire awaiting their answer (timed-out and target-dropped ones excluded): the window in use. */
    public int inFlight() {
        synchronized (lock) {
            return onWire;
        }
    }

    /** Verbs waiting to be posted (held ones included). */
    public int backlog() {
        synchronized (lock) {
            return queued;
        }
    }

    /** Verbs kept by sequence number: on the wire, waiting, or resolved but not yet forgotten (for tests). */
    public int kept() {
        synchronized (lock) {
            return (int) (tail - head);
        }
    }

    /** Verbs issued whose outcome is not delivered yet; 0 means nothing is queued, held or on the wire. */
    public int pending() {
        return outcomes.pending();
    }
}
