package io.membus.transport.tcp;

import io.membus.core.OperationDeadline;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.time.TimerWheel;
import io.membus.core.transport.TransportThreads;
import io.membus.core.transport.VerbObserver;

import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;

/**
 * Asynchronous reads of one thread held on one blocking lane until somebody waits for
 * them (issue 28: the floor's shape for verbs in flight). {@link TcpConnection#read} by a
 * thread that may use a lane ({@link TcpConnection#blockingNow()}'s conditions) appends
 * the READ request to the lane's buffer and returns a {@link Flight} future: nothing is
 * written and no other thread is woken. Consecutive reads of the same thread go to the
 * same lane. The first thread that waits for one of the futures ({@code get}, {@code join},
 * or those of a future made from it by {@code thenApply}, {@code whenComplete}, ...; and any
 * {@code VerbWait.await} of the owner thread, whatever future it waits for: the flight is
 * registered with {@link io.membus.core.transport.WaitHelp}, so a routed read's wrapper or an
 * {@code allOf} awaited by the project's blocking calls finishes it too) sends
 * every request with one {@code write} and reads every answer itself, then gives the lane
 * back and completes the futures in issue order on its own thread: the batching floor's
 * two blocked threads per burst, where the pipelined channel has four.
 *
 * <h2>Nobody waits: the fallback reader</h2>
 * A read whose future only has callbacks, or whose thread waits for something else, must
 * still complete: one entry of the shared {@link TimerWheel}, armed while flights exist,
 * looks at every flight each tick (1 ms) and one that nobody read for {@link #FALLBACK_NANOS}
 * is taken over there: its requests are sent and its answers read as they arrive, without
 * a blocking read ({@link TcpLane#tryAnswer}: only what the socket holds), a tick at a time.
 * A read nobody waits for thus completes 1–2 ms after its answer arrived, where the
 * pipelined channel completed it at once: the price of the saved hand-offs, paid only by
 * callers that do not wait.
 *
 * <h2>Order, deadlines, failures</h2>
 * A flight is closed to new reads once its requests left; its thread's next verb on the
 * connection (any kind, any path: {@link TcpConnection#finishFlight}) first finishes it —
 * reads its answers, or waits for whoever reads them — so verbs of one thread to one node
 * keep issue order across the lane and the pipelined channel. Every read has its deadline
 * (the operation timeout, or the thread's {@link OperationDeadline}); a waiting reader
 * gives it to the {@link LaneReaper}, the fallback checks it itself; a passed deadline
 * breaks the lane and fails the read and every later one with {@link DsmTimeoutException}
 * (they may have run). A lost or closed lane fails them with its typed error; an ERROR
 * answer fails that read only. At most {@link TcpLane#MAX_BURST} reads and
 * {@link #MAX_ANSWER_BYTES} of answers per flight; a longer burst finishes the flight and
 * starts another.
 *
 * <p><b>Note:</b> thread-safe. The owner thread appends; one thread at a time reads (the
 * right to read is taken under the flight's monitor: a waiter, another waiter, or the
 * wheel's thread); the monitor orders the appended requests before their sending and the
 * answers before the completions, which happen outside it, in issue order, on the thread
 * that read them (callbacks must not block). {@link #ended} is volatile.
 */
final class LaneFlight implements io.membus.core.transport.WaitHelp.Pending {
    /** A flight nobody read for this long is taken over by the fallback reader. */
    static final long FALLBACK_NANOS = 500_000L;
    /**
     * A flight reader ({@link #dependentAttached}) reads a flight once its thread added no read
     * for this long (the thread may still add reads, or wait itself, which is cheaper)...
     */
    static final long READER_QUIET_NANOS = 50_000L;
    /** ...or once it waited this long for the thread, whatever the thread does. */
    static final long READER_PATIENCE_NANOS = 1_000_000L;
    /** Most answer bytes one flight waits for (bounds what the target holds for a flight nobody reads yet). */
    static final int MAX_ANSWER_BYTES = 64 * 1024;
    private static final Set<LaneFlight> LIVE = ConcurrentHashMap.newKeySet();
    private static final Object ARM_LOCK = new Object();
    private static final Fallback FALLBACK = new Fallback();
    private static boolean armed; // guarded by ARM_LOCK

    /** Each thread's current flight on one connection (the connection keeps one holder per thread). */
    static final class Holder {
        /** Set by its thread when it starts a flight; cleared (compare-and-set) by whoever ends it. */
        final java.util.concurrent.atomic.AtomicReference<LaneFlight> current =
                new java.util.concurrent.atomic.AtomicReference<>();
    }

    private final TcpLanes lanes;
    private final TcpLane lane;
    private final Holder holder;
    private final long startedNanos = System.nanoTime();

    // guarded by this
    private Flight[] reads = new Flight[16];
    private int count;
    private int answerBytes;
    private boolean sent;
    private boolean reading;
    private int answered;
    private boolean readerAsked;
    private long lastAppendNanos;
    private volatile boolean ended;

    private LaneFlight(TcpLanes lanes, TcpLane lane, Holder holder) {
        this.lanes = lanes;
        this.lane = lane;
        this.holder = holder;
        lane.requests(); // cleared: the flight appends to it
    }

    /**
     * Starts a flight on {@code lane} (taken from {@code lanes}) for the thread of
     * {@code holder} with its first read, appended before the fallback reader can see the
     * flight (an empty flight it would end at once).
     */
    static CompletableFuture<byte[]> start(TcpLanes lanes, TcpLane lane, Holder holder, long ptr, long remoteKey,
                                           int length) {
        LaneFlight f = new LaneFlight(lanes, lane, holder);
        CompletableFuture<byte[]> first = f.read(ptr, remoteKey, length); // fits: the caller checked the length
        holder.current.set(f);
        LIVE.add(f);
        io.membus.core.transport.WaitHelp.register(f); // a wait of this thread on any future finishes it first
        synchronized (ARM_LOCK) {
            if (!armed) {
                armed = true;
                TimerWheel.SHARED.arm(FALLBACK, System.nanoTime() + TimerWheel.TICK_NANOS);
            }
        }
        return first;
    }

    /**
     * Appends a READ of {@code length} bytes at {@code ptr}; null when this flight takes no
     * more (its requests left, or it is full): the caller finishes it and starts another.
     */
    CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        synchronized (this) {
            if (sent || ended || reading || count == TcpLane.MAX_BURST
                    || answerBytes + length + Frame.HEADER_LENGTH > MAX_ANSWER_BYTES) {
                return null;
            }
            long now = System.nanoTime();
            Flight f = new Flight(this, ptr, length, lane.nextCorrelation(), OperationDeadline.until(now,
                    lane.timeoutNanos()), now);
            Frame.writeRead(lane.pendingRequests(), f.correlation, ptr, remoteKey, length);
            if (count == reads.length) {
                reads = java.util.Arrays.copyOf(reads, count * 2);
            }
            reads[count++] = f;
            answerBytes += length + Frame.HEADER_LENGTH;
            lastAppendNanos = now;
            return f;
        }
    }

    boolean ended() {
        return ended;
    }

    @Override
    public boolean settled() {
        return ended;
    }

    /**
     * Sends the requests and reads every answer on this thread, then completes the reads;
     * or, when another thread reads them, waits until it has (bounded by the last read's
     * deadline plus the grace). Called by a waiter and by the owner before its next verb.
     */
    @Override
    public void finish() {
        if (ended) {
            return;
        }
        if (TransportThreads.isTransportThread()) {
            return; // must not block here: the fallback reader finishes it
        }
        long giveUp = 0;
        while (!ended) {
            synchronized (this) {
                if (!reading && !ended) {
                    reading = true;
                    break;
                }
                if (giveUp == 0 && count > 0) {
                    giveUp = reads[count - 1].deadline + OperationDeadline.VERB_GRACE.toNanos();
                }
            }
            if (giveUp != 0 && System.nanoTime() - giveUp > 0) {
                return; // the reader is stuck past every deadline: the reaper and the fallback end it
            }
            LockSupport.parkNanos(20_000L); // another thread reads (the fallback's poll is short)
        }
        if (ended) {
            return;
        }
        readAll(true);
    }

    /**
     * A callback or a dependent future was attached to one of this flight's futures before
     * anybody waited: a flight reader thread (the transport's {@code flightReaders}) will read
     * it once its thread stopped adding reads for {@link #READER_QUIET_NANOS} (at most
     * {@link #READER_PATIENCE_NANOS} after this), unless a waiter took it first. A read whose
     * callback wakes somebody (the collections' wake-ups) thus completes a round trip after
     * its issue, as on the pipelined channel, not at the fallback's next tick. Once per flight.
     */
    void dependentAttached() {
        synchronized (this) {
            if (readerAsked || ended || reading || sent) {
                return;
            }
            readerAsked = true;
        }
        try {
            lanes.flightReaders().execute(this::readAsReader);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // every reader busy, or the transport closing: the fallback reads it
        }
    }

    /** The flight reader's task (a transport thread: it may block on the lane, bounded by the deadlines). */
    private void readAsReader() {
        long askedAt = System.nanoTime();
        while (true) {
            LockSupport.parkNanos(READER_QUIET_NANOS);
            long now = System.nanoTime();
            synchronized (this) {
                if (ended || reading) {
                    return; // a waiter or the fallback has it
                }
                if (now - lastAppendNanos < READER_QUIET_NANOS && now - askedAt < READER_PATIENCE_NANOS) {
                    continue; // its thread is still adding reads
                }
                reading = true;
            }
            VerbPathCounts.flightReaderReads.increment();
            readAll(true);
            return;
        }
    }

    /** The fallback: takes over a flight nobody read for {@link #FALLBACK_NANOS}; never blocks (wheel thread). */
    private void poll(long now) {
        synchronized (this) {
            if (ended || reading || now - startedNanos < FALLBACK_NANOS) {
                return;
            }
            reading = true;
        }
        VerbPathCounts.flightPolls.increment();
        readAll(false);
    }

    /**
     * With the right to read: sends the requests if they have not left, reads answers
     * (all of them, blocking, or what the socket holds), and ends the flight once every
     * read is resolved. Completions run outside the monitor, in issue order.
     */
    private void readAll(boolean block) {
        int from;
        int to;
        boolean send;
        Flight[] rs;
        synchronized (this) {
            from = answered;
            to = count;
            send = !sent;
            sent = true; // with the right to read: no append runs now
            rs = reads;  // only appends replace it, and none run while reading
        }
        if (send && to > from) {
            try {
                lane.transmit(Frame.OP_READ, rs[from].deadline);
                VerbPathCounts.flightWrites.increment();
            } catch (DsmException e) {
                end(rs, from, from, to, e);
                return;
            }
        }
        readAllFrom(rs, from, to, block);
    }

    /** Reads the answers of {@code [from, to)} in order; an ERROR answer fails its read only (the lane stays in step). */
    private void readAllFrom(Flight[] rs, int from, int to, boolean block) {
        int done = from;
        DsmException broken = null;
        try {
            for (int i = from; i < to; i++) {
                Flight f = rs[i];
                try {
                    if (block) {
                        lane.answer(Frame.OP_READ, f.correlation, f.deadline);
                    } else {
                        if (System.nanoTime() - f.deadline > 0) {
                            lane.expireNow();
                            throw new DsmTimeoutException(Frame.opName(Frame.OP_READ), lane.peerNode(),
                                    java.time.Duration.ofNanos(lane.timeoutNanos()));
                        }
                        if (!lane.tryAnswer(Frame.OP_READ, f.correlation)) {
                            break;
                        }
                    }
                    lane.expectBody(Frame.OP_READ, f.length);
                    byte[] b = new byte[f.length];
                    lane.answerFrame().bytesAt(Frame.HEADER_LENGTH, b, 0, f.length);
                    f.value = b;
                } catch (DsmException e) {
                    if (lane.broken()) {
                        throw e;
                    }
                    f.failure = e; // refused, answered in order
                }
                done = i + 1;
            }
        } catch (DsmException e) {
            broken = e;
        }
        end(rs, from, done, to, broken);
    }

    /**
     * Reads {@code [first, done)} are resolved; {@code broken}: the lane failed and every
     * read from {@code done} on fails with it. Ends the flight when all are resolved (the
     * lane goes back), else gives up the right to read (the fallback's partial poll).
     * Completes the resolved reads outside the monitor, in order.
     */
    private void end(Flight[] rs, int first, int done, int to, DsmException broken) {
        if (broken != null) {
            for (int i = done; i < to; i++) {
                rs[i].failure = broken;
            }
            done = to;
        }
        boolean finished;
        synchronized (this) {
            answered = done;
            finished = done == count; // no append ran while reading
            if (finished) {
                ended = true;
            }
            reading = false;
        }
        if (finished) {
            LIVE.remove(this);
            holder.current.compareAndSet(this, null); // not a later flight of the thread
            lanes.giveBack(lane);
        }
        VerbObserver observer = lane.observer();
        for (int i = first; i < done; i++) {
            rs[i].deliver(observer, lane.peerNode());
        }
    }

    /** The wheel entry: polls every flight nobody read for {@link #FALLBACK_NANOS}; re-armed while flights exist. */
    private static final class Fallback extends TimerWheel.Timeout {
        @Override
        protected void expired() {
            long now = System.nanoTime();
            for (LaneFlight f : LIVE) {
                try {
                    f.poll(now);
                } catch (RuntimeException e) {
                    org.slf4j.LoggerFactory.getLogger(LaneFlight.class).warn("lane flight poll failed", e);
                }
            }
            synchronized (ARM_LOCK) {
                if (LIVE.isEmpty()) {
                    armed = false;
                } else {
                    TimerWheel.SHARED.arm(this, System.nanoTime() + TimerWheel.TICK_NANOS);
                }
            }
        }

        @Override
        public String toString() {
            return "the fallback reader of tcp lane flights";
        }
    }

    /**
     * A read's future: waiting for it ({@code get}, {@code join}) first finishes its flight
     * on the waiting thread (see {@link LaneFlight}); so do the futures made from it.
     */
    static class Waiting<T> extends CompletableFuture<T> {
        final LaneFlight flight;

        Waiting(LaneFlight flight) {
            this.flight = flight;
        }

        private void help() {
            if (!isDone() && !flight.ended()) {
                flight.finish();
            }
        }

        @Override
        public T get() throws InterruptedException, ExecutionException {
            help();
            return super.get();
        }

        @Override
        public T get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException,
                TimeoutException {
            help();
            return super.get(timeout, unit);
        }

        @Override
        public T join() {
            help();
            return super.join();
        }

        @Override
        public <U> CompletableFuture<U> newIncompleteFuture() {
            flight.dependentAttached(); // a callback or a dependent: somebody may never wait
            return new Waiting<>(flight);
        }
    }

    /** One read of a flight. */
    static final class Flight extends Waiting<byte[]> {
        final long ptr;
        final int length;
        final long correlation;
        final long deadline;
        final long issuedNanos;
        byte[] value;              // set by the reader, published by the flight's monitor
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
            if (failure == null) {
                observer.completed(peer, VerbObserver.READ, length, System.nanoTime() - issuedNanos);
                complete(value);
            } else {
                if (failure instanceof DsmTimeoutException) {
                    observer.timedOut(peer, VerbObserver.READ);
                } else {
                    observer.failed(peer, VerbObserver.READ);
                }
                completeExceptionally(failure);
            }
        }
    }
}
