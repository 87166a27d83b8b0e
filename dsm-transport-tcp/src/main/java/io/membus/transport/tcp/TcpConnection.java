package io.membus.transport.tcp;

import io.membus.core.OpenResources;
import io.membus.core.OperationDeadline;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.message.Outbox;
import io.membus.core.transport.Batch;
import io.membus.core.transport.Connection;
import io.membus.core.transport.LongCompletion;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.VerbObserver;
import io.membus.core.transport.Verbs;
import io.membus.core.transport.WaitHelp;
import io.membus.core.transport.pipeline.Verb;
import io.membus.core.transport.pipeline.VerbOwner;
import io.membus.core.transport.pipeline.VerbPipeline;
import io.netty.channel.Channel;
import io.netty.channel.EventLoop;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The initiator's end of a tcp connection to one peer incarnation: its state machine
 * (CONNECTING, OPEN, DOWN, CLOSED), verb issue into its {@link VerbPipeline}, its
 * messages and its blocking lanes. The other jobs are classes of their own: the wire
 * ({@link TcpVerbWire}: request frames out, answers in), connecting and reconnecting
 * ({@link TcpDialer}), batches ({@link TcpBatch}), the outbox and the message frames it
 * lets out ({@link TcpMessageQueue}), the failure an ERROR frame carries
 * ({@link ErrorFrames}); the peer's address is parsed by dsm-core's {@code HostPort}.
 *
 * <h2>Issue, pipelining and order</h2>
 * Any thread issues a verb into the connection's {@link VerbPipeline} (the in-order
 * engine every transport shares) and the connection's I/O thread is woken at most
 * once per burst. The I/O thread pumps the pipeline: it encodes up to
 * {@code membus.transports.tcp.max-in-flight} verbs into one buffer (this transport's
 * wire, {@link TcpVerbWire}) with one flush. The target executes a connection's verbs in arrival
 * order and answers in that order, so responses complete the futures in issue order,
 * on the I/O thread. A verb's correlation id is its sequence number in the pipeline.
 *
 * <h2>Backpressure</h2>
 * A verb beyond {@code membus.transports.tcp.max-in-flight} waits in the backlog (no thread blocks)
 * until a response frees a slot, under its own deadline: one that times out
 * while waiting is never sent. Nothing is written while the channel is not
 * writable (the peer does not read): verbs wait in the backlog the same way.
 *
 * <h2>Deadlines and failures</h2>
 * Each verb's deadline is its issue time plus the operation timeout; the
 * pipeline's one entry on the shared timer wheel fails expired verbs with
 * {@link DsmTimeoutException} (no timer per verb). A verb that timed out on the wire frees its window slot; once it
 * reaches the head of the window it is forgotten, and its late answer is
 * recognised by correlation id and ignored, so the window stays bounded when a
 * peer never answers. A future completes once: a timed-out verb is never also
 * reported as executed. A lost connection fails every verb in flight or waiting at once
 * with {@link NodeUnavailableException}, and the connection reconnects with
 * exponential backoff ({@code membus.transports.tcp.reconnect-min-backoff}..{@code max-backoff});
 * while it is down, {@link #isOpen()} is false and verbs fail at once. No verb is
 * ever sent twice: a verb that failed may or may not have been executed.
 * A reconnect that meets another incarnation of the peer, a wrong secret or a
 * fence closes the connection for good.
 *
 * <p><b>Note:</b> thread-safe: any thread may issue verbs; the order guarantee
 * holds for verbs issued by one thread (or ordered by the callers). Futures
 * complete on the connection's I/O thread (answers), the timer wheel's thread
 * (deadlines) or the thread that closes the connection: callbacks must not block.
 * A read held on a lane ({@link LaneFlight}: a thread that may use a lane, until it
 * waits) completes on the thread that reads its answer: its waiter or a flight reader
 * thread (a callback was attached, a waiter with a short deadline, or nobody waited); a
 * thread's next verb on the connection waits until its held reads are delivered (every
 * future completed), bounded by that verb's deadline, so order holds across the two paths;
 * a verb a callback issues while its thread delivers held reads is issued after the
 * delivery, and a blocking verb there is refused ({@code BlockingCallOnTransportThreadException}).
 * While no flight exists in the JVM ({@link LaneFlight#anyActive()}), verbs skip all of that.
 * With {@code membus.transports.tcp.hold-reads = false} no read is held: every read is posted.
 */
final class TcpConnection implements Connection {
    private static final Logger LOG = LoggerFactory.getLogger(TcpConnection.class);
    private static final int CONNECTING = 0;
    private static final int OPEN = 1;
    private static final int DOWN = 2;
    private static final int CLOSED = 3;

    private final TcpTransport transport;
    private final PeerInfo peer;
    private final EventLoop loop;
    private final int maxInFlight;
    /** Longest read / write whose frame fits {@code membus.transports.tcp.max-frame} (and {@link SegmentTable#MAX_VERB_LENGTH}). */
    private final int maxReadLength;
    private final int maxWriteLength;

    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(TcpConnection.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** CONNECTING, OPEN, DOWN or CLOSED; CLOSED is final (every change out of another state is a CAS). */
    private volatile int state = CONNECTING;
    /** This connection's entry in {@link OpenResources#CONNECTIONS}, removed when it turns CLOSED. */
    private final long openId;
    private volatile String downReason = "connection not open";
    private volatile Channel channel;
    /**
     * The first connect's outcome, failed by {@link #close(String)} if it has not completed: a dial's
     * listeners run on the I/O threads, which a closing transport shuts down, and Netty drops what it
     * can no longer run there. Written before {@link #state} is read in {@link #start()}; close writes
     * the state before it reads this: one of the two sees the other.
     */
    private volatile CompletableFuture<Void> starting;

    // issue side: any thread
    private final VerbPipeline<Verb> pipeline;
    /** The pipeline's wire: request frames out, answers in (I/O thread). */
    private final TcpVerbWire wire;
    /** The first connect and the reconnects after a loss. */
    private final TcpDialer dialer;
    private final AtomicBoolean drainScheduled = new AtomicBoolean();
    private final Runnable drainTask = this::drain;
    /** Its messages: the outbox and the frames it let out, waiting for the I/O thread. */
    private final TcpMessageQueue messages;
    /** The blocking lanes, or null when {@code membus.transports.tcp.blocking-lanes} is 0. */
    private final TcpLanes lanes;
    /**
     * Whether a {@code readAsync} may be held on a lane ({@link LaneFlight}): lanes exist and
     * {@code membus.transports.tcp.hold-reads} is true. False: reads are posted on the pipelined
     * channel and no flight exists on this connection.
     */
    private final boolean holdReads;
    /** Each issuing thread's unsettled verbs on this connection (see {@link #blockingNow()}). */
    private final ThreadLocal<VerbOwner> owners = ThreadLocal.withInitial(VerbOwner::new);
    /** Each thread's reads held on a lane until it waits ({@link LaneFlight}); empty without lanes. */
    private final ThreadLocal<LaneFlight.Holder> flights = new ThreadLocal<>(); // made by a thread's first held read

    TcpConnection(TcpTransport transport, PeerInfo peer, EventLoop loop) {
        this.transport = transport;
        this.peer = peer;
        this.loop = loop;
        io.membus.core.config.HostPort address;
        try {
            address = io.membus.core.config.HostPort.parse("peer address", peer.address());
        } catch (io.membus.core.error.DsmConfigException e) {
            throw NodeUnavailableException.notSent(peer.nodeId(), e.getMessage()
                    + "; the directory entry of the node is not a tcp address", e);
        }
        this.maxInFlight = transport.settings.maxInFlight;
        int maxFrame = transport.settings.maxFrame;
        this.maxReadLength = Math.min(SegmentTable.MAX_VERB_LENGTH, maxFrame - Frame.HEADER_LENGTH);
        this.maxWriteLength = Math.min(SegmentTable.MAX_VERB_LENGTH,
                maxFrame - Frame.HEADER_LENGTH - Frame.WRITE_FIXED_BODY_LENGTH);
        this.messages = new TcpMessageQueue(this, transport, peer);
        this.wire = new TcpVerbWire(this, peer, maxInFlight);
        this.pipeline = new VerbPipeline<>(peer.nodeId(), transport.settings.operationTimeout, maxInFlight,
                transport.observer(), wire, false);
        wire.pipeline(pipeline);
        this.dialer = new TcpDialer(this, transport, peer, address.host(), address.port(), loop);
        this.lanes = transport.settings.blockingLanes == 0 ? null
                : new TcpLanes(this, transport, peer, address.host(), address.port(), transport.settings.blockingLanes);
        this.holdReads = lanes != null && transport.settings.holdReads;
        this.openId = OpenResources.CONNECTIONS.opened("TcpConnection of node " + transport.nodeId() + " to " + peer);
    }

    /** Connects and authenticates; completes when verbs may be posted. */
    CompletableFuture<Void> start() {
        CompletableFuture<Void> ready = new CompletableFuture<>();
        starting = ready;
        if (state == CLOSED) { // closed by its transport's close() before it started: no dial
            ready.completeExceptionally(refusal(downReason));
        } else {
            dialer.attempt(ready);
        }
        return ready.whenComplete((v, e) -> {
            if (e != null) {
                close(e.getMessage());
            }
        });
    }

    @Override
    public PeerInfo peer() {
        return peer;
    }

    @Override
    public boolean isOpen() {
        return state == OPEN;
    }

    /** Whether it closed for good (any thread). */
    boolean isClosed() {
        return state == CLOSED;
    }

    /** The open channel, or null while connecting, down or closed (volatile). */
    Channel channel() {
        return channel;
    }

    @Override
    public void close() {
        close("connection closed by its owner");
    }

    /** Closes for good: fails every verb in flight or waiting with {@code reason}, stops reconnecting. */
    @Override
    public void close(String reason) {
        if (state == CLOSED) {
            return;
        }
        messages.outbox().close(new NodeUnavailableException(peer.nodeId(), reason + " (peer " + peer + ")"));
        downReason = reason; // before the state: whoever sees CLOSED reads this reason
        int s;
        do {
            s = state;
            if (s == CLOSED) {
                return;
            }
        } while (!STATE.compareAndSet(this, s, CLOSED));
        OpenResources.CONNECTIONS.closed(openId);
        transport.forget(this);
        Channel ch = channel;
        if (ch != null) {
            ch.close();
        }
        if (lanes != null) {
            lanes.closeAll(true);
        }
        String why = reason + " (peer " + peer + ")";
        java.util.function.Supplier<DsmException> refused = () -> refusal(reason);
        CompletableFuture<Void> start = starting; // a first connect still dialing ends here, not on a dropped listener
        if (start != null && !start.isDone()) {
            start.completeExceptionally(refused.get());
        }
        pipeline.close(new NodeUnavailableException(peer.nodeId(), why), refused.get(), refused);
        try {
            loop.execute(() -> {
                Channel c = channel;
                if (c != null) {
                    c.close(); // the I/O thread may have published it after the read above
                }
                dialer.cancel();
                failAll(reason);
            });
        } catch (RejectedExecutionException e) {
            failIssued(reason); // the I/O threads are gone: only the issue queue can hold verbs
        }
    }

    /**
     * What a verb or a connect refused by a closed connection fails with: closed because this
     * node's transport closed, what never left and what comes later is refused as closed (a retry
     * cannot help), not as an unavailable peer.
     */
    private DsmException refusal(String reason) {
        return transport.isClosed() ? transport.closedException()
                : NodeUnavailableException.notSent(peer.nodeId(), reason + " (peer " + peer + ")");
    }

    // ------------------------------------------------------------------ verbs

    @Override
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        if (holdReads && (!LaneFlight.anyActive() || !WaitHelp.delivering())) {
            CompletableFuture<byte[]> held = readOnLane(ptr, remoteKey, length);
            if (held != null) {
                return held;
            }
        }
        return issue(new Verb(VerbObserver.READ, ptr, remoteKey, length, 0, 0, null, 0));
    }

    /**
     * The read held on the calling thread's {@link LaneFlight} (appended to its open flight, or
     * a new flight started on an idle lane once the earlier one is delivered), or null: post
     * it. A thread may hold reads on a lane when it may run blocking verbs on one
     * ({@link #blockingNow()}'s conditions) and the read fits a lane.
     */
    private CompletableFuture<byte[]> readOnLane(long ptr, long remoteKey, int length) {
        LaneFlight.Holder holder = flights.get();
        if (holder == null) {
            holder = new LaneFlight.Holder();
            flights.set(holder);
        }
        LaneFlight current = holder.current.get();
        if (current != null && !current.delivered()) {
            CompletableFuture<byte[]> f = current.read(ptr, remoteKey, length);
            if (f != null) {
                return f; // joins the flight still open
            }
            // taken or full: its futures complete first (issue order), then a new flight
            DsmTimeoutException late = finishFlight();
            if (late != null) {
                return CompletableFuture.failedFuture(late);
            }
        }
        if (length > TcpLane.MAX_VERB_LENGTH || length < 0 || state != OPEN || transport.faults().active()
                || io.membus.core.transport.TransportThreads.isTransportThread()
                || !pipeline.settledFor(owners.get())) {
            return null;
        }
        TcpLane lane = lanes.takeForFlight();
        if (lane == null) {
            return null;
        }
        return LaneFlight.start(lanes, lane, holder, ptr, remoteKey, length);
    }

    /**
     * Waits until the calling thread's {@link LaneFlight} on this connection is delivered
     * (every future of it completed) before the thread issues a verb another way, reading it
     * on this thread when nobody took it: the verb cannot overtake, nor complete before, the
     * thread's held reads. At most until the verb's deadline ({@link #verbWaitNanos()}, computed
     * only when there is a flight to wait for).
     *
     * @return null, or the not-sent timeout when the flight was not delivered in time
     */
    private DsmTimeoutException finishFlight() {
        if (!holdReads) {
            return null;
        }
        LaneFlight.Holder holder = flights.get();
        LaneFlight f = holder == null ? null : holder.current.get();
        if (f == null || f.delivered()) {
            return null;
        }
        long waitNanos = Math.max(0, verbWaitNanos());
        if (f.finish(waitNanos)) {
            return null;
        }
        return DsmTimeoutException.notSent("wait for the reads this thread holds on a blocking lane to node "
                + peer.nodeId() + " (a verb issued after them waits for their answers)", peer.nodeId(),
                Duration.ofNanos(Math.max(0, waitNanos)));
    }

    /** What a verb issued now may wait for its thread's held reads: what is left of its deadline. */
    private long verbWaitNanos() {
        long now = System.nanoTime();
        return OperationDeadline.until(now, transport.settings.operationTimeout.toNanos()) - now;
    }

    @Override
    public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
        if (badRange != null) {
            return CompletableFuture.failedFuture(badRange);
        }
        if (length > maxWriteLength) { // before the copy
            return CompletableFuture.failedFuture(new BadLengthException(ptr, length, maxWriteLength));
        }
        byte[] copy = java.util.Arrays.copyOfRange(src, offset, offset + length);
        return issue(new Verb(VerbObserver.WRITE, ptr, remoteKey, length, 0, 0, copy, 0));
    }

    @Override
    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        return issue(new Verb(VerbObserver.CAS, ptr, remoteKey, 8, expected, update, null, 0));
    }

    @Override
    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
        return issue(new Verb(VerbObserver.FAA, ptr, remoteKey, 8, delta, 0, null, 0));
    }

    @Override
    public void compareAndSwap(long ptr, long remoteKey, long expected, long update, LongCompletion done) {
        issue(new Verb(VerbObserver.CAS, ptr, remoteKey, 8, expected, update, null, 0, done));
    }

    @Override
    public void fetchAndAdd(long ptr, long remoteKey, long delta, LongCompletion done) {
        issue(new Verb(VerbObserver.FAA, ptr, remoteKey, 8, delta, 0, null, 0, done));
    }

    /** Verbs issued and not completed: waiting, on the wire, or running on a blocking lane (a metrics gauge). */
    @Override
    public int inFlight() {
        return pipeline.pending() + (lanes == null ? 0 : lanes.busyCount());
    }

    /** Verbs waiting for room in the window, a writable channel or an injected delay, for a metrics gauge. */
    public int backlog() {
        return pipeline.backlog();
    }

    // ------------------------------------------------------------------ messages

    @Override
    public CompletableFuture<Void> send(short channel, byte[] payload) {
        if (state != OPEN) {
            return CompletableFuture.failedFuture(unavailable());
        }
        return cast(messages.outbox().post(channel, false, payload));
    }

    @Override
    public CompletableFuture<byte[]> request(short channel, byte[] payload) {
        if (state != OPEN) {
            return CompletableFuture.failedFuture(unavailable());
        }
        return messages.outbox().post(channel, true, payload);
    }

    /**
     * On an idle blocking lane, when there is one and no fault rule is set (fault rules act on the
     * pipelined channel's messages); else {@code null}: post it with {@link #request}.
     */
    @Override
    public byte[] requestDirect(short channel, byte[] payload) {
        if (lanes == null || state != OPEN || transport.faults().active()) {
            return null;
        }
        return lanes.requestDirect(channel, payload);
    }

    @SuppressWarnings("unchecked")
    private static <T> CompletableFuture<T> cast(CompletableFuture<?> f) {
        return (CompletableFuture<T>) (CompletableFuture<?>) f;
    }

    @Override
    public Batch batch() {
        return new TcpBatch(this);
    }

    /** Issues a submitted batch's verbs in order: one wake-up of the I/O thread for all of them. */
    void submit(List<Verb> verbs) {
        if (lanes != null && LaneFlight.anyActive()) { // no flight anywhere: nothing to defer or wait for
            if (WaitHelp.delivering()) { // a callback of a held read: after its flight's futures
                LaneFlight.defer(() -> submit(verbs), e -> verbs.forEach(v -> v.refuse(e)), peer.nodeId());
                return;
            }
            DsmTimeoutException late = finishFlight();
            if (late != null) {
                for (Verb v : verbs) {
                    v.refuse(late);
                }
                return;
            }
        }
        boolean any = false;
        for (Verb v : verbs) {
            long hold = admit(v);
            if (hold != REFUSED) {
                v.owner = owners.get();
                if (pipeline.enqueue(v, hold)) {
                    any = true;
                }
            }
        }
        if (any) {
            wake();
        }
    }

    private <T> CompletableFuture<T> issue(Verb v) {
        if (lanes != null && LaneFlight.anyActive()) { // no flight anywhere: nothing to defer or wait for
            if (WaitHelp.delivering()) { // a callback of a held read: after its flight's futures
                LaneFlight.defer(() -> issue(v), v::refuse, peer.nodeId());
                return v.future();
            }
            DsmTimeoutException late = finishFlight();
            if (late != null) {
                v.refuse(late);
                return v.future();
            }
        }
        long hold = admit(v);
        if (hold != REFUSED) {
            v.owner = owners.get();
            pipeline.issue(v, hold);
        }
        return v.future();
    }

    /**
     * The blocking lanes, when a blocking verb may take one now: the connection is open,
     * every verb the calling thread issued on the pipelined channel is settled (so none
     * can be overtaken), no fault rule is set and the caller is not a transport thread.
     */
    @Override
    public io.membus.core.transport.BlockingVerbs blockingNow() {
        if (lanes != null && LaneFlight.anyActive()) { // no flight anywhere: nothing to refuse or wait for
            if (WaitHelp.delivering()) {
                // a callback of a held read this thread is completing: a blocking verb would wait for verbs its delivery
                // holds back (a posted one is issued only after it), so it is refused before anything is sent
                throw new io.membus.core.error.BlockingCallOnTransportThreadException(Thread.currentThread().getName()
                        + " (in a callback of a tcp read it is completing)");
            }
            DsmTimeoutException late = finishFlight(); // a blocking verb must not overtake them
            if (late != null) {
                throw late;
            }
        }
        if (lanes == null || state != OPEN || transport.faults().active()
                || io.membus.core.transport.TransportThreads.isTransportThread()
                || !pipeline.settledFor(owners.get())) {
            return null;
        }
        return lanes;
    }

    /** Blocking lanes open now; for tests. */
    int lanesOpen() {
        return lanes == null ? 0 : lanes.openCount();
    }

    private static final long REFUSED = Long.MIN_VALUE;

    /**
     * Checks a verb before the pipeline takes it: its frame must fit and the connection be
     * open. Returns its fault hold ({@link io.membus.core.fault.FaultInjector#holdNanos}), or {@link #REFUSED} when
     * the verb failed here (and was completed).
     */
    private long admit(Verb v) {
        int max = v.kind == VerbObserver.READ ? maxReadLength : v.kind == VerbObserver.WRITE ? maxWriteLength
                : Integer.MAX_VALUE;
        if (v.length > max) {
            // its frame would exceed membus.transports.tcp.max-frame: the peer would refuse it as a protocol error and close the
            // connection, failing every other verb in flight
            v.refuse(new BadLengthException(v.ptr, v.length, max));
            return REFUSED;
        }
        if (state != OPEN) {
            v.refuse(unavailable());
            return REFUSED;
        }
        return transport.faults().holdNanos(peer.nodeId());
    }

    /** Runs the I/O thread's drain (at most once per burst); any thread. */
    void wake() {
        if (drainScheduled.compareAndSet(false, true)) {
            VerbPathCounts.clientWakes.increment();
            try {
                loop.execute(drainTask);
            } catch (RejectedExecutionException e) {
                failIssued("the initiator's tcp transport is closed");
            }
        }
    }

    /** Verbs the pipeline still keeps (timed-out ones not yet forgotten included); for tests. */
    CompletableFuture<Integer> inFlightCount() {
        return CompletableFuture.completedFuture(pipeline.kept());
    }

    /** Why a verb is refused while the connection is not open: closed with this node's transport, or down. */
    DsmException unavailable() {
        if (state == CLOSED && transport.isClosed()) {
            return transport.closedException();
        }
        return NodeUnavailableException.notSent(peer.nodeId(), downReason + " (peer " + peer + ")");
    }

    // ------------------------------------------------------------------ I/O thread

    private void drain() {
        drainScheduled.set(false);
        if (state != OPEN) {
            failAll(downReason);
            return;
        }
        pipeline.pump();
        wire.writeReady(); // outside the pipeline's lock: issuing threads do not wait for the write
        messages.writeQueued(channel);
    }

    /** Fails every verb this connection holds, in issue order; on the I/O thread. */
    private void failAll(String reason) {
        NodeUnavailableException e = new NodeUnavailableException(peer.nodeId(), reason + " (peer " + peer + ")");
        NodeUnavailableException unsent = NodeUnavailableException.notSent(peer.nodeId(), reason + " (peer " + peer
                + ")");
        // those on the wire may have run; the backlog never left
        pipeline.failAll(e, unsent);
        messages.reset(e); // the outbox fails its own; what it let out before is dropped, never sent later
    }

    /** The I/O threads are gone: nothing will be sent or answered any more. */
    private void failIssued(String reason) {
        String why = reason + " (peer " + peer + ")";
        pipeline.failAll(new NodeUnavailableException(peer.nodeId(), why), NodeUnavailableException.notSent(
                peer.nodeId(), why));
    }

    /** The channel is gone: fail what it carried and reconnect with backoff (I/O thread). */
    private void lost(String reason, boolean orderly) {
        channel = null;
        if (lanes != null) {
            lanes.closeAll(false); // they reach the same peer: its verbs there fail the same way
        }
        String lostReason = "connection lost: " + reason + "; verbs in flight may or may not have been executed";
        if (!STATE.compareAndSet(this, OPEN, DOWN)) { // closed by its owner meanwhile: no reconnect
            failAll(downReason);
            return;
        }
        downReason = lostReason;
        if (orderly) {
            LOG.info("connection to {} closed by the peer: {}", peer, reason);
        } else {
            LOG.warn("connection to {} lost: {}", peer, reason);
        }
        failAll(downReason);
        downReason = "connection down, reconnecting: " + reason;
        dialer.scheduleReconnect();
    }

    // ------------------------------------------------------------------ for ClientHandler (I/O thread)

    TcpTransport transport() {
        return transport;
    }

    Outbox outbox() {
        return messages.outbox();
    }

    /** The peer's lane server port from its WELCOME (0: none; lanes connect to the peer's port). */
    private volatile int lanePort;

    void lanePort(int port) {
        this.lanePort = port;
    }

    int lanePort() {
        return lanePort;
    }

    /**
     * The handshake of {@code ch} ended with WELCOME: the connection is OPEN on it, unless
     * its owner closed it during the handshake (the close must win, or the connection
     * would come back to life, and reconnect, after close()).
     *
     * @return whether it is open now
     */
    boolean opened(Channel ch) {
        channel = ch;
        int s = state;
        if (s == CLOSED || !STATE.compareAndSet(this, s, OPEN)) {
            channel = null;
            return false;
        }
        return true;
    }

    /** A response frame arrived on the open channel. */
    void response(Frame f) {
        wire.answer(f);
    }

    /** Responses freed window slots, or the channel became writable: waiting verbs go out, one flush. */
    void sendWaiting() {
        pipeline.pump();
        wire.writeReady();
    }

    /** The open channel closed. */
    void channelLost(String reason, boolean orderly) {
        lost(reason, orderly);
    }

    /** The failure an ERROR frame carries. */
    DsmException error(Frame f) {
        return ErrorFrames.decode(f, peer);
    }
}
