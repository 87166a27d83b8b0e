package io.membus.transport.tcp;

import io.membus.core.OpenResources;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeFencedException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.error.VerbException;
import io.membus.core.message.Outbox;
import io.membus.core.transport.Batch;
import io.membus.core.transport.Connection;
import io.membus.core.transport.LongCompletion;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.VerbObserver;
import io.membus.core.transport.Verbs;
import io.membus.core.transport.pipeline.Verb;
import io.membus.core.transport.pipeline.VerbOwner;
import io.membus.core.transport.pipeline.VerbPipeline;
import io.membus.core.transport.pipeline.Wire;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.socket.SocketChannel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The initiator's end of a tcp connection to one peer incarnation.
 *
 * <h2>Issue, pipelining and order</h2>
 * Any thread issues a verb into the connection's {@link VerbPipeline} (the in-order
 * engine every transport shares) and the connection's I/O thread is woken at most
 * once per burst. The I/O thread pumps the pipeline: it encodes up to
 * {@code membus.transports.tcp.max-in-flight} verbs into one buffer (this transport's
 * {@link Wire}) with one flush. The target executes a connection's verbs in arrival
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
 */
final class TcpConnection implements Connection {
    private static final Logger LOG = LoggerFactory.getLogger(TcpConnection.class);
    private static final int CONNECTING = 0;
    private static final int OPEN = 1;
    private static final int DOWN = 2;
    private static final int CLOSED = 3;

    private final TcpTransport transport;
    private final PeerInfo peer;
    private final String host;
    private final int port;
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

    // issue side: any thread
    private final VerbPipeline<Verb> pipeline;
    private final AtomicBoolean drainScheduled = new AtomicBoolean();
    private final Runnable drainTask = this::drain;
    /** Messages given a credit by the outbox, in order, waiting for the I/O thread to write them. */
    private final ConcurrentLinkedQueue<OutMessage> messagesIssued = new ConcurrentLinkedQueue<>();
    private final Outbox outbox;
    /** The blocking lanes, or null when {@code membus.transports.tcp.blocking-lanes} is 0. */
    private final TcpLanes lanes;
    /** Each issuing thread's unsettled verbs on this connection (see {@link #blockingNow()}). */
    private final ThreadLocal<VerbOwner> owners = ThreadLocal.withInitial(VerbOwner::new);

    private record OutMessage(long correlation, short channel, boolean request, byte[] payload) {
    }

    // I/O-thread confined
    /** The frames of the burst being encoded, flushed at its end; guarded by the pipeline's lock (I/O thread). */
    private ByteBuf burst;
    private Channel burstChannel;
    private LoopTimer reconnectTimer;
    private int reconnectAttempt;

    private static int frameLength(Verb v) {
        return Frame.HEADER_LENGTH + switch (v.kind) {
            case VerbObserver.READ -> Frame.READ_BODY_LENGTH;
            case VerbObserver.WRITE -> Frame.WRITE_FIXED_BODY_LENGTH + v.length;
            case VerbObserver.CAS -> Frame.CAS_BODY_LENGTH;
            default -> Frame.FAA_BODY_LENGTH;
        };
    }

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
        this.host = address.host();
        this.port = address.port();
        this.maxInFlight = transport.settings.maxInFlight;
        int maxFrame = transport.settings.maxFrame;
        this.maxReadLength = Math.min(SegmentTable.MAX_VERB_LENGTH, maxFrame - Frame.HEADER_LENGTH);
        this.maxWriteLength = Math.min(SegmentTable.MAX_VERB_LENGTH,
                maxFrame - Frame.HEADER_LENGTH - Frame.WRITE_FIXED_BODY_LENGTH);
        this.outbox = new Outbox(peer.nodeId(), transport.settings.operationTimeout, transport.messages(),
                this::transmit);
        this.pipeline = new VerbPipeline<>(peer.nodeId(), transport.settings.operationTimeout, maxInFlight,
                transport.observer(), new TcpWire(), false);
        this.lanes = transport.settings.blockingLanes == 0 ? null
                : new TcpLanes(this, transport, peer, host, port, transport.settings.blockingLanes);
        this.openId = OpenResources.CONNECTIONS.opened("TcpConnection of node " + transport.nodeId() + " to " + peer);
    }

    /**
     * This transport's wire: a verb is encoded into the burst's buffer on the I/O thread; the
     * burst is written with one flush. Nothing is written while the channel is down or not
     * writable (the peer does not read): verbs wait in the backlog under their deadlines.
     */
    private final class TcpWire implements Wire<Verb> {
        @Override
        public boolean post(Verb v) {
            Channel ch = channel;
            if (ch == null || !ch.isWritable()) {
                return false;
            }
            if (burst == null) {
                // sized for what the window lets out now, so a burst is encoded without re-allocation
                int room = maxInFlight - pipeline.inFlight() + 1;
                long size = Math.min((long) frameLength(v) * Math.min(room, pipeline.backlog() + 1), 1 << 20);
                burst = ch.alloc().ioBuffer((int) Math.max(Math.max(256, size), frameLength(v)));
                burstChannel = ch;
            }
            long corr = v.seq();
            switch (v.kind) {
                case VerbObserver.READ -> Frame.writeRead(burst, corr, v.ptr, v.remoteKey, v.length);
                case VerbObserver.WRITE -> Frame.writeWrite(burst, corr, v.ptr, v.remoteKey, v.data, v.dataOffset,
                        v.length);
                case VerbObserver.CAS -> Frame.writeCas(burst, corr, v.ptr, v.remoteKey, v.a, v.b);
                default -> Frame.writeFaa(burst, corr, v.ptr, v.remoteKey, v.a);
            }
            return true;
        }

        @Override
        public void flush() {
            ByteBuf out = burst;
            Channel ch = burstChannel;
            burst = null;
            burstChannel = null;
            if (out != null) {
                ch.writeAndFlush(out, ch.voidPromise());
            }
        }

        @Override
        public void wake(VerbPipeline<Verb> p) {
            TcpConnection.this.wake(); // posts happen on the I/O thread only
        }
    }

    /** Connects and authenticates; completes when verbs may be posted. */
    CompletableFuture<Void> start() {
        CompletableFuture<Void> ready = new CompletableFuture<>();
        attempt(ready);
        return ready.whenComplete((v, e) -> {
            if (e != null) {
                close(e.getMessage());
            }
        });
    }

    /** One connect + handshake; completes {@code ready} with its outcome. */
    private void attempt(CompletableFuture<Void> ready) {
        Bootstrap b = new Bootstrap()
                .group(loop)
                .channel(transport.socketChannelClass())
                .option(ChannelOption.TCP_NODELAY, true)
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, TcpTransport.WATER_MARK)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.max(1, transport.settings.connectTimeout.toMillis()))
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new FrameDecoder(transport.settings.maxFrame, peer.toString()),
                                new ClientHandler(TcpConnection.this, peer, ready));
                    }
                });
        ChannelFuture cf;
        LoopTimer timer;
        long handshakeNanos = transport.settings.connectTimeout.toNanos();
        try {
            cf = b.connect(host, port);
            Channel c = cf.channel();
            // the deadline is timed by the shared wheel and acts on the loop, where the handshake completes ready
            timer = LoopTimer.schedule(loop, () -> {
                if (ready.completeExceptionally(NodeUnavailableException.notSent(peer.nodeId(),
                        "no authenticated connection to " + peer.address() + " within the connect timeout ("
                                + transport.settings.connectTimeout.toMillis() + " ms)"))) {
                    c.close();
                }
            }, handshakeNanos);
        } catch (RuntimeException e) { // the I/O threads are shutting down, or the address is unusable
            ready.completeExceptionally(NodeUnavailableException.notSent(peer.nodeId(), "cannot connect to "
                    + peer.address() + ": " + e, e));
            return;
        }
        Channel ch = cf.channel();
        cf.addListener(f -> {
            if (!f.isSuccess()) {
                ready.completeExceptionally(NodeUnavailableException.notSent(peer.nodeId(), "cannot connect to "
                        + peer.address() + ": " + f.cause(), f.cause()));
            }
        });
        ready.whenComplete((v, e) -> {
            timer.cancel();
            if (e != null) {
                ch.close();
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
        outbox.close(new NodeUnavailableException(peer.nodeId(), reason + " (peer " + peer + ")"));
        downReason = reason; // before the state: whoever sees CLOSED reads this reason
        int s;
        do {
            s = state;
            if (s == CLOSED) {
                return;
            }
        } while (!STATE.compareAndSet(this, s, CLOSED));
        OpenResources.CONNECTIONS.closed(openId);
        Channel ch = channel;
        if (ch != null) {
            ch.close();
        }
        if (lanes != null) {
            lanes.closeAll(true);
        }
        String why = reason + " (peer " + peer + ")";
        // closed because this node's transport closed: what never left, and what comes later, is refused as
        // closed (a retry cannot help), not as an unavailable peer
        java.util.function.Supplier<DsmException> refused = () -> transport.isClosed() ? transport.closedException()
                : NodeUnavailableException.notSent(peer.nodeId(), why);
        pipeline.close(new NodeUnavailableException(peer.nodeId(), why), refused.get(), refused);
        try {
            loop.execute(() -> {
                Channel c = channel;
                if (c != null) {
                    c.close(); // the I/O thread may have published it after the read above
                }
                if (reconnectTimer != null) {
                    reconnectTimer.cancel();
                }
                failAll(reason);
            });
        } catch (RejectedExecutionException e) {
            failIssued(reason); // the I/O threads are gone: only the issue queue can hold verbs
        }
    }

    // ------------------------------------------------------------------ verbs

    @Override
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        return issue(new Verb(VerbObserver.READ, ptr, remoteKey, length, 0, 0, null, 0));
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
        return cast(outbox.post(channel, false, payload));
    }

    @Override
    public CompletableFuture<byte[]> request(short channel, byte[] payload) {
        if (state != OPEN) {
            return CompletableFuture.failedFuture(unavailable());
        }
        return outbox.post(channel, true, payload);
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

    /** The outbox gave a message a credit (under its lock): queue it for the I/O thread. */
    private boolean transmit(long correlation, short channel, boolean request, byte[] payload) {
        if (state != OPEN) {
            throw unavailable();
        }
        messagesIssued.offer(new OutMessage(correlation, channel, request, payload));
        wake();
        return true;
    }

    /** Writes the queued messages, in order, in one buffer with one flush (I/O thread). */
    private void sendMessages() {
        Channel ch = channel;
        if (ch == null || messagesIssued.isEmpty()) {
            return; // not open: failAll has failed them (the outbox was reset)
        }
        ByteBuf out = ch.alloc().ioBuffer(4096);
        OutMessage m;
        while ((m = messagesIssued.poll()) != null) {
            Frame.writeMessage(out, m.correlation(), m.channel(), m.request(), m.payload());
        }
        ch.writeAndFlush(out, ch.voidPromise());
    }

    @SuppressWarnings("unchecked")
    private static <T> CompletableFuture<T> cast(CompletableFuture<?> f) {
        return (CompletableFuture<T>) (CompletableFuture<?>) f;
    }

    @Override
    public Batch batch() {
        return new TcpBatch();
    }

    private <T> CompletableFuture<T> issue(Verb v) {
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
     * open. Returns its fault hold ({@link VerbPipeline#hold}), or {@link #REFUSED} when
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
        return VerbPipeline.hold(transport.faults(), peer.nodeId());
    }

    private void wake() {
        if (drainScheduled.compareAndSet(false, true)) {
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
    private DsmException unavailable() {
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
        sendMessages();
    }

    private void onResponse(Frame f) {
        long corr = f.correlationId();
        Verb v;
        try {
            v = pipeline.answering(corr); // verbs before it that are still unanswered were dropped by the target
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(peer.toString(), "correlationId=" + corr + " answers no verb in flight");
        }
        if (v == null) {
            return; // the late answer to a verb that timed out
        }
        try {
            complete(v, f);
        } catch (ProtocolException e) {
            pipeline.fail(v, e); // the connection closes next; this verb must not be left hanging
            throw e;
        }
    }

    private void complete(Verb v, Frame f) {
        if (f.opcode() == Frame.OP_ERROR) {
            pipeline.fail(v, decodeError(f));
            return;
        }
        int body = f.bodyLength();
        switch (v.kind) {
            case VerbObserver.READ -> {
                if (body != v.length) {
                    throw new ProtocolException(peer.toString(), "read response bodyLength=" + body + ", expected="
                            + v.length);
                }
                pipeline.complete(v, f.bytesAt(Frame.HEADER_LENGTH, body));
            }
            case VerbObserver.WRITE -> {
                if (body != 0) {
                    throw new ProtocolException(peer.toString(), "write response bodyLength=" + body + ", expected=0");
                }
                pipeline.complete(v, null);
            }
            default -> {
                if (body != 8) {
                    throw new ProtocolException(peer.toString(), Verb.operationName(v.kind) + " response bodyLength="
                            + body + ", expected=8");
                }
                pipeline.completeLong(v, f.longAt(Frame.HEADER_LENGTH));
            }
        }
    }

    private DsmException decodeError(Frame f) {
        return decodeError(f, peer);
    }

    /** The typed failure an ERROR frame from {@code peer} carries. */
    static DsmException decodeError(Frame f, PeerInfo peer) {
        ErrorCode code = ErrorCode.fromWire(f.intAt(Frame.ERROR_CODE_FIELD_OFFSET) & 0xff);
        long ptr = f.longAt(Frame.ERROR_PTR_FIELD_OFFSET);
        int length = f.intAt(Frame.ERROR_LENGTH_FIELD_OFFSET);
        long detail = f.longAt(Frame.ERROR_DETAIL_FIELD_OFFSET);
        VerbException v = VerbException.decode(code, ptr, length, detail);
        if (v != null) {
            return v;
        }
        String message = f.errorMessage();
        return switch (code) {
            case NODE_UNAVAILABLE -> (f.errorReasons() & Frame.ERROR_REASON_FENCED) != 0
                    ? NodeFencedException.unknownOutcome(peer.nodeId(), message)
                    : new NodeUnavailableException(peer.nodeId(), message);
            case STALE_INCARNATION -> new StaleIncarnationException(peer.nodeId(), peer.incarnation(), detail);
            case AUTHENTICATION -> new AuthenticationException(peer.toString(), "reason=refused by the peer: " + message);
            case PROTOCOL -> new ProtocolException(peer.toString(), "refused by the peer: " + message);
            default -> DsmException.decoded(code, peer.nodeId(), message.isEmpty() ? "verb failed on node "
                    + peer.nodeId() + ": code=" + code : message);
        };
    }

    /** Fails every verb this connection holds, in issue order; on the I/O thread. */
    private void failAll(String reason) {
        NodeUnavailableException e = new NodeUnavailableException(peer.nodeId(), reason + " (peer " + peer + ")");
        NodeUnavailableException unsent = NodeUnavailableException.notSent(peer.nodeId(), reason + " (peer " + peer
                + ")");
        // those on the wire may have run; the backlog never left
        pipeline.failAll(e, unsent);
        // messages: the outbox fails its own (it is reset first, under its lock, so a message it gave a credit
        // before is in the queue now and is dropped here, never sent on the next connection)
        outbox.reset(e);
        messagesIssued.clear();
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
        scheduleReconnect();
    }

    private void scheduleReconnect() {
        if (state == CLOSED || !transport.serving()) {
            return;
        }
        long min = transport.settings.reconnectMinBackoff.toNanos();
        long max = transport.settings.reconnectMaxBackoff.toNanos();
        long backoff = Math.min(max, min << Math.min(20, reconnectAttempt));
        backoff = backoff / 2 + ThreadLocalRandom.current().nextLong(backoff / 2 + 1); // jitter
        reconnectAttempt++;
        if (loop.isShuttingDown()) {
            return; // the transport is closing: close() fails what is left
        }
        // the backoff is timed by the shared wheel; the attempt is I/O work on the loop (bootstrap, confined state)
        reconnectTimer = LoopTimer.schedule(loop, () -> {
            if (state == CLOSED) {
                return;
            }
            CompletableFuture<Void> ready = new CompletableFuture<>();
            attempt(ready);
            ready.whenComplete((v, e) -> {
                if (e == null) {
                    reconnectAttempt = 0;
                    LOG.info("reconnected to {}", peer);
                    transport.observer().reconnected(peer.nodeId());
                } else if (e instanceof StaleIncarnationException || e instanceof AuthenticationException
                        || (e instanceof NodeUnavailableException n && n.fenced())) {
                    LOG.warn("connection to {} closed for good: {}", peer, e.getMessage());
                    close(e.getMessage());
                } else {
                    loop.execute(this::scheduleReconnect);
                }
            });
        }, backoff);
    }

    // ------------------------------------------------------------------ for ClientHandler (I/O thread)

    TcpTransport transport() {
        return transport;
    }

    Outbox outbox() {
        return outbox;
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
        onResponse(f);
    }

    /** Responses freed window slots, or the channel became writable: waiting verbs go out, one flush. */
    void sendWaiting() {
        pipeline.pump();
    }

    /** The open channel closed. */
    void channelLost(String reason, boolean orderly) {
        lost(reason, orderly);
    }

    /** The failure an ERROR frame carries. */
    DsmException error(Frame f) {
        return decodeError(f);
    }

    /** Verbs kept until {@link #submit()}, then issued together: one wake-up, one flush. */
    private final class TcpBatch implements Batch {
        private final List<Verb> verbs = new ArrayList<>();
        private boolean submitted;

        @Override
        public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
            return add(new Verb(VerbObserver.READ, ptr, remoteKey, length, 0, 0, null, 0));
        }

        @Override
        public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
            IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
            if (badRange != null) {
                return CompletableFuture.failedFuture(badRange);
            }
            return add(new Verb(VerbObserver.WRITE, ptr, remoteKey, length, 0, 0,
                    java.util.Arrays.copyOfRange(src, offset, offset + length), 0));
        }

        @Override
        public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
            return add(new Verb(VerbObserver.CAS, ptr, remoteKey, 8, expected, update, null, 0));
        }

        @Override
        public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
            return add(new Verb(VerbObserver.FAA, ptr, remoteKey, 8, delta, 0, null, 0));
        }

        private <T> CompletableFuture<T> add(Verb v) {
            if (submitted) {
                throw new IllegalStateException("batch already submitted: start a new batch");
            }
            verbs.add(v);
            return v.future();
        }

        @Override
        public void submit() {
            if (submitted) {
                throw new IllegalStateException("batch already submitted: start a new batch");
            }
            submitted = true;
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
            verbs.clear();
            if (any) {
                wake();
            }
        }

        @Override
        public int size() {
            return submitted ? 0 : verbs.size();
        }
    }
}
