package io.membus.transport.tcp;

import io.membus.core.OperationDeadline;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.time.TimerWheel;
import io.membus.core.transport.TransportThreads;
import io.membus.core.transport.VerbObserver;
import io.membus.core.transport.WaitHelp;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BiConsumer;
import java.util.function.IntConsumer;

/**
 * Asynchronous reads of one thread held on one blocking lane until somebody waits for
 * them (issue 28: the floor's shape for verbs in flight). {@link TcpConnection#read} by a
 * thread that may use a lane ({@link TcpConnection#blockingNow()}'s conditions) appends
 * the READ request to the lane's buffer and returns a {@link Flight} future: nothing is
 * written and no other thread is woken. Consecutive reads of the same thread go to the
 * same lane. The first thread that waits for one of the futures ({@code get}, {@code join},
 * or those of a future made from it; and any {@code VerbWait.await} of the owner thread,
 * whatever future it waits for: the flight is registered with {@link WaitHelp}) takes the
 * flight: it sends every request with one {@code write}, reads every answer itself,
 * completes the futures in issue order on its own thread and only then gives the lane back
 * and marks the flight <em>delivered</em>: the batching floor's two blocked threads per
 * burst, where the pipelined channel has four.
 *
 * <h2>Who reads: one thread, once</h2>
 * A flight is read by exactly one thread, which takes it under the monitor ({@link #taken}):
 * <ul>
 *   <li>a waiter whose own deadline is not before the flight's reads' deadlines ({@code get()},
 *       {@code join()}, {@code VerbWait.await} with the operation's wait, the owner's next
 *       verb). A waiter with an earlier deadline ({@code get(10, ms)}) does not read: a
 *       blocking read cannot be stopped at its deadline without closing the lane, so it
 *       hands the flight to a flight reader and waits, on the monitor, only until its own
 *       deadline;</li>
 *   <li>a <em>flight reader</em> (the transport's {@code membus-tcp-<node>-flights-<n>}
 *       threads), asked when a callback or a dependent is attached to a future before
 *       anybody waited ({@link #dependentAttached}: it reads once the thread stopped adding
 *       reads for {@link #READER_QUIET_NANOS}), by a waiter that may not read, or by the
 *       fallback;</li>
 *   <li>the <em>fallback</em>: one entry of the shared {@link TimerWheel}, armed while
 *       flights exist, asks a flight reader for a flight nobody took within
 *       {@link #FALLBACK_NANOS} of its last read, and fails one nobody took by its deadline
 *       (not sent). A routed verb's relay ({@link WaitHelp#whenCompleteOwnerWaits}) asks
 *       nobody: its caller will wait; the fallback covers a caller that does not.</li>
 * </ul>
 * A waiter ({@code get}, {@code join}, {@code VerbWait.await}) that did not read the flight
 * waits for its own future only, never for the rest of a delivery another thread runs (whose
 * later callbacks may block on a lock the waiter holds). Only the owner's next verb on the
 * connection waits, on the monitor, until the flight is delivered ({@link #finish}, bounded by
 * that verb's deadline): no spinning.
 *
 * <h2>Order</h2>
 * {@code Verbs}' rule — when a verb's future completes, every verb issued before it by that
 * thread has completed — holds because (1) a flight's futures complete in issue order, all
 * before it is delivered; (2) the owner's next verb on the connection, of any kind and path,
 * waits until the flight is delivered ({@link TcpConnection}), bounded by that verb's
 * deadline (a not-sent {@link DsmTimeoutException} if it passes); (3) a verb a callback
 * issues while its thread delivers a flight ({@link WaitHelp#delivering()}) is deferred
 * ({@link #defer}) and issued right after the delivery, so it cannot complete before the
 * flight's later futures.
 *
 * <h2>Failures: nothing waits forever</h2>
 * Whatever ends the read — an ERROR answer (fails that read only, the lane stays in step), a
 * passed deadline ({@link LaneReaper} closes the socket: {@link DsmTimeoutException}, may have
 * run), a lost or closed lane ({@link NodeUnavailableException}), a malformed answer, or any
 * unexpected {@link Throwable} — every read not yet answered fails with a typed error
 * ({@code mayHaveRun()} true once the requests were written), the lane is closed, and the
 * futures are completed and the flight delivered in a {@code finally}.
 *
 * <p><b>Note:</b> thread-safe. The owner thread appends; one thread at a time reads (the
 * right to read is taken once, under the monitor); the monitor orders the appended requests
 * before their sending and the answers before the completions, which happen outside it, in
 * issue order, on the thread that read them (callbacks must not block). {@link #delivered}
 * is volatile and set under the monitor, which the owner's next verb waits on ({@link #finish});
 * other waiters wait for their own future (the {@link CompletableFuture}'s ordering). The
 * JVM-wide count of flights not yet delivered ({@link #anyActive}) is decremented after the
 * delivered mark, so a thread that reads 0 sees every flight of its own delivered. The
 * fallback's {@code armed} is volatile, written under {@code ARM_LOCK}.
 */
final class LaneFlight implements WaitHelp.Pending {
    private static final Logger LOG = LoggerFactory.getLogger(LaneFlight.class);
    /** A flight nobody took this long after its last read is handed to a flight reader by the fallback. */
    static final long FALLBACK_NANOS = 500_000L;
    /**
     * A flight reader asked by {@link #dependentAttached} reads a flight once its thread added
     * no read for this long (the thread may still add reads, or wait itself, which is cheaper)...
     */
    static final long READER_QUIET_NANOS = 50_000L;
    /** ...or once it waited this long for the thread, whatever the thread does. */
    static final long READER_PATIENCE_NANOS = 1_000_000L;
    /** Most answer bytes one flight waits for (bounds what the target holds for a flight nobody reads yet). */
    static final int MAX_ANSWER_BYTES = 64 * 1024;
    private static final Set<LaneFlight> LIVE = ConcurrentHashMap.newKeySet();
    private static final Object ARM_LOCK = new Object();
    private static final Fallback FALLBACK = new Fallback();
    /** Written under ARM_LOCK; read without it first by {@link #start} (see {@link Fallback#expired}). */
    private static volatile boolean armed;
    /**
     * Flights started and not yet delivered, JVM-wide (a delivery running its callbacks is one
     * of them). While 0, no thread holds a read or runs a delivery, so a verb skips the whole
     * flight block ({@link TcpConnection}: the delivering check, the thread's flight, the wait
     * for it). Incremented before a flight's first future is returned; decremented after the
     * flight is marked delivered, so a thread that reads 0 sees its own flights delivered.
     */
    private static final java.util.concurrent.atomic.AtomicInteger ACTIVE =
            new java.util.concurrent.atomic.AtomicInteger();
    /** Verbs issued by callbacks while this thread delivers a flight: issued right after it. */
    private static final ThreadLocal<ArrayDeque<Deferred>> DEFERRED = ThreadLocal.withInitial(ArrayDeque::new);

    /** A verb (or a batch) a callback issued during a delivery, and how to fail it when issuing it throws. */
    private record Deferred(Runnable issue, java.util.function.Consumer<DsmException> refuse, int peer) {
    }
    /** Marks that tell a reader not to run (a waiter expected): see {@link Waiting#whenCompleteExpectingWaiter}. */
    private static final ThreadLocal<boolean[]> QUIET = ThreadLocal.withInitial(() -> new boolean[1]);

    /**
     * Test hook (null in production): called by the thread that reads a flight with -1 before
     * the requests are written and with {@code i} before answer {@code i} is read; whatever it
     * throws is a failure of the read.
     */
    static volatile IntConsumer readHook;

    /** Each thread's current flight on one connection (the connection keeps one holder per thread). */
    static final class Holder {
        /** Set by its thread when it starts a flight; cleared (compare-and-set) when it is delivered. */
        final AtomicReference<LaneFlight> current = new AtomicReference<>();
    }

    private final TcpLanes lanes;
    private final TcpLane lane;
    private final Holder holder;

    private static final Flight[] NO_READS = new Flight[0];

    // guarded by this
    private Flight[] reads = new Flight[16];
    private int count;
    private int answerBytes;
    private long lastAppendNanos;
    /** The latest deadline of the reads: how long a reader may block. */
    private long bound;
    /** The right to read was taken (no read is appended after it). */
    private boolean taken;
    /** The thread that holds the right to read, until delivered. */
    private Thread reader;
    /** A flight reader was asked (and has not given up). */
    private boolean readerAsked;
    private volatile boolean delivered;

    private LaneFlight(TcpLanes lanes, TcpLane lane, Holder holder) {
        this.lanes = lanes;
        this.lane = lane;
        this.holder = holder;
        lane.requests(); // cleared: the flight appends to it
    }

    /**
     * Starts a flight on {@code lane} (taken from {@code lanes}) for the thread of
     * {@code holder} with its first read, appended before the fallback can see the flight.
     */
    static CompletableFuture<byte[]> start(TcpLanes lanes, TcpLane lane, Holder holder, long ptr, long remoteKey,
                                           int length) {
        LaneFlight f = new LaneFlight(lanes, lane, holder);
        CompletableFuture<byte[]> first = f.read(ptr, remoteKey, length); // fits: the caller checked the length
        ACTIVE.incrementAndGet();
        holder.current.set(f);
        LIVE.add(f);
        WaitHelp.register(f); // a wait of this thread on any future finishes it first
        if (!armed) { // volatile: the lock only when the fallback is not armed (see Fallback.expired)
            synchronized (ARM_LOCK) {
                if (!armed) {
                    TimerWheel.SHARED.arm(FALLBACK, System.nanoTime() + TimerWheel.TICK_NANOS);
                    armed = true; // only once armed: a failed arm() leaves the next start to try again
                }
            }
        }
        return first;
    }

    /**
     * Appends a READ of {@code length} bytes at {@code ptr}; null when this flight takes no
     * more (it was taken, or it is full): the caller finishes it and starts another.
     */
    CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        synchronized (this) {
            if (taken || count == TcpLane.MAX_BURST || answerBytes + length + Frame.HEADER_LENGTH > MAX_ANSWER_BYTES) {
                return null;
            }
            long now = System.nanoTime();
            Flight f = new Flight(this, ptr, length, lane.nextCorrelation(),
                    OperationDeadline.until(now, lane.timeoutNanos()), now);
            Frame.writeRead(lane.pendingRequests(), f.correlation, ptr, remoteKey, length);
            if (count == reads.length) {
                reads = java.util.Arrays.copyOf(reads, count * 2);
            }
            reads[count++] = f;
            answerBytes += length + Frame.HEADER_LENGTH;
            lastAppendNanos = now;
            if (count == 1 || f.deadline - bound > 0) {
                bound = f.deadline;
            }
            return f;
        }
    }

    /** Whether every future of the flight completed and its lane went back (or was closed). */
    boolean delivered() {
        return delivered;
    }

    @Override
    public boolean settled() {
        return delivered;
    }

    /**
     * A waiter's help ({@code get}, {@code join}, {@code VerbWait.await}): reads the flight on this
     * thread when nobody took it yet and this wait may block as long as the reads' deadlines
     * ({@code waitNanos} is {@link WaitHelp#FOREVER} or ends after them), else makes sure a
     * flight reader reads it. Never waits for the delivery another thread runs: the waiter then
     * waits for its own future only (a callback of that delivery may block on a lock the waiter
     * holds; only the owner's next verb needs the whole delivery, {@link #finish}).
     */
    @Override
    public void help(long waitNanos) {
        takeOrAsk(waitNanos);
    }

    /**
     * Reads the flight here, or asks a reader, as {@link #help}; then waits, at most
     * {@code waitNanos}, until the flight is delivered. Returns whether it is. Called by the
     * owner before its next verb on the connection (issue order), with that verb's deadline.
     */
    boolean finish(long waitNanos) {
        if (delivered) {
            return true;
        }
        boolean forever = waitNanos == WaitHelp.FOREVER;
        long deadline = forever ? 0 : System.nanoTime() + waitNanos;
        if (takeOrAsk(waitNanos)) {
            return true;
        }
        synchronized (this) {
            if (reader == Thread.currentThread()) {
                return false; // a callback of this very delivery: it cannot wait for itself
            }
        }
        return awaitDelivered(forever, deadline);
    }

    /** Reads the flight here when this wait may, else asks a reader; whether it was read here (delivered). */
    private boolean takeOrAsk(long waitNanos) {
        if (delivered) {
            return true;
        }
        Thread me = Thread.currentThread();
        boolean forever = waitNanos == WaitHelp.FOREVER;
        long deadline = forever ? 0 : System.nanoTime() + waitNanos;
        boolean readHere = false;
        boolean ask = false;
        synchronized (this) {
            if (delivered) {
                return true;
            }
            if (!taken) {
                if (!TransportThreads.isTransportThread() && !WaitHelp.delivering()
                        && (forever || deadline - bound >= 0)) {
                    taken = true;
                    reader = me;
                    readHere = true;
                } else {
                    ask = askReaderLocked();
                }
            }
        }
        if (readHere) {
            readAndDeliver();
            return true;
        }
        if (ask) {
            submitReader(false);
        }
        return false;
    }

    /** Waits on the monitor until delivered or {@code deadline} (unless {@code forever}); keeps an interrupt. */
    private boolean awaitDelivered(boolean forever, long deadline) {
        boolean interrupted = false;
        try {
            synchronized (this) {
                while (!delivered) {
                    try {
                        if (forever) {
                            wait();
                        } else {
                            long left = deadline - System.nanoTime();
                            if (left <= 0) {
                                return false;
                            }
                            TimeUnit.NANOSECONDS.timedWait(this, left);
                        }
                    } catch (InterruptedException e) {
                        interrupted = true; // a read in flight may have run: wait on, bounded, and keep the status
                    }
                }
                return true;
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Under the monitor: whether a flight reader must be asked now (once; none while it is taken). */
    private boolean askReaderLocked() {
        if (taken || readerAsked || delivered) {
            return false;
        }
        readerAsked = true;
        return true;
    }

    /** Asks a flight reader; when none may run now the fallback asks again at its next tick. */
    private void submitReader(boolean quiet) {
        VerbPathCounts.flightReaderAsks.increment();
        try {
            lanes.flightReaders().execute(() -> readAsReader(quiet));
        } catch (RejectedExecutionException e) {
            synchronized (this) {
                readerAsked = false; // the fallback asks again, or fails the flight once the lanes closed
            }
        }
    }

    /**
     * A callback or a dependent future was attached to one of this flight's futures before
     * anybody waited: somebody may never wait (the collections' wake-ups read a word that way),
     * so a flight reader reads it once its thread stopped adding reads for
     * {@link #READER_QUIET_NANOS} (at most {@link #READER_PATIENCE_NANOS} after this), unless a
     * waiter took it first. Once per flight. Not when the attaching call said a waiter is
     * expected ({@link Waiting#whenCompleteExpectingWaiter}).
     */
    void dependentAttached() {
        if (QUIET.get()[0]) {
            return;
        }
        boolean ask;
        synchronized (this) {
            ask = askReaderLocked();
        }
        if (ask) {
            submitReader(true);
        }
    }

    /** The flight reader's task (a transport thread: it may block on the lane, bounded by the deadlines). */
    private void readAsReader(boolean quiet) {
        long askedAt = System.nanoTime();
        while (true) {
            if (quiet) {
                LockSupport.parkNanos(READER_QUIET_NANOS); // the owner may still add reads, or wait itself
            }
            long now = System.nanoTime();
            synchronized (this) {
                if (taken || delivered) {
                    return; // a waiter has it
                }
                if (quiet && now - lastAppendNanos < READER_QUIET_NANOS && now - askedAt < READER_PATIENCE_NANOS) {
                    continue; // its thread is still adding reads
                }
                taken = true;
                reader = Thread.currentThread();
            }
            VerbPathCounts.flightReaderReads.increment();
            readAndDeliver();
            return;
        }
    }

    /** The fallback's look at this flight (the wheel's thread: never blocks). */
    private void poll(long now) {
        boolean ask = false;
        boolean failHere = false;
        boolean readHere = false;
        synchronized (this) {
            if (taken || delivered) {
                return;
            }
            if (count > 0 && now - reads[0].deadline > 0) {
                taken = true; // nobody took it by its deadline: it was never sent
                reader = Thread.currentThread();
                failHere = true;
            } else if (lane.broken() || lanes.closed()) {
                taken = true; // its lane closed (the connection closed or was lost) before anybody sent it
                reader = Thread.currentThread();
                readHere = true;
            } else if (now - lastAppendNanos >= FALLBACK_NANOS) {
                ask = askReaderLocked();
            }
        }
        if (failHere) {
            VerbPathCounts.flightPolls.increment();
            deliverFailed(DsmTimeoutException.notSent(Frame.opName(Frame.OP_READ) + " held on a blocking lane",
                    lane.peerNode(), Duration.ofNanos(lane.timeoutNanos())));
        } else if (readHere) {
            VerbPathCounts.flightPolls.increment();
            deliverFailed(lanes.transportClosed() ? lanes.closedException()
                    : NodeUnavailableException.notSent(lane.peerNode(), "the blocking lane to node "
                    + lane.peerNode() + " closed before its held reads were sent"));
        } else if (ask) {
            VerbPathCounts.flightPolls.increment();
            submitReader(false);
        }
    }

    /**
     * With the right to read: sends the requests, reads every answer (blocking, each bounded by
     * its read's deadline through the {@link LaneReaper}), then completes the futures in order
     * and delivers the flight. Whatever is thrown ends the flight: the reads not answered fail
     * typed, the lane is closed, and the futures complete in the {@code finally}.
     */
    private void readAndDeliver() {
        Flight[] rs;
        int n;
        synchronized (this) {
            rs = reads; // no append runs once taken
            n = count;
        }
        int done = 0;
        boolean sent = false;
        DsmException broken = null;
        Error fatal = null;
        try {
            IntConsumer hook = readHook;
            if (hook != null) {
                hook.accept(-1);
            }
            lane.transmit(Frame.OP_READ, rs[0].deadline);
            sent = true;
            VerbPathCounts.flightWrites.increment();
            for (int i = 0; i < n; i++) {
                if (hook != null) {
                    hook.accept(i);
                }
                Flight f = rs[i];
                try {
                    lane.answer(Frame.OP_READ, f.correlation, f.deadline);
                    lane.expectBody(Frame.OP_READ, f.length);
                    byte[] b = new byte[f.length];
                    lane.answerFrame().bytesAt(Frame.HEADER_LENGTH, b, 0, f.length);
                    f.value = b;
                } catch (DsmException e) {
                    if (lane.broken()) {
                        throw e;
                    }
                    f.failure = e; // refused, answered in order: the lane stays in step
                }
                done = i + 1;
            }
        } catch (DsmException e) {
            broken = e;
        } catch (Throwable t) {
            broken = unexpected(t, sent);
            if (t instanceof Error err) {
                fatal = err;
            } else {
                LOG.warn("reading the answers of reads held on a blocking lane to node {} failed", lane.peerNode(), t);
            }
        } finally {
            if (done < n) {
                if (broken == null) {
                    broken = unexpected(new IllegalStateException("the read ended early"), sent);
                }
                lane.close(); // out of step, or lost: never reused
                for (int i = done; i < n; i++) {
                    rs[i].failure = broken;
                }
            }
            deliver(rs, n);
        }
        if (fatal != null) {
            throw fatal;
        }
    }

    /** The typed failure of reads whose reading threw {@code t}: they may have run once the requests left. */
    private DsmException unexpected(Throwable t, boolean sent) {
        String what = "reading the answers of reads held on a blocking lane to node " + lane.peerNode()
                + " failed (" + t + ")";
        return sent ? new NodeUnavailableException(lane.peerNode(), what + "; the reads may or may not have run", t)
                : NodeUnavailableException.notSent(lane.peerNode(), what + " before they were sent", t);
    }

    /** With the right to read: fails every read with {@code e} (never sent) and delivers the flight. */
    private void deliverFailed(DsmException e) {
        Flight[] rs;
        int n;
        synchronized (this) {
            rs = reads;
            n = count;
        }
        try {
            for (int i = 0; i < n; i++) {
                rs[i].failure = e;
            }
        } finally {
            deliver(rs, n);
        }
    }

    /**
     * Completes the futures in issue order (callbacks run here, marked as a delivery: verbs they
     * issue are deferred until it ends), then gives the lane back, marks the flight delivered,
     * wakes its waiters and issues the deferred verbs. Nothing a callback throws stops it.
     */
    private void deliver(Flight[] rs, int n) {
        try {
            WaitHelp.delivering(() -> {
                VerbObserver observer = lane.observer();
                for (int i = 0; i < n; i++) {
                    try {
                        rs[i].deliver(observer, lane.peerNode());
                    } catch (Throwable t) { // a callback's Error: the later reads still complete
                        LOG.warn("completing a read held on a blocking lane to node {} threw", lane.peerNode(), t);
                    }
                }
            });
        } finally {
            try {
                LIVE.remove(this);
                holder.current.compareAndSet(this, null); // not a later flight of the thread
                lanes.giveBack(lane); // closed instead when it broke
            } finally {
                synchronized (this) { // whatever the above threw: the waiters of the delivery are woken
                    delivered = true;
                    reader = null;
                    reads = NO_READS; // completed futures a dependent keeps alive must not keep the others
                    notifyAll();
                }
                ACTIVE.decrementAndGet(); // after the mark: a thread that reads 0 sees it delivered
                if (!WaitHelp.delivering()) {
                    runDeferred();
                }
            }
        }
    }

    /**
     * Issues {@code issue} (a verb a callback issued during this thread's delivery, to node
     * {@code peer}) once the delivery ends; should issuing it throw, {@code refuse} fails its
     * future(s) with a typed not-sent error.
     */
    static void defer(Runnable issue, java.util.function.Consumer<DsmException> refuse, int peer) {
        DEFERRED.get().add(new Deferred(issue, refuse, peer));
    }

    /**
     * Issues the deferred verbs in order. Whatever one throws (any {@link Throwable}) fails
     * that one's futures with a not-sent {@link NodeUnavailableException} naming the cause,
     * and the rest of the queue still runs: no deferred verb is left without an outcome.
     */
    static void runDeferred() { // package-private for tests
        ArrayDeque<Deferred> q = DEFERRED.get();
        Deferred d;
        while ((d = q.poll()) != null) {
            try {
                d.issue().run();
            } catch (Throwable t) {
                LOG.warn("a verb issued by a callback of a lane read could not be issued", t);
                try {
                    d.refuse().accept(NodeUnavailableException.notSent(d.peer(), "a verb a callback of reads held"
                            + " on a blocking lane issued could not be issued (" + t + "); retry it", t));
                } catch (Throwable r) {
                    LOG.warn("failing a verb a callback of a lane read issued threw", r);
                }
            }
        }
    }

    /**
     * Whether a flight may exist or a delivery may run anywhere in this JVM; false means no thread
     * holds a read on a lane or runs a delivery's callbacks (one volatile read: the verbs' fast path).
     */
    static boolean anyActive() {
        return ACTIVE.get() != 0;
    }

    /** Flights started and not delivered, JVM-wide ({@link #anyActive}'s count); for tests. */
    static int active() {
        return ACTIVE.get();
    }

    /** Flights not delivered yet, JVM-wide; for tests. */
    static int live() {
        return LIVE.size();
    }

    /** The wheel entry: looks at every flight nobody took; re-armed while flights exist. */
    private static final class Fallback extends TimerWheel.Timeout {
        @Override
        protected void expired() {
            try {
                long now = System.nanoTime();
                for (LaneFlight f : LIVE) {
                    try {
                        f.poll(now);
                    } catch (Throwable t) { // the other flights are still looked at
                        LOG.warn("lane flight fallback failed", t);
                    }
                }
            } finally {
                synchronized (ARM_LOCK) {
                    if (LIVE.isEmpty()) {
                        armed = false;
                        // a start that added its flight and read armed == true before the write above skipped the
                        // lock: it added first, so this second look (after the volatile write) sees its flight
                        if (!LIVE.isEmpty()) {
                            TimerWheel.SHARED.arm(this, System.nanoTime() + TimerWheel.TICK_NANOS);
                            armed = true;
                        }
                    } else {
                        boolean rearmed = false;
                        try {
                            TimerWheel.SHARED.arm(this, System.nanoTime() + TimerWheel.TICK_NANOS);
                            rearmed = true;
                        } finally {
                            armed = rearmed; // not armed: the next flight's start arms it again
                        }
                    }
                }
            }
        }

        @Override
        public String toString() {
            return "the fallback of tcp lane flights";
        }
    }

    /**
     * A read's future: waiting for it ({@code get}, {@code join}) first finishes its flight
     * (see {@link LaneFlight}), within the wait's own bound; so do the futures made from it.
     */
    static class Waiting<T> extends CompletableFuture<T> implements WaitHelp.Waitable<T> {
        final LaneFlight flight;

        Waiting(LaneFlight flight) {
            this.flight = flight;
        }

        /**
         * Helps this future's flight within {@code waitNanos} (reads it here, or asks a reader:
         * {@link LaneFlight#help}) and what this thread left for its waiter, stopping once this
         * future is done; the caller then waits for this future only. In a callback a delivery
         * runs ({@link WaitHelp#delivering()}) it refuses at once with
         * {@link io.membus.core.error.BlockingCallOnTransportThreadException}: callbacks must not block.
         */
        private void help(long waitNanos) {
            // a callback of a delivery (this flight's or another's) must not block: a later read of its own flight
            // would wait for ever, another flight's wait holds back the rest of the delivery
            WaitHelp.checkNotDelivering();
            long deadline = System.nanoTime() + waitNanos;
            flight.help(waitNanos);
            if (!isDone()) {
                // a future made from a later read: its flight too, within what is left of the same wait
                WaitHelp.beforeWait(waitNanos == WaitHelp.FOREVER ? WaitHelp.FOREVER
                        : Math.max(0, deadline - System.nanoTime()), this);
            }
        }

        @Override
        public T get() throws InterruptedException, ExecutionException {
            if (!isDone()) {
                help(WaitHelp.FOREVER);
            }
            return super.get();
        }

        @Override
        public T get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException,
                TimeoutException {
            if (!isDone()) {
                long deadline = System.nanoTime() + unit.toNanos(timeout);
                help(Math.max(0, unit.toNanos(timeout)));
                return super.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            }
            return super.get(timeout, unit);
        }

        @Override
        public T join() {
            if (!isDone()) {
                help(WaitHelp.FOREVER);
            }
            return super.join();
        }

        @Override
        public <U> CompletableFuture<U> newIncompleteFuture() {
            flight.dependentAttached(); // a callback or a dependent: somebody may never wait
            return new Waiting<>(flight);
        }

        @Override
        public void whenCompleteExpectingWaiter(BiConsumer<? super T, ? super Throwable> action) {
            boolean[] quiet = QUIET.get();
            quiet[0] = true;
            try {
                whenComplete(action);
            } finally {
                quiet[0] = false;
            }
        }

        @Override
        public void dependentAttached() {
            flight.dependentAttached();
        }
    }

    /** One read of a flight. */
    static final class Flight extends Waiting<byte[]> {
        final long ptr;
        final int length;
        final long correlation;
        final long deadline;
        final long issuedNanos;
        byte[] value;              // set by the reader, read by the same thread when it delivers
        DsmException failure;

        Flight(LaneFlight flight, long ptr, int length, long correlation, long deadline, long issuedNanos) {
            super(flight);
            this.ptr = ptr;
            this.length = length;
            this.correlation = correlation;
            this.deadline = deadline;
            this.issuedNanos = issuedNanos;
        }

        void deliver(VerbObserver observer, int peer) {
            // the future completes whatever the observer does (a throwing observer must not leave its waiters waiting)
            if (failure == null) {
                byte[] v = value;
                value = null; // the future holds it now
                try {
                    observer.completed(peer, VerbObserver.READ, length, System.nanoTime() - issuedNanos);
                } finally {
                    complete(v);
                }
            } else {
                try {
                    if (failure instanceof DsmTimeoutException) {
                        observer.timedOut(peer, VerbObserver.READ);
                    } else {
                        observer.failed(peer, VerbObserver.READ);
                    }
                } finally {
                    completeExceptionally(failure);
                }
            }
        }
    }
}
