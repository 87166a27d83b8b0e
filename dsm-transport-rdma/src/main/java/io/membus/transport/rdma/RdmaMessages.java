package io.membus.transport.rdma;

import io.membus.core.Backoff;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.MessageTooLargeException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.message.Inbox;
import io.membus.core.message.MessageEndpoint;
import io.membus.core.message.MessageFailures;
import io.membus.core.message.Outbox;
import io.membus.core.message.Responder;
import net.openhft.chronicle.core.UnsafeMemory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Two-sided messages over {@code rdma}: SEND work requests into receive buffers
 * the peer posted, on both ends of a connection's RC queue pair ({@link MessagePort}).
 *
 * <pre>
 * One record in a send or receive buffer (host byte order):
 *   0      1      2        4               8                               16
 *   +------+------+--------+---------------+-------------------------------+------ ... --+
 *   | kind |flags|channel | reserved      |          correlation          |    body      |
 *   |  u8  |  u8  |  u16   |     u32       |              u64              |              |
 *   +------+------+--------+---------------+-------------------------------+------ ... --+
 *   MESSAGE (1), REQUEST (2): body = payload         REPLY (3): body = reply
 *   ERROR (4): code u32 | reserved u32 | detail u64 | text UTF-8
 *   HELLO (5), initiator -> target, first:  maxReply u32 (the initiator's receive buffers)
 *   CREDIT (6), target -> initiator, the answer to HELLO: credits u32 | maxMessageSize u32
 * </pre>
 *
 * <p><b>Credits.</b> Each end posts all its receive buffers at once and reposts one as
 * soon as its record is copied out. The target grants {@code min(membus.transports.messages.inbox,
 * slots - 1)} credits (one buffer stays for the HELLO); an initiator with fewer
 * receive buffers than that takes only as many. Every message is answered, so the
 * initiator never has more unanswered messages than the target has buffers posted,
 * and the target never more answers in flight than the initiator has posted.
 *
 * <p><b>Note:</b> thread-safe. Records are posted under each end's lock; receive
 * completions are handled on the transport's completion thread.
 */
final class RdmaMessages {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaMessages.class);
    /** How an answer waits for a free send slot: parks from 1 µs doubling to 1 ms, by a deadline. */
    private static final Backoff.Policy ANSWER_WAIT = new Backoff.Policy(0, 0, 1_000, TimeUnit.MILLISECONDS.toNanos(1));
    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;

    static final int KIND_MESSAGE = 1;
    static final int KIND_REQUEST = 2;
    static final int KIND_REPLY = 3;
    static final int KIND_ERROR = 4;
    static final int KIND_HELLO = 5;
    static final int KIND_CREDIT = 6;
    static final int KIND_OFFSET = 0;
    static final int CHANNEL_OFFSET = 2;
    static final int CORRELATION_OFFSET = 8;
    static final int HEADER = 16;
    static final int ERROR_CODE_OFFSET = HEADER;
    static final int ERROR_DETAIL_OFFSET = HEADER + 8;
    static final int ERROR_TEXT_OFFSET = HEADER + 16;
    static final int MAX_ERROR_TEXT = 1024;

    private final int nodeId;
    private final MessageEndpoint endpoint;
    private final Duration timeout;
    private final int slots;
    private final int slotBytes;
    /** Every end the completion thread polls: copy-on-write. */
    private volatile End[] ends = new End[0];

    RdmaMessages(int nodeId, MessageEndpoint endpoint, Duration timeout) {
        this.nodeId = nodeId;
        this.endpoint = endpoint;
        this.timeout = timeout;
        this.slots = endpoint.inboxCapacity() + 1;
        this.slotBytes = Math.max(HEADER + 8, Math.max(ERROR_TEXT_OFFSET + MAX_ERROR_TEXT,
                HEADER + endpoint.maxMessageSize()));
    }

    /** The message end of a new initiator connection, or the typed reason it has none (hardware, for now). */
    Initiator initiator(int peerNode, Fabric.MessageCapable pair, Consumer<String> onBroken) {
        Initiator end = new Initiator(peerNode, pair.messages(slots, slotBytes), onBroken);
        add(end);
        try {
            end.start();
        } catch (RuntimeException e) {
            end.close("cannot start messages: " + e.getMessage());
            throw e;
        }
        return end;
    }

    /** A target-side queue pair was accepted: its receive buffers are posted before the initiator can send. */
    void accepted(int peerNode, Fabric.MessageCapable pair) {
        MessagePort port;
        try {
            port = pair.messages(slots, slotBytes);
        } catch (DsmException e) {
            LOG.debug("accepted queue pair of node {} carries no messages: {}", peerNode, e.getMessage());
            return;
        }
        Passive end = new Passive(peerNode, port);
        add(end);
        try {
            end.start();
        } catch (RuntimeException e) {
            end.close("cannot post receive buffers: " + e.getMessage());
        }
    }

    private synchronized void add(End end) {
        End[] next = java.util.Arrays.copyOf(ends, ends.length + 1);
        next[ends.length] = end;
        ends = next;
    }

    private synchronized void remove(End end) {
        ends = java.util.Arrays.stream(ends).filter(e -> e != end).toArray(End[]::new);
    }

    /** Polls every end once (completion thread); returns completions found. */
    int poll() {
        int found = 0;
        for (End e : ends) {
            found += e.poll();
        }
        return found;
    }

    /** Closes and destroys every end; after the completion thread stopped (transport close). */
    void close() {
        for (End e : ends) {
            e.close("node " + nodeId + " is shutting down");
            e.destroy();
        }
    }

    // ------------------------------------------------------------------ one end

    /** What both ends share: the port, free send slots, posting, receiving. */
    private abstract class End implements MessagePort.Completions {
        final int peerNode;
        final MessagePort port;
        private final SendWrFlyweight send = new SendWrFlyweight();
        private final RecvWrFlyweight recv = new RecvWrFlyweight();
        private final ArrayDeque<Integer> freeSend = new ArrayDeque<>(); // guarded by this
        volatile String closed;

        End(int peerNode, MessagePort port) {
            this.peerNode = peerNode;
            this.port = port;
            for (int i = 0; i < port.slots(); i++) {
                freeSend.add(i);
            }
        }

        /** Posts every receive buffer. */
        synchronized void postReceives() {
            for (int i = 0; i < port.slots(); i++) {
                repost(i);
            }
        }

        private void repost(int slot) {
            recv.wrap(port.recvWrAddress(slot)).receive(slot, port.recvBufferAddress(slot), port.slotBytes(),
                    port.localKey());
            try {
                port.postRecv(slot);
            } catch (IOException e) {
                throw new NodeUnavailableException(peerNode, "cannot post a receive buffer: " + e.getMessage(), e);
            }
        }

        /**
         * Writes one record into a free send slot and posts it.
         *
         * @return false when every send slot waits for its completion (retried by the caller)
         */
        synchronized boolean post(int kind, short channel, long correlation, byte[] body, int bodyLength,
                                  ErrorCode code, long detail) {
            if (closed != null) {
                throw new NodeUnavailableException(peerNode, closed);
            }
            Integer slot = freeSend.poll();
            if (slot == null) {
                return false;
            }
            long b = port.sendBufferAddress(slot);
            MEMORY.writeByte(b + KIND_OFFSET, (byte) kind);
            MEMORY.writeByte(b + 1, (byte) 0);
            MEMORY.writeShort(b + CHANNEL_OFFSET, channel);
            MEMORY.writeInt(b + 4, 0);
            MEMORY.writeLong(b + CORRELATION_OFFSET, correlation);
            int length;
            if (code != null) {
                MEMORY.writeInt(b + ERROR_CODE_OFFSET, code.wire());
                MEMORY.writeInt(b + ERROR_CODE_OFFSET + 4, 0);
                MEMORY.writeLong(b + ERROR_DETAIL_OFFSET, detail);
                copyIn(body, b + ERROR_TEXT_OFFSET, bodyLength);
                length = ERROR_TEXT_OFFSET + bodyLength;
            } else {
                copyIn(body, b + HEADER, bodyLength);
                length = HEADER + bodyLength;
            }
            send.wrap(port.sendWrAddress(slot)).send(slot, b, length, port.localKey());
            try {
                port.postSend(slot);
            } catch (IOException e) {
                freeSend.add(slot);
                throw new NodeUnavailableException(peerNode, "cannot post a SEND: " + e.getMessage(), e);
            }
            return true;
        }

        /**
         * Polls this end (completion thread). A closed end is destroyed here, on the one
         * thread that reads its receive buffers, and under its lock, so no post is
         * writing into the memory it frees.
         */
        int poll() {
            if (closed != null) {
                destroy();
                return 0;
            }
            try {
                return port.poll(this);
            } catch (IOException | RuntimeException e) {
                close("the queue pair is gone: " + e.getMessage());
                destroy();
                return 0;
            }
        }

        private void destroy() {
            synchronized (this) {
                port.close();
            }
            remove(this);
        }

        @Override
        public void sent(long wrId, int status) {
            synchronized (this) {
                freeSend.add((int) wrId);
            }
            if (status != WcStatus.SUCCESS) {
                close("a SEND completed with " + WcStatus.name(status) + "; messages in flight may or may not have"
                        + " been handled");
            }
        }

        @Override
        public void received(long wrId, int status, int byteLength) {
            if (status != WcStatus.SUCCESS) {
                if (status != WcStatus.WR_FLUSH_ERR) {
                    close("a receive completed with " + WcStatus.name(status));
                }
                return;
            }
            int slot = (int) wrId;
            long b = port.recvBufferAddress(slot);
            int kind = MEMORY.readByte(b + KIND_OFFSET) & 0xff; // unsigned, as it is printed
            short channel = MEMORY.readShort(b + CHANNEL_OFFSET);
            long correlation = MEMORY.readLong(b + CORRELATION_OFFSET);
            byte[] body = null;
            ErrorCode code = null;
            long detail = 0;
            int n = byteLength - HEADER;
            if (n < 0) {
                close("a record of " + byteLength + " bytes is shorter than its header");
                return;
            }
            if (kind == KIND_ERROR) {
                code = ErrorCode.fromWire(MEMORY.readInt(b + ERROR_CODE_OFFSET));
                detail = MEMORY.readLong(b + ERROR_DETAIL_OFFSET);
                body = copyOut(b + ERROR_TEXT_OFFSET, Math.max(0, byteLength - ERROR_TEXT_OFFSET));
            } else {
                body = copyOut(b + HEADER, n);
            }
            synchronized (this) {
                if (closed == null) {
                    repost(slot); // the record is copied out: the buffer takes the next SEND
                }
            }
            onRecord(kind, channel, correlation, body, code, detail);
        }

        abstract void onRecord(int kind, short channel, long correlation, byte[] body, ErrorCode code, long detail);

        /** Closes this end: nothing is posted any more; the completion thread destroys its port. */
        void close(String reason) {
            synchronized (this) {
                if (closed != null) {
                    return;
                }
                closed = reason;
            }
            closed(reason);
        }

        abstract void closed(String reason);
    }

    private static final long BYTE_ARRAY_OFFSET = UnsafeMemory.UNSAFE.arrayBaseOffset(byte[].class);

    private static void copyIn(byte[] src, long address, int length) {
        if (length > 0) {
            MEMORY.copyMemory(src, 0, address, length);
        }
    }

    private static byte[] copyOut(long address, int length) {
        byte[] b = new byte[length];
        if (length > 0) {
            MEMORY.copyMemory(address, b, BYTE_ARRAY_OFFSET, length);
        }
        return b;
    }

    // ------------------------------------------------------------------ initiator

    /** The initiator's end: the connection's {@link Outbox} transmits through it. */
    final class Initiator extends End {
        final Outbox outbox;
        private final Consumer<String> onBroken;

        Initiator(int peerNode, MessagePort port, Consumer<String> onBroken) {
            super(peerNode, port);
            this.onBroken = onBroken;
            this.outbox = new Outbox(peerNode, timeout, endpoint, (correlation, channel, request, payload) ->
                    post(request ? KIND_REQUEST : KIND_MESSAGE, channel, correlation, payload, payload.length, null, 0));
        }

        void start() {
            postReceives();
            byte[] hello = new byte[4];
            int maxReply = port.slotBytes() - HEADER;
            hello[0] = (byte) maxReply;
            hello[1] = (byte) (maxReply >>> 8);
            hello[2] = (byte) (maxReply >>> 16);
            hello[3] = (byte) (maxReply >>> 24);
            if (!post(KIND_HELLO, (short) 0, 0, hello, 4, null, 0)) {
                throw new IllegalStateException("no send slot for the HELLO of a new connection");
            }
        }

        @Override
        void onRecord(int kind, short channel, long correlation, byte[] body, ErrorCode code, long detail) {
            switch (kind) {
                case KIND_CREDIT -> outbox.grant(Math.min(intAt(body, 0), port.slots() - 1), intAt(body, 4));
                case KIND_REPLY -> outbox.replied(correlation, body);
                case KIND_ERROR -> outbox.failed(correlation, code, detail, new String(body, StandardCharsets.UTF_8));
                default -> close(new ProtocolException("node " + peerNode, "record kind=" + kind
                        + " where an answer was expected").getMessage());
            }
        }

        @Override
        void closed(String reason) {
            outbox.close(new NodeUnavailableException(peerNode, reason));
            onBroken.accept(reason);
        }
    }

    private static int intAt(byte[] b, int at) {
        return (b[at] & 0xff) | (b[at + 1] & 0xff) << 8 | (b[at + 2] & 0xff) << 16 | (b[at + 3] & 0xff) << 24;
    }

    // ------------------------------------------------------------------ target

    /** The target's end of one accepted queue pair: the inbox of its initiator's messages. */
    private final class Passive extends End implements Responder {
        private final Inbox inbox;
        private volatile int maxReply;

        Passive(int peerNode, MessagePort port) {
            super(peerNode, port);
            this.inbox = endpoint.open(peerNode, this);
        }

        void start() {
            postReceives();
        }

        @Override
        void onRecord(int kind, short channel, long correlation, byte[] body, ErrorCode code, long detail) {
            switch (kind) {
                case KIND_HELLO -> {
                    maxReply = intAt(body, 0);
                    int credits = Math.min(endpoint.inboxCapacity(), port.slots() - 1);
                    int max = Math.min(endpoint.maxMessageSize(), port.slotBytes() - HEADER);
                    byte[] grant = new byte[8];
                    for (int i = 0; i < 4; i++) {
                        grant[i] = (byte) (credits >>> (8 * i));
                        grant[4 + i] = (byte) (max >>> (8 * i));
                    }
                    answer(() -> post(KIND_CREDIT, (short) 0, 0, grant, 8, null, 0), 0);
                }
                case KIND_MESSAGE, KIND_REQUEST -> {
                    if (!inbox.deliver(correlation, channel, kind == KIND_REQUEST, body)) {
                        fail(correlation, inbox.isClosed() ? new NodeUnavailableException(nodeId, "node " + nodeId
                                + " is shutting down") : new ProtocolException("node " + peerNode,
                                "message beyond the granted credits: correlationId=" + correlation));
                    }
                }
                default -> close(new ProtocolException("node " + peerNode, "record kind=" + kind
                        + " where a message was expected").getMessage());
            }
        }

        @Override
        public void reply(long correlation, byte[] reply) {
            if (reply.length > maxReply) {
                fail(correlation, new MessageTooLargeException(peerNode, 0, reply.length, maxReply));
                return;
            }
            answer(() -> post(KIND_REPLY, (short) 0, correlation, reply, reply.length, null, 0), correlation);
        }

        @Override
        public void fail(long correlation, DsmException failure) {
            byte[] text = MessageFailures.text(failure).getBytes(StandardCharsets.UTF_8);
            int n = Math.min(text.length, MAX_ERROR_TEXT);
            answer(() -> post(KIND_ERROR, (short) 0, correlation, text, n, failure.code(),
                    MessageFailures.detail(failure)), correlation);
        }

        /** Posts an answer, waiting (bounded) for a send slot whose SEND has not completed yet. */
        private void answer(java.util.function.BooleanSupplier attempt, long correlation) {
            Backoff backoff = null; // made only when no send slot is free
            try {
                while (!attempt.getAsBoolean()) {
                    if (backoff == null) {
                        backoff = new Backoff(ANSWER_WAIT, Backoff.deadlineIn(timeout.toNanos()));
                    }
                    if (closed != null || !backoff.pause()) {
                        LOG.warn("answer to message {} of node {} dropped: no send slot came free", correlation,
                                peerNode);
                        return;
                    }
                }
            } catch (DsmException e) {
                LOG.debug("answer to message {} of node {} not sent: {}", correlation, peerNode, e.getMessage());
            }
        }

        @Override
        void closed(String reason) {
            endpoint.close(inbox, reason, false);
        }
    }
}
