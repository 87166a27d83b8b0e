package io.membus.transport.tcp;

import io.membus.core.auth.PeerAuth;
import io.membus.core.error.DsmException;
import io.membus.core.OperationDeadline;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.VerbObserver;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;

/**
 * One blocking socket to a peer on which a calling thread runs one verb at a time
 * and reads its answer itself: the request goes from the caller's thread straight
 * to the socket and the answer wakes the caller, so a synchronous verb costs the
 * two thread hops of a plain blocking-socket round trip instead of the four of the
 * pipelined channel (caller, initiator I/O thread, target, initiator I/O thread,
 * caller). The target serves it as any other authenticated connection.
 *
 * <p>A lane is owned by {@link TcpLanes}: a caller takes it, runs one verb, and
 * gives it back (or a {@link LaneFlight} holds it for a thread's reads in flight until
 * their answers are read). A lane that timed out, lost its socket or read a malformed frame
 * is broken (its next answer could belong to the verb that timed out) and is
 * closed, never reused.
 *
 * <p>Frames carry at most {@link #MAX_FRAME} bytes, so a request always fits an
 * empty socket send buffer and writing it never blocks: the only wait is for the
 * answer. The socket stays in blocking mode (one {@code read} per answer); the
 * deadline of each verb, and of the connect and handshake, is kept by
 * {@link LaneReaper}, which closes the socket of a lane that outlived it.
 *
 * <p><b>Note:</b> not thread-safe: one thread at a time (the pool hands it out
 * exclusively); {@link #close()} may be called from any thread and wakes a
 * blocked reader, which then fails.
 */
final class TcpLane implements AutoCloseable {
    /** Largest request or answer a lane carries; longer verbs take the pipelined channel. */
    static final int MAX_FRAME = 16 * 1024;
    /** Longest read or write a lane carries. */
    static final int MAX_VERB_LENGTH = MAX_FRAME - Frame.HEADER_LENGTH - Frame.WRITE_FIXED_BODY_LENGTH;
    /**
     * Most reads one burst ({@link LaneCompounds#readEach}) sends: as many READ requests as fit the
     * lane's request buffer (16 KiB / 36 B = 455), so the burst is one {@code write} that
     * never blocks. Longer bursts are split by {@link TcpLanes#readEach} (a round trip each).
     */
    static final int MAX_BURST = MAX_FRAME / (Frame.HEADER_LENGTH + Frame.READ_BODY_LENGTH);
    private static final net.openhft.chronicle.core.UnsafeMemory MEMORY = net.openhft.chronicle.core.UnsafeMemory.MEMORY;
    private static final long BYTE_ARRAY_OFFSET = net.openhft.chronicle.core.UnsafeMemory.UNSAFE.arrayBaseOffset(
            byte[].class);

    final int index;
    private final TcpTransport transport;
    private final PeerInfo peer;
    private final Socket socket;
    private InputStream in;   // set once connected, before the lane is handed out
    private OutputStream out;
    private final long timeoutNanos;
    /** The request being sent. */
    private final byte[] buffer = new byte[MAX_FRAME];
    private final ByteBuf frameBuf = Unpooled.wrappedBuffer(buffer);
    /** What was read from the socket: the current answer at {@link #readPos}, maybe more after it. */
    private final byte[] received = new byte[MAX_FRAME];
    private final ByteBuf receivedBuf = Unpooled.wrappedBuffer(received);
    private int readPos;
    private int readLimit;
    private int frameEnd;
    private final Frame frame = new Frame();
    private long nextCorrelation;
    private volatile boolean broken;
    /** When the current wait must end ({@code System.nanoTime()}), or 0 while the lane waits for nothing. */
    private volatile long deadline;
    /**
     * What was left of the deadline when the current requests were sent (lane thread only):
     * what a timeout names. An operation's scope may leave far less than the operation
     * timeout (a cleanup's 200 ms): issue 27's "20 s hang" was such a budget reported as 20 s.
     */
    private long budgetNanos;
    /** Set by the reaper when it closed the socket for a passed deadline. */
    private volatile boolean expired;

    private TcpLane(int index, TcpTransport transport, PeerInfo peer, Socket socket) {
        this.index = index;
        this.transport = transport;
        this.peer = peer;
        this.socket = socket;

        this.timeoutNanos = transport.settings.operationTimeout.toNanos();
    }

    /**
     * Connects and authenticates a lane within the connect timeout, on the calling thread.
     *
     * @throws DsmException when the peer cannot be reached or refuses the handshake
     */
    static TcpLane open(int index, TcpTransport transport, PeerInfo peer, String host, int port) {
        return open(index, transport, peer, host, port, new boolean[1]);
    }

    /**
     * {@link #open(int, TcpTransport, PeerInfo, String, int)}; {@code reached[0]} is set once
     * the TCP connection is established (a failure after it is the peer's handshake, not the
     * port's reachability).
     */
    static TcpLane open(int index, TcpTransport transport, PeerInfo peer, String host, int port, boolean[] reached) {
        Socket socket = new Socket();
        TcpLane lane = new TcpLane(index, transport, peer, socket);
        // the connect timeout, or the calling verb's deadline if earlier (OperationDeadline): a verb never waits
        // past its deadline for a lane
        lane.deadline = OperationDeadline.until(System.nanoTime(), transport.settings.connectTimeout.toNanos());
        LaneReaper.watch(lane);
        try {
            socket.setTcpNoDelay(true);
            socket.setSendBufferSize(4 * MAX_FRAME);
            socket.connect(new InetSocketAddress(host, port)); // blocking; the reaper keeps the connect timeout
            reached[0] = true;
            lane.in = socket.getInputStream();
            lane.out = socket.getOutputStream();
            lane.handshake();
            lane.deadline = 0;
            return lane;
        } catch (IOException e) {
            lane.close();
            throw NodeUnavailableException.notSent(peer.nodeId(), "cannot open a blocking lane to " + peer.address()
                    + (lane.expired ? ": no authenticated connection within the connect timeout ("
                    + transport.settings.connectTimeout.toMillis() + " ms) or the verb's deadline" : ": " + e), e);
        } catch (RuntimeException e) {
            lane.close();
            throw e;
        }
    }

    private void handshake() throws IOException {
        byte[] nonce = PeerAuth.nonce();
        frameBuf.clear();
        Frame.writeHello(frameBuf, transport.nodeId(), transport.incarnation(), peer.nodeId(), peer.incarnation(),
                nonce);
        handshakeStep(Frame.OP_CHALLENGE);
        byte[] proof = ClientHandler.answerChallenge(transport, peer, nonce, frame);
        frameBuf.clear();
        Frame.writeAuth(frameBuf, proof);
        handshakeStep(Frame.OP_WELCOME);
        // the Netty side grants message credits next (MSG_CREDIT); a lane carries no messages and skips them
    }

    /** Sends the handshake frame in {@link #frameBuf} and reads the answer, which must be {@code expected}. */
    private void handshakeStep(byte expected) throws IOException {
        send();
        receive();
        if (frame.opcode() == Frame.OP_ERROR || frame.opcode() == Frame.OP_REFUSED) {
            throw handshakeRefused();
        }
        if (frame.opcode() != expected) {
            throw new ProtocolException(peer.toString(), "opcode=" + Frame.opName(frame.opcode())
                    + " during the handshake (expected " + Frame.opName(expected) + ")");
        }
    }

    private DsmException handshakeRefused() {
        return ErrorFrames.decode(frame, peer);
    }

    // ------------------------------------------------------------------ verbs

    void readInto(long ptr, long remoteKey, byte[] dst, int dstOffset, int length) {
        frameBuf.clear();
        Frame.writeRead(frameBuf, ++nextCorrelation, ptr, remoteKey, length);
        call(Frame.OP_READ, length, length);
        frame.bytesAt(Frame.HEADER_LENGTH, dst, dstOffset, length);
    }

    void readToAddress(long ptr, long remoteKey, long address, int length) {
        frameBuf.clear();
        Frame.writeRead(frameBuf, ++nextCorrelation, ptr, remoteKey, length);
        call(Frame.OP_READ, length, length);
        MEMORY.copyMemory(received, BYTE_ARRAY_OFFSET + readPos + Frame.HEADER_LENGTH, address, length);
    }

    void writeFromAddress(long ptr, long remoteKey, long address, int length) {
        startWrite(ptr, remoteKey, length);
        int at = frameBuf.writerIndex();
        MEMORY.copyMemory(address, buffer, BYTE_ARRAY_OFFSET + at, length);
        frameBuf.writerIndex(at + length);
        call(Frame.OP_WRITE, 0, length);
    }

    long readLong(long ptr, long remoteKey) {
        frameBuf.clear();
        Frame.writeRead(frameBuf, ++nextCorrelation, ptr, remoteKey, Long.BYTES);
        call(Frame.OP_READ, Long.BYTES, Long.BYTES);
        return frame.longAt(Frame.HEADER_LENGTH);
    }

    void write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        frameBuf.clear();
        Frame.writeWrite(frameBuf, ++nextCorrelation, ptr, remoteKey, src, offset, length);
        call(Frame.OP_WRITE, 0, length);
    }

    void writeLong(long ptr, long remoteKey, long value) {
        startWrite(ptr, remoteKey, Long.BYTES);
        frameBuf.writeLongLE(value);
        call(Frame.OP_WRITE, 0, Long.BYTES);
    }

    /** A WRITE request's header and fixed body in {@link #frameBuf}; the caller appends the {@code length} bytes. */
    private void startWrite(long ptr, long remoteKey, int length) {
        frameBuf.clear();
        Frame.writeHeader(frameBuf, Frame.OP_WRITE, ++nextCorrelation, Frame.WRITE_FIXED_BODY_LENGTH + length);
        frameBuf.writeLongLE(ptr);
        frameBuf.writeLongLE(remoteKey);
        frameBuf.writeIntLE(length);
    }

    long compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        frameBuf.clear();
        Frame.writeCas(frameBuf, ++nextCorrelation, ptr, remoteKey, expected, update);
        call(Frame.OP_CAS, Long.BYTES, Long.BYTES);
        return frame.longAt(Frame.HEADER_LENGTH);
    }

    long fetchAndAdd(long ptr, long remoteKey, long delta) {
        frameBuf.clear();
        Frame.writeFaa(frameBuf, ++nextCorrelation, ptr, remoteKey, delta);
        call(Frame.OP_FAA, Long.BYTES, Long.BYTES);
        return frame.longAt(Frame.HEADER_LENGTH);
    }

    /**
     * Sends a message request on the lane and reads its reply
     * ({@link io.membus.core.transport.Connection#requestDirect}): the target handles it on
     * its lane thread. A {@code MSG_ERROR} answer is thrown as its typed exception and
     * leaves the lane usable (answered in order); any other failure breaks the lane.
     * The caller checked that the frame fits {@link #MAX_FRAME}.
     */
    byte[] request(short channel, byte[] payload) {
        frameBuf.clear();
        long correlation = ++nextCorrelation;
        Frame.writeMessage(frameBuf, correlation, channel, true, payload);
        long until = OperationDeadline.until(System.nanoTime(), timeoutNanos);
        io(Frame.OP_MSG, until, true);
        io(Frame.OP_MSG, until, false);
        if (frame.correlationId() != correlation) {
            breakLane();
            if (frame.correlationId() == 0 && frame.opcode() == Frame.OP_ERROR) { // the target closed the lane
                throw ErrorFrames.decode(frame, peer);
            }
            throw new ProtocolException(peer.toString(), "correlationId=" + frame.correlationId()
                    + " answers no message of this lane (expected " + correlation + ")");
        }
        return switch (frame.opcode()) {
            case Frame.OP_MSG_REPLY -> frame.messagePayload();
            case Frame.OP_MSG_ERROR -> throw io.membus.core.transport.message.MessageFailures.decode(peer.nodeId(),
                    channel & 0xffff, frame.messageErrorCode(), frame.messageErrorDetail(), frame.messageErrorText());
            default -> {
                breakLane();
                throw new ProtocolException(peer.toString(), "opcode=" + Frame.opName(frame.opcode())
                        + " where a message reply was expected");
            }
        };
    }

    // ------------------------------------------------------------------ for LaneCompounds (lane thread only)

    /** The request buffer, cleared: {@link LaneCompounds} appends several requests to it, sent in one write. */
    ByteBuf requests() {
        frameBuf.clear();
        return frameBuf;
    }

    /** The correlation id of the next request on this lane. */
    long nextCorrelation() {
        return ++nextCorrelation;
    }

    /** The deadline of a call that starts at {@code start}: the operation timeout, or the thread's earlier deadline. */
    long until(long start) {
        return OperationDeadline.until(start, timeoutNanos);
    }

    /** The operation timeout of this lane's transport, in nanoseconds. */
    long timeoutNanos() {
        return timeoutNanos;
    }

    /** The answer {@link #answer} read last (valid until the next read). */
    Frame answerFrame() {
        return frame;
    }

    /** The transport's verb observer, which the compound verbs report to. */
    VerbObserver observer() {
        return transport.observer();
    }

    /** The peer's node id, which verbs are reported under. */
    int peerNode() {
        return peer.nodeId();
    }

    /**
     * Runs the verb whose request is in {@link #frameBuf}: {@link #exchange}, then checks
     * that the answer's body has {@code answerBody} bytes, and reports the outcome to the
     * transport's {@link VerbObserver} ({@code bytes}: the verb's payload).
     */
    private void call(byte opcode, int answerBody, int bytes) {
        long start = System.nanoTime();
        int kind = switch (opcode) {
            case Frame.OP_READ -> VerbObserver.READ;
            case Frame.OP_WRITE -> VerbObserver.WRITE;
            case Frame.OP_CAS -> VerbObserver.CAS;
            default -> VerbObserver.FAA;
        };
        VerbObserver observer = transport.observer();
        try {
            exchange(opcode);
            expectBody(opcode, answerBody);
        } catch (DsmException e) {
            if (e instanceof DsmTimeoutException) {
                observer.timedOut(peer.nodeId(), kind);
            } else {
                observer.failed(peer.nodeId(), kind);
            }
            throw e;
        }
        observer.completed(peer.nodeId(), kind, bytes, System.nanoTime() - start);
    }

    /**
     * Sends the request in {@link #frameBuf} and reads its answer into {@link #frame}.
     * An ERROR answer is thrown as its typed exception (the lane stays usable: the
     * target answered in order); any other failure breaks the lane.
     */
    private void exchange(byte opcode) {
        long d = OperationDeadline.until(System.nanoTime(), timeoutNanos);
        transmit(opcode, d);
        answer(opcode, nextCorrelation, d);
    }

    /** Sends every request in {@link #frameBuf} (one {@code write}); a failure breaks the lane. */
    void transmit(byte opcode, long until) {
        io(opcode, until, true);
    }

    /**
     * Reads the answer of the request {@code correlation} into {@link #frame}, waiting at
     * most until {@code until}. An ERROR answer is thrown as its typed exception and
     * leaves the lane usable; any other failure breaks it.
     */
    void answer(byte opcode, long correlation, long until) {
        io(opcode, until, false);
        checkAnswer(correlation);
    }

    /** The requests appended since {@link #requests()} cleared the buffer (a {@link LaneFlight} appends across calls). */
    ByteBuf pendingRequests() {
        return frameBuf;
    }

    /** Checks the answer in {@link #frame} against the request {@code correlation} (see {@link #answer}). */
    private void checkAnswer(long correlation) {
        if (frame.correlationId() != correlation) {
            if (frame.correlationId() == 0 && frame.opcode() == Frame.OP_ERROR) { // the target closed the lane
                breakLane();
                throw ErrorFrames.decode(frame, peer);
            }
            breakLane();
            throw new ProtocolException(peer.toString(), "correlationId=" + frame.correlationId()
                    + " answers no verb of this lane (expected " + correlation + ")");
        }
        if (frame.opcode() == Frame.OP_ERROR) {
            throw ErrorFrames.decode(frame, peer);
        }
        if (frame.opcode() != Frame.OP_OK) {
            breakLane();
            throw new ProtocolException(peer.toString(), "opcode=" + Frame.opName(frame.opcode())
                    + " where a response was expected");
        }
    }

    /**
     * Sends the requests ({@code sending}) or reads the next answer (skipping message
     * credits), with {@code until} as the reaper's deadline; a failure breaks the lane.
     */
    private void io(byte opcode, long until, boolean sending) {
        deadline = until;
        if (sending) {
            budgetNanos = Math.max(0, Math.min(timeoutNanos, until - System.nanoTime()));
        }
        try {
            if (sending) {
                sendOrBreak(opcode);
            } else {
                nextFrame(opcode);
            }
        } finally {
            deadline = 0;
        }
    }

    private void sendOrBreak(byte opcode) {
        try {
            send();
        } catch (IOException e) {
            throw lost(opcode, e);
        } catch (RuntimeException e) {
            breakLane();
            throw e;
        }
    }

    /** Reads the next frame that is not a message credit into {@link #frame}; a failure breaks the lane. */
    private void nextFrame(byte opcode) {
        try {
            do {
                receive();
            } while (frame.opcode() == Frame.OP_MSG_CREDIT && frame.correlationId() == 0);
        } catch (IOException e) {
            throw lost(opcode, e);
        } catch (RuntimeException e) {
            breakLane();
            throw e;
        }
    }

    /** Marks the lane broken and closes its socket: it is never reused. */
    private void breakLane() {
        broken = true;
        closeQuietly(socket);
    }

    /** The lane lost its socket (or the reaper closed it at the deadline): it is broken. */
    private DsmException lost(byte opcode, IOException e) {
        breakLane();
        if (expired) {
            return new DsmTimeoutException(Frame.opName(opcode), peer.nodeId(), java.time.Duration.ofNanos(budgetNanos));
        }
        return new NodeUnavailableException(peer.nodeId(), "blocking lane to " + peer + " lost: " + e
                + "; the " + Frame.opName(opcode) + " may or may not have run", e);
    }

    /** Checks that the answer has a body of {@code length} bytes; a different one breaks the lane. */
    void expectBody(byte opcode, int length) {
        if (frame.bodyLength() != length) {
            breakLane();
            throw new ProtocolException(peer.toString(), Frame.opName(opcode) + " response bodyLength="
                    + frame.bodyLength() + ", expected=" + length);
        }
    }

    private void send() throws IOException {
        VerbPathCounts.laneWrites.increment();
        out.write(buffer, 0, frameBuf.writerIndex());
    }

    /**
     * Reads the next whole frame and wraps it in {@link #frame}: one {@code read} call
     * when the frame arrived at once (what arrives after it stays for the next call).
     */
    private void receive() throws IOException {
        readPos = frameEnd;
        if (readPos == readLimit) {
            readPos = readLimit = 0;
        } else if (readPos > 0 && readLimit - readPos < Frame.HEADER_LENGTH) { // keep the rest at the start
            compact();
        }
        fill(Frame.HEADER_LENGTH);
        int lengthField = receivedBuf.getIntLE(readPos + Frame.LENGTH_FIELD_OFFSET);
        int total = lengthField + 4;
        if (lengthField < Frame.MIN_LENGTH_FIELD || total > MAX_FRAME) {
            throw new ProtocolException(peer.toString(), "frame length=" + total + " outside "
                    + Frame.HEADER_LENGTH + ".." + MAX_FRAME + " on a blocking lane");
        }
        if (readPos + total > received.length) {
            compact();
        }
        fill(total);
        frameEnd = readPos + total;
        frame.wrap(receivedBuf, readPos);
        String invalid = frame.validate();
        if (invalid != null) {
            throw new ProtocolException(peer.toString(), invalid);
        }
    }

    /** Moves the unread bytes to the start of the buffer. */
    private void compact() {
        System.arraycopy(received, readPos, received, 0, readLimit - readPos);
        readLimit -= readPos;
        readPos = 0;
    }

    /** Reads until at least {@code length} bytes from {@link #readPos} are buffered. */
    private void fill(int length) throws IOException {
        while (readLimit - readPos < length) {
            int n = in.read(received, readLimit, received.length - readLimit);
            if (n < 0) {
                throw new EOFException("the peer closed the connection");
            }
            readLimit += n;
        }
    }

    /** Whether the lane must not be reused (it timed out or lost its socket). */
    boolean broken() {
        return broken;
    }

    /** Closes the socket when the current wait outlived its deadline (the reaper's thread). */
    void expireIfDue(long now) {
        long d = deadline;
        if (d != 0 && now - d > 0) {
            expired = true; // before the close: the woken caller reads it
            breakLane();
        }
    }

    @Override
    public void close() {
        breakLane();
        LaneReaper.forget(this);
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closing: nothing left to do
        }
    }
}
