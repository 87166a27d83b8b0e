package io.membus.transport.tcp;

import io.membus.core.error.AuthenticationException;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.error.VerbException;
import io.membus.core.message.Outbox;
import io.membus.core.transport.Batch;
import io.membus.core.transport.Connection;
import io.membus.core.transport.Deadlines;
import io.membus.core.transport.FaultInjector;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.Verbs;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.ScheduledFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The initiator's end of a tcp connection to one peer incarnation.
 *
 * <h2>Issue, pipelining and order</h2>
 * Any thread issues a verb: it is appended to a lock-free issue queue and the
 * connection's I/O thread is woken at most once per burst. The I/O thread moves
 * issued verbs to its backlog, sends up to {@code membus.transports.tcp.max-in-flight} of them in
 * one buffer with one flush, and keeps the sent ones in issue order. The target
 * executes a connection's verbs in arrival order and answers in that order, so
 * responses complete the futures in issue order, on the I/O thread.
 *
 * <h2>Backpressure</h2>
 * A verb beyond {@code membus.transports.tcp.max-in-flight} waits in the backlog (no thread blocks)
 * until a response frees a slot, under its own deadline: one that times out
 * while waiting is never sent. Nothing is written while the channel is not
 * writable (the peer does not read): verbs wait in the backlog the same way.
 *
 * <h2>Deadlines and failures</h2>
 * Each verb's deadline is its issue time plus the operation timeout; a sweep on
 * the I/O thread fails expired verbs with {@link DsmTimeoutException} (no timer
 * per verb). A verb that timed out on the wire frees its window slot; once it
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
 * complete on the connection's I/O thread: callbacks must not block.
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
    private final long timeoutNanos;
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
    private volatile String downReason = "connection not open";
    private volatile Channel channel;

    // issue side: any thread
    private final ConcurrentLinkedQueue<Op> issued = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean drainScheduled = new AtomicBoolean();
    private final Runnable drainTask = this::drain;
    /** Messages given a credit by the outbox, in order, waiting for the I/O thread to write them. */
    private final ConcurrentLinkedQueue<OutMessage> messagesIssued = new ConcurrentLinkedQueue<>();
    private final Outbox outbox;
    /** The blocking lanes, or null when {@code membus.transports.tcp.blocking-lanes} is 0. */
    private final TcpLanes lanes;
    /**
     * Verbs issued on the pipelined channel whose fate is not settled: not yet answered, failed before they were
     * sent, or lost with the channel. While any is, no blocking lane is offered: a lane verb could overtake a
     * verb its caller issued before.
     */
    private final java.util.concurrent.atomic.AtomicLong unsettled = new java.util.concurrent.atomic.AtomicLong();

    private record OutMessage(long correlation, short channel, boolean request, byte[] payload) {
    }

    // I/O-thread confined
    private final ArrayDeque<Op> backlog = new ArrayDeque<>();
    private final ArrayDeque<Op> inFlight = new ArrayDeque<>();
    private final ArrayDeque<Op> orphans = new ArrayDeque<>();
    private int timedOutInFlight;
    private long nextCorrelationId;
    /** Highest correlation id of a timed-out verb dropped from the head of {@link #inFlight}: a late answer is ignored. */
    private long discardedThrough;
    /** Timed-out verbs dropped from the window whose late answer has not come (they may still run). */
    private long discardedUnsettled;
    private ScheduledFuture<?> releaseTimer;
    private ScheduledFuture<?> sweepTimer;
    private ScheduledFuture<?> reconnectTimer;
    private int reconnectAttempt;

    /** One verb. */
    static final class Op {
        final byte opcode;
        final long ptr;
        final long remoteKey;
        final int length;
        final long a;
        final long b;
        final byte[] data;
        final CompletableFuture<Object> future = new CompletableFuture<>();
        long deadlineNanos;
        long releaseNanos;
        long correlationId;
        boolean timedOut; // failed by the sweep while on the wire (I/O thread)

        Op(byte opcode, long ptr, long remoteKey, int length, long a, long b, byte[] data) {
            this.opcode = opcode;
            this.ptr = ptr;
            this.remoteKey = remoteKey;
            this.length = length;
            this.a = a;
            this.b = b;
            this.data = data;
        }

        int frameLength() {
            return Frame.HEADER_LENGTH + switch (opcode) {
                case Frame.OP_READ -> Frame.READ_BODY_LENGTH;
                case Frame.OP_WRITE -> Frame.WRITE_FIXED_BODY_LENGTH + length;
                case Frame.OP_CAS -> Frame.CAS_BODY_LENGTH;
                default -> Frame.FAA_BODY_LENGTH;
            };
        }
    }

    TcpConnection(TcpTransport transport, PeerInfo peer, EventLoop loop) {
        this.transport = transport;
        this.peer = peer;
        this.loop = loop;
        int colon = peer.address().lastIndexOf(':');
        if (colon <= 0) {
            throw NodeUnavailableException.notSent(peer.nodeId(), "address=" + peer.address()
                    + " is not host:port; the directory entry of the node is not a tcp address");
        }
        String h = peer.address().substring(0, colon);
        this.host = h.startsWith("[") && h.endsWith("]") ? h.substring(1, h.length() - 1) : h; // [IPv6]:port
        try {
            this.port = Integer.parseInt(peer.address().substring(colon + 1));
        } catch (NumberFormatException e) {
            throw NodeUnavailableException.notSent(peer.nodeId(), "address=" + peer.address() + " has no valid port", e);
        }
        this.timeoutNanos = transport.settings.operationTimeout.toNanos();
        this.maxInFlight = transport.settings.maxInFlight;
        int maxFrame = transport.settings.maxFrame;
        this.maxReadLength = Math.min(SegmentTable.MAX_VERB_LENGTH, maxFrame - Frame.HEADER_LENGTH);
        this.maxWriteLength = Math.min(SegmentTable.MAX_VERB_LENGTH,
                maxFrame - Frame.HEADER_LENGTH - Frame.WRITE_FIXED_BODY_LENGTH);
        this.outbox = new Outbox(peer.nodeId(), transport.settings.operationTimeout, transport.messages(),
                this::transmit);
        this.lanes = transport.settings.blockingLanes == 0 ? null
                : new TcpLanes(this, transport, peer, host, port, transport.settings.blockingLanes);
    }

    /** Connects and authenticates; completes when verbs may be posted. */
    CompletableFuture<Void> start() {
        CompletableFuture<Void> ready = new CompletableFuture<>();
        attempt(ready);
        return ready.whenComplete((v, e) -> {
            if (e != null) {
                close(e.getMessage());
            } else {
                long period = Math.max(TimeUnit.MILLISECONDS.toNanos(1),
                        Math.min(timeoutNanos / 8, TimeUnit.MILLISECONDS.toNanos(100)));
                try {
                    loop.execute(() -> {
                        if (state != CLOSED) {
                            sweepTimer = loop.scheduleAtFixedRate(this::sweep, period, period, TimeUnit.NANOSECONDS);
                        }
                    });
                } catch (RejectedExecutionException shuttingDown) {
                    close("the initiator's tcp transport is closed");
                }
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
        ScheduledFuture<?> timer;
        long handshakeNanos = transport.settings.connectTimeout.toNanos();
        try {
            cf = b.connect(host, port);
            Channel c = cf.channel();
            timer = loop.schedule(() -> {
                if (ready.completeExceptionally(NodeUnavailableException.notSent(peer.nodeId(),
                        "no authenticated connection to " + peer.address() + " within the connect timeout ("
                                + transport.settings.connectTimeout.toMillis() + " ms)"))) {
                    c.close();
                }
            }, handshakeNanos, TimeUnit.NANOSECONDS);
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
            timer.cancel(false);
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
        Channel ch = channel;
        if (ch != null) {
            ch.close();
        }
        if (lanes != null) {
            lanes.closeAll(true);
        }
        try {
            loop.execute(() -> {
                Channel c = channel;
                if (c != null) {
                    c.close(); // the I/O thread may have published it after the read above
                }
                if (sweepTimer != null) {
                    sweepTimer.cancel(false);
                }
                if (reconnectTimer != null) {
                    reconnectTimer.cancel(false);
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
        return cast(issue(new Op(Frame.OP_READ, ptr, remoteKey, length, 0, 0, null)));
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
        return cast(issue(new Op(Frame.OP_WRITE, ptr, remoteKey, length, 0, 0, copy)));
    }

    @Override
    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        return cast(issue(new Op(Frame.OP_CAS, ptr, remoteKey, 8, expected, update, null)));
    }

    @Override
    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
        return cast(issue(new Op(Frame.OP_FAA, ptr, remoteKey, 8, delta, 0, null)));
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

    /**
     * The blocking lanes, when a blocking verb may take one now: the connection is open,
     * no verb on the pipelined channel is unsettled (so none its caller issued earlier
     * can be overtaken), no fault rule is set and the caller is not a transport thread.
     */
    @Override
    public io.membus.core.transport.BlockingVerbs blockingNow() {
        if (lanes == null || state != OPEN || unsettled.get() != 0 || transport.faults().active()
                || io.membus.core.transport.TransportThreads.isTransportThread()) {
            return null;
        }
        return lanes;
    }

    /** Verbs on the pipelined channel not settled yet, and verbs running on blocking lanes. */
    @Override
    public int inFlight() {
        return (int) Math.min(Integer.MAX_VALUE, unsettled.get()) + (lanes == null ? 0 : lanes.busyCount());
    }

    /** Blocking lanes open now; for tests. */
    int lanesOpen() {
        return lanes == null ? 0 : lanes.openCount();
    }

    private CompletableFuture<Object> issue(Op op) {
        if (!admit(op)) {
            return op.future;
        }
        unsettled.incrementAndGet();
        issued.offer(op);
        wake();
        return op.future;
    }

    /** Stamps deadline and injected faults; false when the verb is already finished (too long, closed, dropped). */
    private boolean admit(Op op) {
        int max = op.opcode == Frame.OP_READ ? maxReadLength : op.opcode == Frame.OP_WRITE ? maxWriteLength
                : Integer.MAX_VALUE;
        if (op.length > max) {
            // its frame would exceed membus.transports.tcp.max-frame: the peer would refuse it as a protocol error and close the
            // connection, failing every other verb in flight
            op.future.completeExceptionally(new BadLengthException(op.ptr, op.length, max));
            return false;
        }
        if (state != OPEN) {
            op.future.completeExceptionally(unavailable());
            return false;
        }
        long now = System.nanoTime();
        op.deadlineNanos = now + timeoutNanos;
        FaultInjector faults = transport.faults();
        if (faults.active()) {
            FaultInjector.Rule rule = faults.rule(peer.nodeId());
            if (rule != null) {
                if (rule.drop()) {
                    // never sent, never answered: the deadline fires
                    Deadlines.within(op.future, transport.settings.operationTimeout, Frame.opName(op.opcode),
                            peer.nodeId());
                    return false;
                }
                op.releaseNanos = now + rule.delayNanos();
            }
        }
        return true;
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

    /** Verbs on the wire (timed-out ones not yet forgotten included), read on the I/O thread; for tests. */
    CompletableFuture<Integer> inFlightCount() {
        return CompletableFuture.supplyAsync(inFlight::size, loop);
    }

    private NodeUnavailableException unavailable() {
        return NodeUnavailableException.notSent(peer.nodeId(), downReason + " (peer " + peer + ")");
    }

    // ------------------------------------------------------------------ I/O thread

    private void drain() {
        drainScheduled.set(false);
        Op op;
        while ((op = issued.poll()) != null) {
            backlog.add(op);
        }
        if (state != OPEN) {
            failAll(downReason);
            return;
        }
        send();
        sendMessages();
    }

    /** Sends waiting verbs in order while the window allows; one buffer, one flush. */
    private void send() {
        Channel ch = channel;
        if (ch == null || backlog.isEmpty() || !ch.isWritable()) {
            return; // not writable: the peer is not reading; verbs wait (under their deadlines) until it drains
        }
        ByteBuf out = null;
        long now = 0;
        while (!backlog.isEmpty() && inFlight.size() - timedOutInFlight < maxInFlight) {
            Op op = backlog.peek();
            if (op.future.isDone()) {
                backlog.poll(); // timed out (or cancelled) while waiting: never sent
                unsettled.decrementAndGet();
                continue;
            }
            if (op.releaseNanos != 0) {
                if (now == 0) {
                    now = System.nanoTime();
                }
                long wait = op.releaseNanos - now;
                if (wait > 0) {
                    if (releaseTimer == null || releaseTimer.isDone()) {
                        releaseTimer = loop.schedule((Runnable) this::send, wait, TimeUnit.NANOSECONDS);
                    }
                    break; // later verbs wait behind a held one: the order holds
                }
            }
            backlog.poll();
            if (out == null) {
                // sized for what the window lets out now, so a burst is encoded without re-allocation
                int room = maxInFlight - (inFlight.size() - timedOutInFlight);
                long burst = Math.min((long) op.frameLength() * Math.min(room, backlog.size() + 1), 1 << 20);
                out = ch.alloc().ioBuffer((int) Math.max(Math.max(256, burst), op.frameLength()));
            }
            op.correlationId = ++nextCorrelationId;
            switch (op.opcode) {
                case Frame.OP_READ -> Frame.writeRead(out, op.correlationId, op.ptr, op.remoteKey, op.length);
                case Frame.OP_WRITE -> Frame.writeWrite(out, op.correlationId, op.ptr, op.remoteKey, op.data, 0,
                        op.length);
                case Frame.OP_CAS -> Frame.writeCas(out, op.correlationId, op.ptr, op.remoteKey, op.a, op.b);
                default -> Frame.writeFaa(out, op.correlationId, op.ptr, op.remoteKey, op.a);
            }
            inFlight.add(op);
        }
        if (out != null) {
            ch.writeAndFlush(out, ch.voidPromise());
        }
    }

    private void onResponse(Frame f) {
        long corr = f.correlationId();
        Op op;
        while (true) {
            op = inFlight.peek();
            if (op == null || op.correlationId > corr) {
                if (corr > 0 && corr <= discardedThrough) {
                    // the late answer to a verb that timed out and was dropped from the window: it has run
                    if (discardedUnsettled > 0) {
                        discardedUnsettled--;
                        unsettled.decrementAndGet();
                    }
                    return;
                }
                throw new ProtocolException(peer.toString(), "correlationId=" + corr + " answers no verb in flight");
            }
            inFlight.poll();
            unsettled.decrementAndGet(); // answered, or passed over (the target dropped it: it never runs)
            if (op.timedOut) {
                timedOutInFlight--;
            }
            if (op.correlationId == corr) {
                break;
            }
            // the target dropped this verb (injected fault): it is never answered
            if (!op.future.isDone()) {
                orphans.add(op);
            }
        }
        try {
            complete(op, f);
        } catch (ProtocolException e) {
            op.future.completeExceptionally(e); // the connection closes next; this verb must not be left hanging
            throw e;
        }
    }

    private void complete(Op op, Frame f) {
        if (f.opcode() == Frame.OP_ERROR) {
            op.future.completeExceptionally(decodeError(f));
            return;
        }
        int body = f.bodyLength();
        switch (op.opcode) {
            case Frame.OP_READ -> {
                if (body != op.length) {
                    throw new ProtocolException(peer.toString(), "read response bodyLength=" + body + ", expected="
                            + op.length);
                }
                op.future.complete(f.bytesAt(Frame.HEADER_LENGTH, body));
            }
            case Frame.OP_WRITE -> {
                if (body != 0) {
                    throw new ProtocolException(peer.toString(), "write response bodyLength=" + body + ", expected=0");
                }
                op.future.complete(null);
            }
            default -> {
                if (body != 8) {
                    throw new ProtocolException(peer.toString(), Frame.opName(op.opcode) + " response bodyLength="
                            + body + ", expected=8");
                }
                op.future.complete(f.longAt(Frame.HEADER_LENGTH));
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
            case NODE_UNAVAILABLE -> new NodeUnavailableException(peer.nodeId(), message);
            case STALE_INCARNATION -> new StaleIncarnationException(peer.nodeId(), peer.incarnation(), detail);
            case AUTHENTICATION -> new AuthenticationException(peer.toString(), "reason=refused by the peer: " + message);
            case PROTOCOL -> new ProtocolException(peer.toString(), "refused by the peer: " + message);
            default -> new DsmException(code, message.isEmpty() ? "verb failed on node " + peer.nodeId() + ": code="
                    + code : message);
        };
    }

    /** Fails expired verbs; on the I/O thread, every sweep period. */
    private void sweep() {
        long now = System.nanoTime();
        for (Op op : inFlight) {
            if (!op.timedOut && op.deadlineNanos - now <= 0) {
                op.timedOut = true; // it no longer holds a window slot
                timedOutInFlight++;
                timeout(op);
            }
        }
        // timed-out verbs at the head are forgotten (their late answers are recognised by correlation id), so a
        // peer that never answers cannot make the window grow without bound
        Op head;
        while ((head = inFlight.peek()) != null && head.timedOut) {
            inFlight.poll();
            timedOutInFlight--;
            discardedThrough = head.correlationId;
            discardedUnsettled++; // it may still run: it stays unsettled until its late answer or the channel's end
        }
        for (java.util.Iterator<Op> it = backlog.iterator(); it.hasNext(); ) {
            Op op = it.next();
            if (op.future.isDone() || op.deadlineNanos - now <= 0 && timeout(op)) {
                it.remove(); // never sent
                unsettled.decrementAndGet();
            }
        }
        orphans.removeIf(op -> op.future.isDone() || op.deadlineNanos - now <= 0 && timeout(op));
        if (!backlog.isEmpty()) {
            send(); // timed-out verbs may have freed the window
        }
    }

    private boolean timeout(Op op) {
        op.future.completeExceptionally(new DsmTimeoutException(Frame.opName(op.opcode), peer.nodeId(),
                transport.settings.operationTimeout));
        return true;
    }

    /** Fails every verb this connection holds; on the I/O thread. */
    private void failAll(String reason) {
        NodeUnavailableException e = new NodeUnavailableException(peer.nodeId(), reason + " (peer " + peer + ")");
        NodeUnavailableException unsent = NodeUnavailableException.notSent(peer.nodeId(), reason + " (peer " + peer
                + ")");
        Op op;
        while ((op = issued.poll()) != null) {
            backlog.add(op);
        }
        // issue order: the oldest verbs fail first; those on the wire may have run, the backlog never left
        List<ArrayDeque<Op>> queues = List.of(orphans, inFlight, backlog);
        for (ArrayDeque<Op> q : queues) {
            NodeUnavailableException why = q == backlog ? unsent : e;
            while ((op = q.poll()) != null) {
                if (q != orphans) {
                    unsettled.decrementAndGet(); // orphans were settled when they were passed over
                }
                op.future.completeExceptionally(why);
            }
        }
        unsettled.addAndGet(-discardedUnsettled); // the channel is gone: what it carried can no longer run
        discardedUnsettled = 0;
        timedOutInFlight = 0;
        // messages: the outbox fails its own (it is reset first, under its lock, so a message it gave a credit
        // before is in the queue now and is dropped here, never sent on the next connection)
        outbox.reset(e);
        messagesIssued.clear();
    }

    private void failIssued(String reason) {
        NodeUnavailableException e = NodeUnavailableException.notSent(peer.nodeId(), reason + " (peer " + peer + ")");
        Op op;
        while ((op = issued.poll()) != null) {
            unsettled.decrementAndGet();
            op.future.completeExceptionally(e);
        }
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
        reconnectTimer = loop.schedule(() -> {
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
                        || (e instanceof NodeUnavailableException && e.getMessage().contains("fenced"))) {
                    LOG.warn("connection to {} closed for good: {}", peer, e.getMessage());
                    close(e.getMessage());
                } else {
                    loop.execute(this::scheduleReconnect);
                }
            });
        }, backoff, TimeUnit.NANOSECONDS);
    }

    // ------------------------------------------------------------------ for ClientHandler (I/O thread)

    TcpTransport transport() {
        return transport;
    }

    Outbox outbox() {
        return outbox;
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
        if (!backlog.isEmpty()) {
            send();
        }
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
        private final List<Op> ops = new ArrayList<>();
        private boolean submitted;

        @Override
        public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
            return cast(add(new Op(Frame.OP_READ, ptr, remoteKey, length, 0, 0, null)));
        }

        @Override
        public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
            IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
            if (badRange != null) {
                return CompletableFuture.failedFuture(badRange);
            }
            return cast(add(new Op(Frame.OP_WRITE, ptr, remoteKey, length, 0, 0,
                    java.util.Arrays.copyOfRange(src, offset, offset + length))));
        }

        @Override
        public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
            return cast(add(new Op(Frame.OP_CAS, ptr, remoteKey, 8, expected, update, null)));
        }

        @Override
        public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
            return cast(add(new Op(Frame.OP_FAA, ptr, remoteKey, 8, delta, 0, null)));
        }

        private CompletableFuture<Object> add(Op op) {
            if (submitted) {
                throw new IllegalStateException("batch already submitted: start a new batch");
            }
            ops.add(op);
            return op.future;
        }

        @Override
        public void submit() {
            if (submitted) {
                throw new IllegalStateException("batch already submitted: start a new batch");
            }
            submitted = true;
            boolean any = false;
            for (Op op : ops) {
                if (admit(op)) {
                    unsettled.incrementAndGet();
                    issued.offer(op);
                    any = true;
                }
            }
            ops.clear();
            if (any) {
                wake();
            }
        }

        @Override
        public int size() {
            return submitted ? 0 : ops.size();
        }
    }
}
