package io.membus.transport.tcp;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.ProtocolException;
import io.membus.core.fault.FaultInjector;
import io.membus.core.transport.message.HandshakeRecord;
import io.membus.core.transport.message.Inbox;
import io.membus.core.replication.AckGate;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.DecoderException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayDeque;

/**
 * The target side of one accepted connection: the handshake state machine, then
 * the soft NIC that executes the peer's verbs on this node's segment table, on
 * this channel's I/O thread, in arrival order, writing responses in the same
 * order and flushing once per read batch (or per {@link #FLUSH_AT} bytes of
 * responses). While the channel is not writable, verbs wait in arrival order
 * and reading stops, so a peer that does not take its answers cannot make the
 * node buffer more than about one read of requests and the write-buffer high
 * water mark of answers.
 *
 * <p>Until the peer has proven it holds the cluster secret, nothing but the
 * handshake frames is looked at: any other frame, a wrong proof, a malformed or
 * oversized frame closes the connection and is logged, and no verb of it runs.
 * After the handshake, a frame that is not a valid verb closes the connection
 * too (it cannot be resynchronised); a valid verb that fails its checks is
 * answered with its typed error and the connection stays.
 *
 * <p>Replicated segments: a verb whose answer must wait for its replica group's
 * acknowledgement ({@link VerbExecutor#waiting()}) does not block the I/O thread. Its
 * answer goes into a FIFO of pending answers ({@link PendingAnswers}), and every later answer of the channel
 * queues behind it (answers leave in request order: the verbs' contract), while later
 * verbs still run. The group's {@link AckGate#whenAcked} callback, on whatever thread
 * advanced the acknowledgement, only marks the answer and hands the release to this
 * channel's event loop, which writes every answer at the head of the FIFO that may
 * leave, in order, in one flush. An answer whose group fails first leaves as an ERROR
 * frame with the group's typed failure (its {@code mayHaveRun()} is true: the change
 * may be on copies), and the answers behind it follow. The FIFO is bounded: beyond
 * {@link #MAX_PENDING} answers or {@link #MAX_PENDING_BYTES} bytes of them, the channel
 * stops being read and the verbs of the current read batch are parked unexecuted, as
 * while the channel is not writable; reading resumes when the FIFO drains below both.
 *
 * <p>Its delayed tasks (the handshake timeout, injected verb delays, the close of a refused
 * peer that does not read) are timed by the shared timer wheel and run on the channel's
 * loop ({@link LoopTimer}). Message answers are written by {@link ChannelResponder}; the
 * handshake's decisions are {@link TargetHandshake}'s, the verbs' execution
 * {@link VerbExecutor}'s.
 *
 * <p><b>Note:</b> confined to its channel's I/O thread, except {@link #drop},
 * {@link #initiatorNode()}, {@link #initiatorIncarnation()} (volatile) and
 * {@link #readBatchOut} (it reads the confined state only on the I/O thread), and the ack
 * gates' callbacks to its pending answers (any thread: each publishes its outcome
 * through a volatile write and hands the release to the event loop, whose task
 * submission orders it before the release reads it).
 */
final class ServerHandler extends ChannelInboundHandlerAdapter {
    private static final Logger LOG = LoggerFactory.getLogger(ServerHandler.class);
    private static final int AWAIT_HELLO = 0;
    private static final int AWAIT_AUTH = 1;
    private static final int OPEN = 2;
    private static final int CLOSED = 3;
    /** Responses buffered in a read batch beyond this many bytes are written at once, not at the batch's end. */
    static final int FLUSH_AT = 256 * 1024;
    /** Answers waiting for their replica group beyond this many stop the reading of the channel. */
    static final int MAX_PENDING = 4096;
    /** Bytes of answers waiting for their replica group (and of those behind them) beyond which reading stops. */
    static final int MAX_PENDING_BYTES = 1 << 20;

    private final TcpTransport transport;
    private final String peer;
    private final Frame frame = new Frame();
    private int state = AWAIT_HELLO;
    private volatile int initiatorNode = -1;
    private volatile long initiatorIncarnation;
    private final TargetHandshake handshake;
    private ChannelHandlerContext ctx;
    private LoopTimer handshakeTimer;
    /** The source address whose handshake slot this connection holds ({@link TcpTransport#slots}). */
    private final java.net.InetAddress source;
    /** Whether this connection holds a handshake slot now (from admission until it authenticated or closed). */
    private boolean handshaking;
    /** Whether it was given a slot (at once, or after waiting): its handshake timer runs from then. */
    private boolean admitted;
    private ByteBuf out;
    /** Between a {@link #channelRead} and its {@link #channelReadComplete} (I/O thread): {@link #out} will be flushed. */
    private boolean inRead;
    /** Runs this connection's verbs (its copy buffer is allocated at the first verb). */
    private final VerbExecutor verbs;
    /**
     * Verbs not yet executed, in arrival order (retained frames): held by an injected delay, or parked while
     * the channel is not writable (the peer does not take its responses as fast as it asks).
     */
    private final ArrayDeque<Held> held = new ArrayDeque<>();
    /** The inbox of this initiator's messages, from WELCOME on. */
    private Inbox inbox;
    /** Answers waiting for their replica group, in request order (created with the context). */
    private PendingAnswers answers;

    private record Held(long releaseNanos, ByteBuf frame) {
    }

    ServerHandler(TcpTransport transport, String peer, java.net.InetAddress source) {
        this.transport = transport;
        this.peer = peer;
        this.source = source;
        this.verbs = new VerbExecutor(transport);
        this.handshake = new TargetHandshake(transport, peer);
    }

    int initiatorNode() {
        return initiatorNode;
    }

    long initiatorIncarnation() {
        return initiatorIncarnation;
    }

    /** Closes this connection from any thread (fencing, a restarted initiator, shutdown). */
    void drop(String reason) {
        ChannelHandlerContext c = ctx;
        if (c == null) {
            return;
        }
        c.executor().execute(() -> {
            if (state != CLOSED) {
                LOG.info("closing connection from node {} at {}: {}", initiatorNode, peer, reason);
                refuse(ErrorCode.NODE_UNAVAILABLE, 0, "node " + transport.nodeId() + " closed this connection: "
                        + reason);
            }
        });
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        this.answers = new PendingAnswers(ctx, this::releasePending);
    }

    /** Called before the channel is registered: it holds a slot from the start. */
    void holdsSlot() {
        handshaking = true;
        admitted = true;
    }

    /**
     * On the channel's I/O thread: a slot was given to this connection after it waited. A
     * connection closed meanwhile gives it back at once; otherwise it is read from now on,
     * under its handshake timeout.
     */
    void admitted() {
        handshaking = true;
        if (state == CLOSED || ctx == null || !ctx.channel().isActive()) {
            leaveHandshake();
            return;
        }
        admitted = true;
        armHandshakeTimer(ctx);
        ctx.channel().config().setAutoRead(true);
        ctx.read();
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        // this I/O thread's loop takes work queued for the end of its turn (a replication stream's send)
        io.membus.core.transport.TransportThreads.setTurnExecutor(ctx.executor());
        if (admitted) {
            armHandshakeTimer(ctx);
        }
        ctx.fireChannelActive();
    }

    private void armHandshakeTimer(ChannelHandlerContext ctx) {
        long timeout = transport.settings.handshakeTimeout.toNanos();
        handshakeTimer = LoopTimer.schedule(ctx.executor(), () -> {
            if (state < OPEN) {
                transport.refusals.warn("peer " + peer + " did not complete the handshake within "
                        + transport.settings.handshakeTimeout.toMillis() + " ms: disconnected");
                closeNow();
            }
        }, timeout);
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ByteBuf buf = (ByteBuf) msg;
        inRead = true;
        try {
            if (state == CLOSED) {
                return;
            }
            frame.wrap(buf, buf.readerIndex());
            String invalid = frame.validate();
            if (invalid != null) {
                protocolError(invalid);
                return;
            }
            switch (state) {
                case AWAIT_HELLO -> onHello();
                case AWAIT_AUTH -> onAuth();
                default -> {
                    if (onVerb(buf)) {
                        buf = null; // held: released when it runs
                    }
                }
            }
        } finally {
            if (buf != null) {
                buf.release();
            }
        }
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        inRead = false;
        flush();
        ctx.fireChannelReadComplete();
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        // a peer that does not read its responses stops being read: TCP pushes back on it. A refused peer
        // (CLOSED) is never read again, writable or not.
        if (state != CLOSED) {
            boolean writable = ctx.channel().isWritable() && !answers.backedUp();
            ctx.channel().config().setAutoRead(writable);
            if (writable && !held.isEmpty()) {
                // parked verbs run now; not inline: this event may fire inside a flush of execute()
                ctx.executor().execute(this::releaseHeld);
            }
        }
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        if (state < OPEN && state != CLOSED) {
            LOG.info("peer {} disconnected during the handshake", peer);
        }
        state = CLOSED;
        cleanUp();
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        Throwable c = cause instanceof DecoderException && cause.getCause() != null ? cause.getCause() : cause;
        if (state == CLOSED) {
            ctx.close(); // refused already: the rest of its bytes are not looked at
            return;
        }
        if (c instanceof ProtocolException pe) {
            transport.refusals.warn(pe.getMessage() + "; disconnected (node " + initiatorNode + ")");
            refuse(ErrorCode.PROTOCOL, 0, pe.getMessage());
        } else if (c instanceof java.io.IOException) {
            LOG.debug("connection from {} failed: {}", peer, c.toString());
            closeNow();
        } else {
            LOG.warn("connection from {} failed: {}", peer, c.toString(), c);
            closeNow();
        }
    }

    // ------------------------------------------------------------- handshake

    private void onHello() {
        if (frame.opcode() != Frame.OP_HELLO) {
            protocolError("opcode=" + Frame.opName(frame.opcode()) + " before the handshake (expected HELLO)");
            return;
        }
        initiatorIncarnation = 0; // not trusted until AUTH verifies
        ByteBuf b = ctx.alloc().ioBuffer(Frame.HEADER_LENGTH + Frame.CHALLENGE_BODY_LENGTH);
        try {
            handshake.hello(frame, b);
        } catch (ProtocolException e) { // a malformed HELLO record: refused by exceptionCaught, as a bad frame is
            b.release();
            throw e;
        }
        initiatorNode = handshake.initiatorNode();
        ctx.writeAndFlush(b, ctx.voidPromise());
        state = AWAIT_AUTH;
    }

    private void onAuth() {
        if (frame.opcode() != Frame.OP_AUTH) {
            protocolError("opcode=" + Frame.opName(frame.opcode()) + " before the handshake completed (expected AUTH)");
            return;
        }
        HandshakeRecord.Refusal refusal = handshake.auth(frame, ctx.channel());
        if (refusal != null) {
            refuseWith(b -> Frame.writeRefused(b, refusal));
            return;
        }
        long claimedIncarnation = handshake.claimedIncarnation();
        initiatorIncarnation = claimedIncarnation;
        state = OPEN;
        leaveHandshake();
        if (handshakeTimer != null) {
            handshakeTimer.cancel();
        }
        FrameDecoder decoder = ctx.pipeline().get(FrameDecoder.class);
        if (decoder != null) {
            decoder.authenticated();
        }
        try {
            inbox = transport.messages().open(initiatorNode, new ChannelResponder(this, ctx.channel()), true);
        } catch (DsmException e) {
            refuseWith(b -> Frame.writeRefused(b, TargetHandshake.refusal(ErrorCode.NODE_UNAVAILABLE, 0,
                    "node " + transport.nodeId() + " is shutting down")));
            return;
        }
        ByteBuf b = ctx.alloc().ioBuffer(2 * Frame.HEADER_LENGTH + Frame.WELCOME_BODY_LENGTH + Frame.CREDIT_BODY_LENGTH);
        Frame.writeWelcome(b, transport.lanePort());
        // the message credits: this initiator's inbox, and the largest message a frame of this node carries
        Frame.writeCredit(b, transport.messages().inboxCapacity(), Math.min(transport.messages().maxMessageSize(),
                transport.settings.maxFrame - Frame.HEADER_LENGTH - Frame.MSG_FIXED_BODY_LENGTH));
        ctx.writeAndFlush(b, ctx.voidPromise());
        LOG.debug("node {} (incarnation {}) at {} authenticated", initiatorNode, claimedIncarnation, peer);
    }

    // ------------------------------------------------------------- verbs

    /** @return whether the frame was held (and so must not be released now) */
    private boolean onVerb(ByteBuf buf) {
        byte op = frame.opcode();
        if (op == Frame.OP_MSG) {
            onMessage();
            return false;
        }
        if (op < Frame.OP_READ || op > Frame.OP_FAA) {
            protocolError("opcode=" + Frame.opName(op) + " is not a verb");
            return false;
        }
        FaultInjector faults = transport.faults();
        boolean backedUp = !ctx.channel().isWritable() || answers.backedUp();
        if (faults.active() || !held.isEmpty() || backedUp) {
            FaultInjector.Rule rule = faults.active() ? faults.rule(initiatorNode) : null;
            if (rule != null && rule.drop()) {
                verbs.dropped(); // never run: a verb linked to it must not run either
                return false; // never executed, never answered
            }
            long delay = rule == null ? 0 : rule.delayNanos();
            if (delay > 0 || !held.isEmpty() || backedUp) {
                long release = System.nanoTime() + delay;
                if (!held.isEmpty()) {
                    release = Math.max(release, held.peekLast().releaseNanos());
                }
                held.add(new Held(release, buf));
                if (delay > 0 || !backedUp) {
                    long wait = release - System.nanoTime();
                    if (wait > 0) {
                        // timed by the shared wheel (it fires at or after release), run on this channel's loop
                        LoopTimer.schedule(ctx.executor(), this::releaseHeld, wait);
                    } else {
                        ctx.executor().execute(this::releaseHeld); // due now: after this read, in turn
                    }
                } // else: channelWritabilityChanged or releasePending releases it
                return true;
            }
        }
        execute();
        return false;
    }

    /**
     * Hands a message to this initiator's inbox; the node's message executor handles
     * it and answers through {@link ChannelResponder}. A message beyond the credits
     * granted is a protocol error (the initiator broke the flow control).
     */
    private void onMessage() {
        long corr = frame.correlationId();
        short channel = frame.shortAt(Frame.MSG_CHANNEL_FIELD_OFFSET);
        if (!inbox.deliver(corr, channel, frame.messageIsRequest(), frame.messagePayload())) {
            if (inbox.isClosed()) {
                ByteBuf o = out();
                Frame.writeMessageError(o, corr, ErrorCode.NODE_UNAVAILABLE.wire(), 0, "node " + transport.nodeId()
                        + " is shutting down");
                return;
            }
            protocolError("message beyond the granted credits: credits=" + transport.messages().inboxCapacity()
                    + ", correlationId=" + corr);
        }
    }

    /**
     * The read batch's answer buffer, for a message answer written on this channel's I/O thread
     * inside a read batch of the open connection ({@link ChannelResponder}); else null (any thread).
     */
    ByteBuf readBatchOut(Channel channel) {
        return channel.eventLoop().inEventLoop() && inRead && state == OPEN ? out() : null;
    }

    /** Runs the held verbs that are due, in order, while the channel takes their responses. */
    private void releaseHeld() {
        while (!held.isEmpty() && held.peek().releaseNanos() - System.nanoTime() <= 0
                && (state != OPEN || ctx.channel().isWritable() && !answers.backedUp())) {
            ByteBuf b = held.poll().frame();
            try {
                if (state == OPEN) {
                    frame.wrap(b, b.readerIndex());
                    execute();
                }
            } finally {
                b.release();
            }
        }
        flush();
    }

    private void execute() {
        // behind an answer that waits, every answer waits (request order)
        ByteBuf behind = answers.behindTail();
        ByteBuf o = behind == null ? out() : behind;
        int start = o.writerIndex();
        verbs.execute(frame, initiatorNode, o);
        VerbExecutor.Waiting w = verbs.waiting();
        if (w != null) {
            answers.hold(w, o, start);
        } else if (behind != null) {
            answers.addedBehind(o.writerIndex() - start);
        } else if (o.readableBytes() >= FLUSH_AT) {
            // large answers leave now: a batch of big reads must not build one huge buffer, and once the
            // channel is not writable the rest of the batch waits in held instead of executing
            flush();
        }
    }

    /**
     * On the event loop: writes the pending answers at the head of the FIFO that may leave
     * (acknowledged, or failed: then an ERROR frame), with the answers behind each, in
     * order and in one flush; then, below the limits, reads the channel again and runs
     * the verbs parked meanwhile.
     */
    private void releasePending() {
        answers.releaseStarted(); // before reading the outcomes: a callback after this queues a new release
        if (state == CLOSED) {
            return; // cleanUp released them
        }
        answers.writeResolved(this::out);
        flush();
        if (state == OPEN && !answers.backedUp() && ctx.channel().isWritable()) {
            ctx.channel().config().setAutoRead(true);
            if (!held.isEmpty()) {
                releaseHeld();
            }
        }
    }

    private ByteBuf out() {
        if (out == null) {
            out = ctx.alloc().ioBuffer(4096);
        }
        return out;
    }

    private void flush() {
        ByteBuf o = out;
        if (o != null) {
            out = null;
            if (o.isReadable() && state != CLOSED) {
                ctx.writeAndFlush(o, ctx.voidPromise());
            } else {
                o.release();
            }
        }
    }

    // ------------------------------------------------------------- refusal

    private void protocolError(String detail) {
        ProtocolException e = new ProtocolException(peer + (initiatorNode >= 0 ? " (node " + initiatorNode + ")" : ""),
                detail);
        transport.refusals.warn(e.getMessage() + "; disconnected");
        refuse(ErrorCode.PROTOCOL, 0, e.getMessage());
    }

    private void refuse(ErrorCode code, long detail, String message) {
        refuseWithDetail(code, detail, message);
    }

    /**
     * Sends one ERROR frame (correlation id 0), then closes; nothing more of this peer is read. A peer that
     * does not read (its responses fill the socket, so the frame cannot leave) is closed anyway after
     * {@code membus.transports.tcp.handshake-timeout}: a stopped or hostile peer cannot keep a refused channel open.
     */
    private void refuseWithDetail(ErrorCode code, long detail, String message) {
        refuseWith(b -> Frame.writeError(b, 0, code.wire(), 0, 0, detail, message));
    }

    /** As {@link #refuseWithDetail}, with the frame {@code frame} writes (an ERROR frame, or a handshake's REFUSED). */
    private void refuseWith(java.util.function.Consumer<ByteBuf> frame) {
        if (state == CLOSED) {
            return;
        }
        flush(); // responses to verbs executed before the refusal still go out, in order
        state = CLOSED;
        ctx.channel().config().setAutoRead(false);
        ByteBuf b = ctx.alloc().ioBuffer(Frame.ERROR_MESSAGE_FIELD_OFFSET + Frame.MAX_ERROR_MESSAGE);
        frame.accept(b);
        ctx.writeAndFlush(b).addListener(ChannelFutureListener.CLOSE);
        if (ctx.channel().isActive()) {
            LoopTimer.schedule(ctx.executor(), ctx::close, transport.settings.handshakeTimeout.toNanos());
        }
        cleanUp();
    }

    private void closeNow() {
        state = CLOSED;
        ctx.close();
        cleanUp();
    }

    private void leaveHandshake() {
        if (handshaking) {
            handshaking = false;
            transport.slots.release(source);
        }
    }

    private void cleanUp() {
        leaveHandshake();
        if (inbox != null) {
            transport.messages().close(inbox, "the connection from node " + initiatorNode + " closed", false);
        }
        if (handshakeTimer != null) {
            handshakeTimer.cancel();
        }
        if (out != null) {
            out.release();
            out = null;
        }
        while (!held.isEmpty()) {
            held.poll().frame().release();
        }
        answers.clear();
    }
}
