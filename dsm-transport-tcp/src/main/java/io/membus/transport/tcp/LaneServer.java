package io.membus.transport.tcp;

import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.ProtocolException;
import io.membus.core.transport.message.HandshakeRecord;
import io.membus.core.replication.AckGate;
import io.membus.core.fault.FaultInjector;
import io.membus.core.transport.TransportThreads;
import io.membus.core.time.TimerWheel;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Predicate;

/**
 * The target's side of the blocking lanes: a plain blocking server socket, beside the
 * Netty one, whose every accepted connection is served by a thread of its own that
 * reads a verb, runs it and writes its answer — the shape of the blocking-socket floor
 * a synchronous verb is measured against. The lane's caller writes its request and
 * reads its answer itself, so a lane verb now costs the two thread wake-ups of that
 * floor on both sides; served by the Netty event loop, the target's side paid an epoll
 * wake-up and the event loop's pipeline per verb, and one event-loop thread served
 * every lane of every peer.
 *
 * <p>A connection here is a lane and nothing else: the same handshake as any
 * connection ({@link TargetHandshake}: the cluster secret's proofs, the node and
 * incarnation asked for, fencing), then verbs and message requests only (a one-way message
 * or any other frame is a protocol error that closes it). A message request is handled on
 * the lane's thread by its channel's inline handler and answered at once
 * ({@link io.membus.core.transport.Connection#requestDirect}: the replication stream of a
 * peer's lane thread, docs/replication.md §3.5.1). Verbs are run by a {@link VerbExecutor} with the same checks,
 * LINKED rule and answers as on the Netty side. Fault rules apply as there: a dropped
 * verb is never run nor answered, a delayed one runs after its delay (the lane's later
 * verbs wait behind it, as they do on a channel). Fencing an initiator, a newer
 * incarnation of it, {@code disconnect} and {@code close} close its lane sockets, which
 * ends their threads; the caller sees its lane lost. The port is announced in the
 * WELCOME of every Netty connection; an initiator whose WELCOME names no port opens
 * its lanes to the Netty port, as before.
 *
 * <p>Replicated segments: a verb whose answer must wait for its replica group
 * ({@link VerbExecutor#waiting()}) holds the lane's thread until the group acknowledged
 * it (the answers before it are written first: nothing is held across a wait), at most
 * until the transport's operation timeout counted from the request's arrival (what the
 * initiator's deadline is, as far as the target can know it); then the answer is an
 * ERROR frame with a {@link DsmTimeoutException}, or with the group's typed failure when
 * the group fails first (both {@code mayHaveRun()}: the change ran here and may be on
 * copies). It waits through {@link AckGate#whenAcked} and a park rather than
 * {@link AckGate#await}, so that closing the lane (fencing, {@code disconnect},
 * {@code close}) ends the wait, and the thread, at once.
 *
 * <p>One thread per lane: at most {@code blocking-lanes} per initiator (default 16). A
 * thread blocked in {@code read} costs no CPU.
 *
 * <p><b>Note:</b> thread-safe: the acceptor and one thread per connection; the
 * registry of connections is concurrent and {@link #close} may be called from any
 * thread.
 */
final class LaneServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(LaneServer.class);
    /** A lane's requests are at most this long (the lane's own limit); anything longer is a protocol error. */
    private static final int MAX_FRAME = TcpLane.MAX_FRAME;
    /** Answers held for one write at most (a batch of reads' answers is written when it reaches this). */
    private static final int FLUSH_BYTES = 64 << 10;
    /** Lanes one initiator may hold at once: the most {@code blocking-lanes} allows. */
    static final int MAX_LANES_PER_INITIATOR = Long.SIZE;

    private final TcpTransport transport;
    private final ServerSocket server;
    private final Set<Served> served = ConcurrentHashMap.newKeySet();
    /** Writes of answers (one per batch of answers); for tests. */
    private final java.util.concurrent.atomic.LongAdder answerWrites = new java.util.concurrent.atomic.LongAdder();
    private final AtomicInteger threads = new AtomicInteger();
    private volatile boolean closed;

    LaneServer(TcpTransport transport, String host) throws IOException {
        this.transport = transport;
        this.server = new ServerSocket();
        server.setReuseAddress(true);
        server.bind(new InetSocketAddress(host, 0), 64);
        TransportThreads.startDaemon("membus-lanes-accept-" + transport.nodeId(), this::acceptLoop);
    }

    int port() {
        return server.getLocalPort();
    }

    private void acceptLoop() {
        while (!closed) {
            Socket s;
            try {
                s = server.accept();
            } catch (IOException e) {
                if (!closed) {
                    LOG.warn("node {}: the lane server stopped accepting: {}", transport.nodeId(), e.toString());
                }
                return;
            }
            String peer = String.valueOf(s.getRemoteSocketAddress());
            java.net.InetAddress source = s.getInetAddress();
            Served c = new Served(s, peer, source);
            // the node's handshake slots, shared with the Netty port: beyond its source's share a lane waits
            // (accepted, no thread, not read) and its source's later ones wait behind every other source's
            HandshakeSlots.Offer offer = transport.slots.offer(source, new HandshakeSlots.Waiter() {
                @Override
                public void admitted() {
                    start(c);
                }

                @Override
                public void expired() {
                    transport.refusals.warn("peer " + peer + " waited " + transport.settings.handshakeTimeout.toMillis()
                            + " ms for a handshake slot on the lane port: disconnected");
                    c.close();
                }
            });
            if (offer == HandshakeSlots.Offer.REFUSED) {
                transport.refusals.warn("peer " + peer + " refused on the lane port: its address already waits with"
                        + " too many connections for a handshake slot (membus.transports.tcp.max-handshaking="
                        + transport.settings.maxHandshaking + "); disconnected");
                closeQuietly(s);
            } else if (offer == HandshakeSlots.Offer.ADMITTED) {
                start(c);
            }
        }
    }

    /** Serves an accepted lane that holds a handshake slot: a thread of its own (it gives the slot back). */
    private void start(Served c) {
        served.add(c);
        if (closed) { // closed while it was accepted: close() may not have seen it
            c.close();
            served.remove(c);
            transport.slots.release(c.source);
            return;
        }
        TransportThreads.startDaemon("membus-lane-" + transport.nodeId() + "-" + threads.incrementAndGet(), c);
    }

    /** Closes the lanes whose initiator matches; returns how many. */
    int drop(Predicate<Served> which, String reason) {
        int n = 0;
        for (Served c : served) {
            if (which.test(c)) {
                LOG.info("closing lane from node {} at {}: {}", c.initiatorNode, c.peer, reason);
                c.close();
                n++;
            }
        }
        return n;
    }

    /** Lanes served now (for tests). */
    long answerWrites() {
        return answerWrites.sum();
    }

    int servedCount() {
        return served.size();
    }

    @Override
    public void close() {
        closed = true;
        closeQuietly(server);
        for (Served c : served) {
            c.close();
        }
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception ignored) {
            // closing: nothing left to do
        }
    }

    /**
     * The lane's input buffer, which tells whether the next request already arrived whole
     * (so its answer can leave with the one before it).
     *
     * <p><b>Note:</b> not thread-safe: its lane's thread only.
     */
    static final class LaneInput extends BufferedInputStream {
        LaneInput(java.io.InputStream in) {
            super(in, MAX_FRAME);
        }

        /** Whether a whole frame (its length field and all it counts) is buffered: reading it makes no call. */
        boolean holdsWholeFrame() {
            int held = count - pos;
            if (held < 4) {
                return false;
            }
            int lengthField = (buf[pos] & 0xff) | (buf[pos + 1] & 0xff) << 8 | (buf[pos + 2] & 0xff) << 16
                    | (buf[pos + 3] & 0xff) << 24;
            return lengthField >= 0 && held - 4 >= lengthField;
        }
    }

    /** One accepted lane and the thread that serves it. */
    final class Served implements Runnable {
        private final Socket socket;
        private final String peer;
        /** The source address whose handshake slot it holds until admitted or closed. */
        final java.net.InetAddress source;
        /** The authenticated initiator (-1 until the handshake admitted it) and its incarnation. */
        volatile int initiatorNode = -1;
        volatile long initiatorIncarnation;
        private final byte[] in = new byte[MAX_FRAME];
        private final ByteBuf inBuf = Unpooled.wrappedBuffer(in);
        private final ByteBuf out = Unpooled.buffer(MAX_FRAME);
        private final Frame frame = new Frame();
        /** The thread serving the lane (null until it runs): {@link #close} wakes it from an ack wait. */
        private volatile Thread thread;

        /** Set (before it closes the socket) by {@link #handshakeDeadline} when the handshake ran out of time. */
        private volatile boolean handshakeExpired;
        /**
         * Closes the socket when the handshake is not done by its deadline. A timer, not
         * {@code SO_TIMEOUT}: a JDK socket that was ever given a read timeout stays in
         * non-blocking mode for good, and then every read that waits costs three system
         * calls (a read that finds nothing, a poll, the read) where a blocking read costs one.
         */
        private final TimerWheel.Timeout handshakeDeadline = new TimerWheel.Timeout() {
            @Override
            protected void expired() {
                handshakeExpired = true;
                close();
            }
        };

        Served(Socket socket, String peer, java.net.InetAddress source) {
            this.socket = socket;
            this.peer = peer;
            this.source = source;
        }

        @Override
        public void run() {
            thread = Thread.currentThread();
            // it waits for each verb's answer itself: a replicated change may exchange its stream message on a
            // lane of its own (CopyStream, Connection.requestDirect) instead of handing it to an I/O thread
            TransportThreads.markServesBlockingVerbs();
            boolean handshaking = true;
            try {
                socket.setTcpNoDelay(true);
                TimerWheel.SHARED.arm(handshakeDeadline,
                        System.nanoTime() + Math.max(1, transport.settings.handshakeTimeout.toNanos()));
                LaneInput buffered = new LaneInput(socket.getInputStream());
                DataInputStream input = new DataInputStream(buffered);
                OutputStream output = socket.getOutputStream();
                if (!handshake(input, output)) {
                    return;
                }
                TimerWheel.SHARED.cancel(handshakeDeadline);
                if (handshakeExpired) {
                    return; // admitted as the deadline closed the socket: the lane is gone
                }
                transport.slots.release(source);
                handshaking = false;
                serve(input, buffered, output); // from here the caller's reaper keeps the deadline
            } catch (IOException e) {
                if (handshaking && handshakeExpired) {
                    transport.refusals.warn("peer " + peer + " did not complete the lane handshake within "
                            + transport.settings.handshakeTimeout.toMillis() + " ms: disconnected");
                } else {
                    LOG.debug("lane from {} ended: {}", peer, e.toString());
                }
            } catch (RuntimeException e) {
                LOG.warn("lane from {} failed: {}", peer, e.toString(), e);
            } finally {
                TimerWheel.SHARED.cancel(handshakeDeadline);
                if (handshaking) {
                    transport.slots.release(source);
                }
                close();
                served.remove(this);
            }
        }

        /** HELLO, CHALLENGE, AUTH, WELCOME; false (refused, answered and to be closed) when not admitted. */
        private boolean handshake(DataInputStream input, OutputStream output) throws IOException {
            TargetHandshake hs = new TargetHandshake(transport, peer);
            String bad = read(input);
            if (bad != null || frame.opcode() != Frame.OP_HELLO) {
                return refuseProtocol(bad != null ? bad : "opcode=" + Frame.opName(frame.opcode())
                        + " before the handshake (expected HELLO)", output);
            }
            out.clear();
            try {
                hs.hello(frame, out);
            } catch (ProtocolException e) { // a malformed HELLO record
                return refuseProtocol(e.getMessage(), output);
            }
            write(output);
            bad = read(input);
            if (bad != null || frame.opcode() != Frame.OP_AUTH) {
                return refuseProtocol(bad != null ? bad : "opcode=" + Frame.opName(frame.opcode())
                        + " before the handshake completed (expected AUTH)", output);
            }
            HandshakeRecord.Refusal refusal;
            try {
                refusal = hs.auth(frame, this);
            } catch (ProtocolException e) { // a malformed AUTH record
                return refuseProtocol(e.getMessage(), output);
            }
            if (refusal != null) {
                refuseHandshake(refusal, output);
                return false;
            }
            int node = hs.initiatorNode();
            long others = served.stream().filter(c -> c != this && c.initiatorNode == node).count();
            if (others >= MAX_LANES_PER_INITIATOR) { // a peer leaking lanes must not leak this node's threads
                transport.refusals.warn("peer " + peer + " (node " + node + ") refused: it holds " + others
                        + " lanes to node " + transport.nodeId() + " already; disconnected");
                refuseHandshake(TargetHandshake.refusal(ErrorCode.NODE_UNAVAILABLE, 0, "node " + transport.nodeId()
                        + " serves at most " + MAX_LANES_PER_INITIATOR + " blocking lanes per initiator; close idle ones"),
                        output);
                return false;
            }
            initiatorNode = node;
            initiatorIncarnation = hs.claimedIncarnation();
            out.clear();
            Frame.writeWelcome(out, 0);
            write(output);
            LOG.debug("lane from node {} (incarnation {}) at {} authenticated", initiatorNode, initiatorIncarnation,
                    peer);
            return true;
        }

        /** Verbs until the peer goes away, a protocol error, or the lane is closed. */
        /**
         * Runs the lane's verbs in order. The answers of the verbs that arrived together
         * (a pair the caller wrote at once) leave together: an answer is held while the
         * next request is already whole in the input buffer, and written with the answers
         * after it once a request has to be waited for (or {@value LaneServer#FLUSH_BYTES} bytes of
         * answers are held). One write and one wake-up of the caller per batch, where an
         * answer per write woke the caller for the first answer of a pair and again for
         * the second. Nothing is held across a wait: not across a read that blocks, nor
         * across a fault rule's delay.
         */
        private void serve(DataInputStream input, LaneInput buffered, OutputStream output) throws IOException {
            VerbExecutor verbs = new VerbExecutor(transport);
            out.clear();
            while (true) {
                String bad = read(input);
                if (bad != null) {
                    flush(output);
                    refuseProtocol(bad, output);
                    return;
                }
                byte op = frame.opcode();
                if (op == Frame.OP_MSG) {
                    if (!direct(output)) {
                        return;
                    }
                    continue;
                }
                if (op < Frame.OP_READ || op > Frame.OP_FAA) {
                    flush(output);
                    refuseProtocol("opcode=" + Frame.opName(op) + " on a blocking lane, which carries verbs and message"
                            + " requests only",
                            output);
                    return;
                }
                FaultInjector faults = transport.faults();
                FaultInjector.Rule rule = faults.active() ? faults.rule(initiatorNode) : null;
                if (rule != null && rule.drop()) {
                    verbs.dropped(); // never run, never answered; a verb linked to it does not run either
                } else {
                    long delay = rule == null ? 0 : rule.delayNanos();
                    long arrived = 0; // taken only when needed: read after a delay, or when an answer waits
                    if (delay > 0) {
                        flush(output); // the answers before it are not held for its delay
                        arrived = System.nanoTime();
                        long until = arrived + delay;
                        // the lane's later verbs wait behind it, as on a channel; a closed lane stops waiting
                        while (!socket.isClosed() && until - System.nanoTime() > 0) {
                            LockSupport.parkNanos(Math.min(until - System.nanoTime(), 10_000_000L));
                        }
                        if (socket.isClosed()) {
                            return;
                        }
                    }
                    int start = out.writerIndex();
                    verbs.execute(frame, initiatorNode, out);
                    VerbExecutor.Waiting w = verbs.waiting();
                    if (w != null && !awaitAck(w, arrived != 0 ? arrived : System.nanoTime(), start, output)) {
                        return; // the lane was closed while it waited
                    }
                }
                if (out.readableBytes() >= FLUSH_BYTES || !buffered.holdsWholeFrame()) {
                    flush(output);
                }
            }
        }

        /**
         * A message request on the lane ({@link io.membus.core.transport.Connection#requestDirect}):
         * handled here, on the lane's thread, by the channel's inline handler
         * ({@link io.membus.core.transport.message.MessageEndpoint#handleDirect}: the same checks as a
         * message of the Netty side, fencing included), answered at once with its reply or
         * its typed failure. A one-way message is a protocol error.
         *
         * @return false when the lane is to be closed (protocol error)
         */
        private boolean direct(OutputStream output) throws IOException {
            if (!frame.messageIsRequest()) {
                flush(output);
                return refuseProtocol("a one-way message on a blocking lane, which carries requests only", output);
            }
            long corr = frame.correlationId();
            short channel = frame.shortAt(Frame.MSG_CHANNEL_FIELD_OFFSET);
            byte[] payload = frame.messagePayload();
            byte[] reply = null;
            DsmException failure = null;
            try {
                reply = transport.messages().handleDirect(initiatorNode, channel, payload);
            } catch (DsmException e) {
                failure = e;
            }
            if (failure == null && Frame.MSG_PAYLOAD_FIELD_OFFSET + reply.length > MAX_FRAME) { // a lane reads no longer frame
                failure = new io.membus.core.error.MessageTooLargeException(transport.nodeId(), channel & 0xffff,
                        reply.length, MAX_FRAME - Frame.MSG_PAYLOAD_FIELD_OFFSET);
            }
            if (failure == null) {
                Frame.writeMessageReply(out, corr, reply);
            } else {
                Frame.writeMessageError(out, corr, failure.code().wire(),
                        io.membus.core.transport.message.MessageFailures.detail(failure),
                        io.membus.core.transport.message.MessageFailures.text(failure));
            }
            flush(output);
            return true;
        }

        /**
         * Holds the lane until the answer written at {@code start} of {@link #out} may leave:
         * the answers before it are written first; an ERROR frame replaces it when the group
         * fails, or when the operation timeout from {@code arrivedNanos} passes first.
         *
         * @return false when the lane was closed meanwhile (nothing more is written)
         */
        private boolean awaitAck(VerbExecutor.Waiting w, long arrivedNanos, int start, OutputStream output)
                throws IOException {
            if (start > out.readerIndex()) {
                answerWrites.increment();
                output.write(out.array(), out.arrayOffset() + out.readerIndex(), start - out.readerIndex());
                out.readerIndex(start);
            }
            long deadline = arrivedNanos + transport.settings.operationTimeout.toNanos();
            AckWait wait = new AckWait(Thread.currentThread());
            w.gate().whenAcked(w.need(), wait);
            DsmException failure = null;
            while (!wait.done) {
                if (socket.isClosed()) {
                    return false;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    failure = new DsmTimeoutException(Frame.opName(w.opcode()) + " (its answer waited for the copies"
                            + " of its replica group)", transport.nodeId(), transport.settings.operationTimeout,
                            "it ran on this node and stays; a copy is slow or unreachable: check the copies, or"
                                    + " raise the operation timeout");
                    break;
                }
                LockSupport.parkNanos(wait, left);
            }
            if (failure == null) {
                failure = wait.failure; // read after done (volatile): null when acknowledged
            }
            if (failure != null) {
                out.writerIndex(start);
                w.writeFailure(out, failure);
            }
            return true;
        }

        /** Writes the answers held, if any. */
        private void flush(OutputStream output) throws IOException {
            if (out.isReadable()) {
                answerWrites.increment(); // before the write: a test that got the answers sees it counted
                write(output);
                out.clear();
            }
        }

        /**
         * Reads one whole frame into {@link #frame}: null, or what is wrong with it (a length
         * outside the lane's limits, or what {@link Frame#validate()} refuses).
         *
         * @throws IOException the peer went away, or the socket was closed
         */
        private String read(DataInputStream input) throws IOException {
            input.readFully(in, 0, 4);
            int lengthField = inBuf.getIntLE(Frame.LENGTH_FIELD_OFFSET);
            // before the handshake, no frame longer than a handshake's (as on the Netty side)
            int max = initiatorNode < 0 ? FrameDecoder.HANDSHAKE_MAX_FRAME : MAX_FRAME;
            if (lengthField < Frame.MIN_LENGTH_FIELD || lengthField > max - 4) {
                return "frame length=" + (lengthField + 4L) + " outside " + Frame.HEADER_LENGTH + ".." + max
                        + " on a blocking lane" + (initiatorNode < 0 ? " (before the handshake)" : "");
            }
            input.readFully(in, 4, lengthField);
            frame.wrap(inBuf, 0);
            return frame.validate();
        }

        private void write(OutputStream output) throws IOException {
            output.write(out.array(), out.arrayOffset() + out.readerIndex(), out.readableBytes());
        }

        private boolean refuseProtocol(String detail, OutputStream output) {
            String who = peer + (initiatorNode >= 0 ? " (node " + initiatorNode + ")" : "");
            transport.refusals.warn("protocol error from " + who + " on a blocking lane: " + detail + "; disconnected");
            refuse(ErrorCode.PROTOCOL, 0, "protocol error on a blocking lane of node " + transport.nodeId() + ": "
                    + detail, output);
            return false;
        }

        /** One ERROR frame (correlation id 0) if the socket takes it, then the caller closes. */
        private void refuse(ErrorCode code, long detail, String message, OutputStream output) {
            out.clear();
            Frame.writeError(out, 0, code.wire(), 0, 0, detail, message);
            writeRefusal(output);
        }

        /** A REFUSED frame (the handshake's decision not to admit the initiator) if the socket takes it. */
        private void refuseHandshake(HandshakeRecord.Refusal refusal, OutputStream output) {
            out.clear();
            Frame.writeRefused(out, refusal);
            writeRefusal(output);
        }

        private void writeRefusal(OutputStream output) {
            try {
                write(output);
            } catch (IOException ignored) {
                // the peer is gone: nothing to tell it
            }
        }

        void close() {
            closeQuietly(socket);
            Thread t = thread;
            if (t != null) {
                LockSupport.unpark(t); // out of an ack wait: it sees the socket closed
            }
        }
    }

    /**
     * The outcome of one lane's wait for its group: set by the thread that advanced the
     * acknowledgement (or failed the group), which then wakes the lane's thread.
     *
     * <p><b>Note:</b> thread-safe: {@link #failure} is published by the volatile {@link #done}.
     */
    private static final class AckWait implements AckGate.Done {
        private final Thread waiter;
        private DsmException failure;
        private volatile boolean done;

        AckWait(Thread waiter) {
            this.waiter = waiter;
        }

        @Override
        public void done(DsmException f) {
            failure = f;
            done = true;
            LockSupport.unpark(waiter);
        }
    }
}
