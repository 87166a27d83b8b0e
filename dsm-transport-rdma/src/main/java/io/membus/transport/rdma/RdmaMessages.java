package io.membus.transport.rdma;

import io.membus.core.Backoff;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.MessageTooLargeException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.transport.message.Inbox;
import io.membus.core.transport.message.MessageEndpoint;
import io.membus.core.transport.message.MessageFailures;
import io.membus.core.transport.message.MessageRecord;
import io.membus.core.transport.message.Outbox;
import io.membus.core.transport.message.Responder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Two-sided messages over {@code rdma}: SEND work requests into receive buffers
 * the peer posted, on both ends of a connection's RC queue pair ({@link MessagePort}).
 *
 * <p><b>Records.</b> One SEND carries one {@link MessageRecord} (dsm-core's layout, little-endian),
 * nothing around it: MESSAGE, REQUEST, REPLY, ERROR, and CREDIT, the target's answer to the
 * initiator's first record. That first record is rdma's own, of kind
 * {@link MessageRecord#KIND_TRANSPORT_OPENING}:
 * <pre>
 *   HELLO (5), initiator -> target, first: a MessageRecord header, then maxReply int32
 *              (the size of the initiator's receive buffers less the header: the largest reply it takes)
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

    /** rdma's opening record: the initiator's largest reply, an int32 after the record header. */
    static final int KIND_HELLO = MessageRecord.KIND_TRANSPORT_OPENING;
    static final int HELLO_MAX_REPLY_OFFSET = MessageRecord.BODY_OFFSET;
    static final int HELLO_LENGTH = MessageRecord.HEADER_LENGTH + 4;
    private static final int HEADER = MessageRecord.HEADER_LENGTH;

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
        this.slotBytes = Math.max(MessageRecord.CREDIT_LENGTH, Math.max(MessageRecord.MAX_ERROR_LENGTH,
                MessageRecord.length(endpoint.maxMessageSize())));
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
         * Writes one record into a free send slot ({@code record} writes it at the slot's
         * address and returns its length) and posts it.
         *
         * @return false when every send slot waits for its completion (retried by the caller)
         */
        synchronized boolean post(java.util.function.LongToIntFunction record) {
            if (closed != null) {
                throw new NodeUnavailableException(peerNode, closed);
            }
            Integer slot = freeSend.poll();
            if (slot == null) {
                return false;
            }
            long b = port.sendBufferAddress(slot);
            int length = record.applyAsInt(b);
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
            Deferred record = new Deferred();
            MessageRecord.decode(port.recvBufferAddress(slot), byteLength, record); // copies the record out
            synchronized (this) {
                if (closed == null) {
                    repost(slot); // the record is copied out: the buffer takes the next SEND
                }
            }
            record.deliver(this);
        }

        /** A record the other end may not send here: closes this end. */
        void unexpected(int kind, String expected) {
            close(new ProtocolException("node " + peerNode, "record kind=" + kind + " where " + expected
                    + " was expected").getMessage());
        }

        void onMessage(long correlation, short channel, boolean request, byte[] payload) {
            unexpected(MessageRecord.messageKind(request), "an answer");
        }

        void onReply(long correlation, byte[] reply) {
            unexpected(MessageRecord.KIND_REPLY, "a message");
        }

        void onError(long correlation, ErrorCode code, long detail, String text) {
            unexpected(MessageRecord.KIND_ERROR, "a message");
        }

        void onCredit(int credits, int maxMessageSize) {
            unexpected(MessageRecord.KIND_CREDIT, "a message");
        }

        void onHello(int maxReply) {
            unexpected(KIND_HELLO, "an answer");
        }

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

    /**
     * One record decoded out of a receive buffer, held until the buffer is reposted and then
     * handed to its end (completion thread): the peer may SEND into the buffer again as soon as
     * the record's answer or grant is out.
     */
    private static final class Deferred implements MessageRecord.Receiver {
        private Consumer<End> call;

        void deliver(End end) {
            call.accept(end);
        }

        @Override
        public void message(long correlation, short channel, boolean request, byte[] payload) {
            call = e -> e.onMessage(correlation, channel, request, payload);
        }

        @Override
        public void reply(long correlation, byte[] reply) {
            call = e -> e.onReply(correlation, reply);
        }

        @Override
        public void error(long correlation, ErrorCode code, long detail, String text) {
            call = e -> e.onError(correlation, code, detail, text);
        }

        @Override
        public void credit(int credits, int maxMessageSize) {
            call = e -> e.onCredit(credits, maxMessageSize);
        }

        @Override
        public void other(int kind, long address, int length, String problem) {
            if (problem == null && kind == KIND_HELLO && length >= HELLO_LENGTH) {
                int maxReply = MessageRecord.intAt(address, HELLO_MAX_REPLY_OFFSET);
                call = e -> e.onHello(maxReply);
            } else if (problem == null) {
                call = e -> e.unexpected(kind, "a record of dsm-core's MessageRecord or HELLO");
            } else {
                call = e -> e.close(problem);
            }
        }
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
                    post(b -> MessageRecord.writeMessage(b, correlation, channel, request, payload)));
        }

        void start() {
            postReceives();
            int maxReply = port.slotBytes() - HEADER;
            if (!post(b -> {
                MessageRecord.writeHeader(b, KIND_HELLO, (short) 0, 0);
                MessageRecord.writeInt(b, HELLO_MAX_REPLY_OFFSET, maxReply);
                return HELLO_LENGTH;
            })) {
                throw new IllegalStateException("no send slot for the HELLO of a new connection");
            }
        }

        @Override
        void onCredit(int credits, int maxMessageSize) {
            outbox.grant(Math.min(credits, port.slots() - 1), maxMessageSize);
        }

        @Override
        void onReply(long correlation, byte[] reply) {
            outbox.replied(correlation, reply);
        }

        @Override
        void onError(long correlation, ErrorCode code, long detail, String text) {
            outbox.failed(correlation, code, detail, text);
        }

        @Override
        void closed(String reason) {
            outbox.close(new NodeUnavailableException(peerNode, reason));
            onBroken.accept(reason);
        }
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
        void onHello(int maxReply) {
            this.maxReply = maxReply;
            int credits = Math.min(endpoint.inboxCapacity(), port.slots() - 1);
            int max = Math.min(endpoint.maxMessageSize(), port.slotBytes() - HEADER);
            answer(() -> post(b -> MessageRecord.writeCredit(b, credits, max)), 0);
        }

        @Override
        void onMessage(long correlation, short channel, boolean request, byte[] payload) {
            if (!inbox.deliver(correlation, channel, request, payload)) {
                fail(correlation, inbox.isClosed() ? new NodeUnavailableException(nodeId, "node " + nodeId
                        + " is shutting down") : new ProtocolException("node " + peerNode,
                        "message beyond the granted credits: correlationId=" + correlation));
            }
        }

        @Override
        public void reply(long correlation, byte[] reply) {
            if (reply.length > maxReply) {
                fail(correlation, new MessageTooLargeException(peerNode, 0, reply.length, maxReply));
                return;
            }
            answer(() -> post(b -> MessageRecord.writeReply(b, correlation, reply)), correlation);
        }

        @Override
        public void fail(long correlation, DsmException failure) {
            byte[] text = MessageRecord.errorText(failure);
            long detail = MessageFailures.detail(failure);
            answer(() -> post(b -> MessageRecord.writeError(b, correlation, failure.code(), detail, text)),
                    correlation);
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
