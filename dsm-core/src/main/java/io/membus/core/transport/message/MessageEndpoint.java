package io.membus.core.transport.message;

import io.membus.core.error.DsmException;
import io.membus.core.error.HandlerFailedException;
import io.membus.core.error.MessageTooLargeException;
import io.membus.core.error.NodeFencedException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.UnknownChannelException;
import io.membus.core.message.ChannelStats;
import io.membus.core.message.InlineMessageHandler;
import io.membus.core.message.MessageHandler;
import io.membus.core.transport.TransportConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.IntFunction;

/**
 * The message side of one node's transport: the handlers registered per
 * channel, the executor they run on (owned here, never an I/O thread), one
 * bounded {@link Inbox} per sender connection, the limits, and the counters per
 * channel. Every transport owns one and feeds it what arrives; the transport
 * only carries bytes and answers.
 *
 * <p>Settings ({@code membus.transports.messages}, dsm-core's reference.conf; the same on every node):
 * {@code membus.transports.messages.max-size} (default 65536 bytes; 0..16 MiB): the largest payload
 * of a message or a reply; {@code membus.transports.messages.inbox} (default 64): messages one
 * sender may have in this node's inbox at once — its credits;
 * {@code membus.transports.messages.handler-threads} (default 2): threads running handlers.
 * Memory for waiting messages is bounded by senders × inbox × max-size.
 *
 * <p><b>Note:</b> thread-safe. A handler registered before a message arrives is
 * seen by it (the registry is a concurrent map).
 */
public final class MessageEndpoint implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(MessageEndpoint.class);
    public static final int DEFAULT_MAX_SIZE = 64 * 1024;
    public static final int LIMIT_MAX_SIZE = 16 * 1024 * 1024;
    public static final int DEFAULT_INBOX = 64;
    private static final byte[] EMPTY = new byte[0];

    private final int nodeId;
    private final int maxSize;
    private final int inboxCapacity;
    private final IntFunction<String> fenceReason;
    private final Map<Integer, Registration> handlers = new ConcurrentHashMap<>();
    private final Map<Integer, Counters> counters = new ConcurrentHashMap<>();
    private final Set<Inbox> inboxes = ConcurrentHashMap.newKeySet();
    private final LongAdder directHandled = new LongAdder();
    private final ThreadPoolExecutor executor;
    private volatile boolean closed;

    /**
     * @param fenceReason why a node is fenced by this node, or {@code null} when it is not: messages of a
     *                    fenced sender are answered with {@link NodeUnavailableException} and never handled
     */
    public MessageEndpoint(TransportConfig config, IntFunction<String> fenceReason) {
        this.nodeId = config.nodeId();
        this.maxSize = (int) config.getBytes("messages.max-size", 0, LIMIT_MAX_SIZE);
        this.inboxCapacity = config.getInt("messages.inbox", 1, 1 << 16);
        int threads = config.getInt("messages.handler-threads", 1, 256);
        this.fenceReason = fenceReason;
        AtomicInteger n = new AtomicInteger();
        // threads start with the first message and stay; the queue holds at most one task per inbox
        this.executor = new ThreadPoolExecutor(threads, threads, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
                r -> {
                    Thread t = new Thread(r, "membus-msg-" + config.nodeId() + "-" + n.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                });
        executor.allowCoreThreadTimeOut(true);
    }

    public int nodeId() {
        return nodeId;
    }

    /** The largest payload this node takes in a message or a reply. */
    public int maxMessageSize() {
        return maxSize;
    }

    /** The credits of each sender: messages it may have in this node's inbox at once. */
    public int inboxCapacity() {
        return inboxCapacity;
    }

    /**
     * Registers the handler of {@code channel}.
     *
     * @param name for errors, logs and {@link #stats()}
     * @throws IllegalStateException when the channel has a handler already
     */
    public void register(short channel, String name, MessageHandler handler) {
        if (name == null || name.isBlank() || handler == null) {
            throw new IllegalArgumentException("a channel needs a name and a handler: channel=" + channel);
        }
        Registration r = new Registration(channel, name, handler);
        Registration old = handlers.putIfAbsent(key(channel), r);
        if (old != null) {
            throw new IllegalStateException("channel taken: node=" + nodeId + ", channel=" + channel + ", name="
                    + old.name + "; unregister it first or choose another channel id");
        }
        counters(channel).name = name;
    }

    /** Removes the handler of {@code channel}; later messages on it are answered with {@link UnknownChannelException}. */
    public boolean unregister(short channel) {
        return handlers.remove(key(channel)) != null;
    }

    /** The handler registered for {@code channel}, or {@code null} when it has none. */
    public MessageHandler handler(short channel) {
        Registration r = handlers.get(key(channel));
        return r != null ? r.handler : null;
    }

    /** The name registered for {@code channel}, or {@code channel-<id>}. */
    public String channelName(short channel) {
        Registration r = handlers.get(key(channel));
        return r != null ? r.name : "channel-" + key(channel);
    }

    /**
     * Opens the inbox of one sender connection; the transport feeds it with
     * {@link Inbox#deliver} and closes it when the connection goes.
     *
     * @throws NodeUnavailableException when this endpoint is closed
     */
    public Inbox open(int fromNode, Responder responder) {
        return open(fromNode, responder, false);
    }

    /**
     * Opens the inbox of one sender connection, as {@link #open(int, Responder)}; with
     * {@code inline}, messages of an {@link InlineMessageHandler} that it accepts are handled
     * on the thread that delivers them (when the inbox is idle), and their answers go to
     * {@code responder} on that thread. Only a transport whose delivering thread may run a
     * short handler (an I/O thread that serves many connections, not the sender's own
     * thread) passes {@code true}.
     *
     * @throws NodeUnavailableException when this endpoint is closed
     */
    public Inbox open(int fromNode, Responder responder, boolean inline) {
        Inbox inbox = new Inbox(this, fromNode, responder, inline);
        inboxes.add(inbox);
        if (closed) {
            inboxes.remove(inbox);
            throw new NodeUnavailableException(nodeId, "node " + nodeId + " is shutting down");
        }
        return inbox;
    }

    /** Closes an inbox and forgets it (see {@link Inbox#close}). */
    public void close(Inbox inbox, String reason, boolean answer) {
        inbox.close(reason, answer);
        inboxes.remove(inbox);
    }

    void schedule(Inbox inbox) {
        try {
            executor.execute(inbox);
        } catch (RejectedExecutionException e) {
            inbox.close("node " + nodeId + " is shutting down", true);
        }
    }

    /** Whether {@code channel}'s handler takes this message on the delivering thread ({@link InlineMessageHandler}). */
    boolean inline(int from, short channel, byte[] payload) {
        Registration r = handlers.get(key(channel));
        if (r == null || !(r.handler instanceof InlineMessageHandler h) || closed) {
            return false;
        }
        try {
            return h.inline(from, payload);
        } catch (RuntimeException e) {
            return false; // the executor runs it, and answers its failure there
        }
    }

    /**
     * Handles a request on the calling thread, outside any inbox (a transport's blocking
     * socket, {@link io.membus.core.transport.Connection#requestDirect}): the same checks
     * as a message from an inbox (closed, fenced sender, channel, size), then the handler,
     * which must be an {@link InlineMessageHandler} that accepts the payload.
     *
     * @return the reply (empty for {@code null})
     * @throws DsmException the typed failure the sender gets: {@link NodeUnavailableException},
     *         {@link NodeFencedException}, {@link UnknownChannelException},
     *         {@link MessageTooLargeException}, or {@link HandlerFailedException} (the handler
     *         threw, or does not take this message on the calling thread)
     */
    public byte[] handleDirect(int from, short channel, byte[] payload) {
        Counters c = counted(channel, payload.length);
        Registration r = handlers.get(key(channel));
        DsmException refused = refusal(from, channel, r, payload.length, c);
        if (refused != null) {
            throw refused;
        }
        if (!inline(from, channel, payload)) {
            c.errors.increment();
            throw new HandlerFailedException(nodeId, key(channel), "this message is not handled outside the"
                    + " sender's message order (not an inline message of channel " + r.name + "); send it as a"
                    + " request");
        }
        byte[] reply = run(r, from, channel, payload, c);
        if (reply == null) {
            reply = EMPTY;
        }
        if (reply.length > maxSize) {
            c.errors.increment();
            throw new MessageTooLargeException(nodeId, key(channel), reply.length, maxSize);
        }
        directHandled.increment();
        return reply;
    }

    /** Requests {@link #handleDirect handled directly} and answered with a reply, since start (tests, status). */
    public long directHandled() {
        return directHandled.sum();
    }

    /** Counts a message this node sent outside an {@link Outbox} ({@link io.membus.core.transport.Connection#requestDirect}). */
    public void countDirectOut(short channel, int bytes, boolean failed) {
        countOut(channel, bytes);
        if (failed) {
            countError(channel);
        }
    }

    /** Runs one message: the checks, then the handler; answers it exactly once. */
    void handle(int from, long correlation, short channel, boolean request, byte[] payload, Inbox inbox) {
        Counters c = counted(channel, payload.length);
        Registration r = handlers.get(key(channel));
        DsmException refused = refusal(from, channel, r, payload.length, c);
        if (refused != null) {
            inbox.fail(correlation, refused);
            return;
        }
        byte[] reply;
        try {
            reply = run(r, from, channel, payload, c);
        } catch (HandlerFailedException e) { // answered, and never kills the connection
            inbox.fail(correlation, e);
            return;
        }
        if (!request || reply == null) {
            reply = EMPTY;
        }
        if (reply.length > maxSize) {
            c.errors.increment();
            inbox.fail(correlation, new MessageTooLargeException(nodeId, key(channel), reply.length, maxSize));
            return;
        }
        inbox.reply(correlation, reply);
    }

    /** The channel's counters, with one more message of {@code length} bytes in. */
    private Counters counted(short channel, int length) {
        Counters c = counters(channel);
        c.in.increment();
        c.bytesIn.add(length);
        return c;
    }

    /**
     * Why a message is refused before its handler runs (this node closing, a fenced sender, no
     * handler on the channel, a payload over the limit), counted as an error; {@code null} if
     * it is taken. One rule for both ways a message arrives ({@link #handle}, {@link #handleDirect}).
     */
    private DsmException refusal(int from, short channel, Registration r, int length, Counters c) {
        DsmException refused = null;
        String fenced = fenceReason.apply(from);
        if (closed) {
            refused = new NodeUnavailableException(nodeId, "node " + nodeId + " is shutting down");
        } else if (fenced != null) {
            refused = NodeFencedException.unknownOutcome(nodeId, "node " + nodeId + " fenced node " + from + ": "
                    + fenced);
        } else if (r == null) {
            refused = new UnknownChannelException(nodeId, key(channel));
        } else if (length > maxSize) {
            refused = new MessageTooLargeException(nodeId, key(channel), length, maxSize);
        }
        if (refused != null) {
            c.errors.increment();
        }
        return refused;
    }

    /**
     * Runs the handler; whatever it throws is logged, counted and turned into the typed
     * {@link HandlerFailedException} the sender gets (an interrupt is kept on the thread).
     */
    private byte[] run(Registration r, int from, short channel, byte[] payload, Counters c) {
        try {
            return r.handler.onMessage(from, payload);
        } catch (Throwable t) {
            if (t instanceof InterruptedException || Thread.interrupted()) {
                Thread.currentThread().interrupt();
            }
            c.errors.increment();
            LOG.warn("message handler failed: node={}, channel={}, name={}, from={}", nodeId, key(channel), r.name,
                    from, t);
            throw new HandlerFailedException(nodeId, key(channel), t.toString());
        }
    }

    /** Counts a message this node sent (called by its {@link Outbox}es). */
    void countOut(short channel, int bytes) {
        Counters c = counters(channel);
        c.out.increment();
        c.bytesOut.add(bytes);
    }

    /** Counts a sent message that failed. */
    void countError(short channel) {
        counters(channel).errors.increment();
    }

    private Counters counters(short channel) {
        return counters.computeIfAbsent(key(channel), k -> new Counters("channel-" + k));
    }

    /** The counters of every channel this node has used, by channel id. */
    public List<ChannelStats> stats() {
        List<ChannelStats> out = new ArrayList<>();
        counters.forEach((channel, c) -> out.add(new ChannelStats(channel, c.name, c.in.sum(), c.bytesIn.sum(),
                c.out.sum(), c.bytesOut.sum(), c.errors.sum())));
        out.sort(Comparator.comparingInt(ChannelStats::channel));
        return out;
    }

    /** Messages in this node's inboxes now (waiting or being handled), over all senders. */
    public int waiting() {
        int n = 0;
        for (Inbox inbox : inboxes) {
            n += inbox.size();
        }
        return n;
    }

    public boolean isClosed() {
        return closed;
    }

    /**
     * Closes every inbox, answering the messages in them (and the ones being
     * handled) with {@link NodeUnavailableException}, and stops the executor,
     * interrupting handlers still running. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (Inbox inbox : inboxes) {
            inbox.close("node " + nodeId + " is shutting down", true);
        }
        inboxes.clear();
        executor.shutdownNow();
        try {
            if (!executor.awaitTermination(2, TimeUnit.SECONDS)) {
                LOG.warn("message handlers of node {} still run 2 s after close; they were interrupted", nodeId);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Channel ids are shorts on the wire and 0..65535 in messages and stats. */
    static int key(short channel) {
        return channel & 0xffff;
    }

    private record Registration(short channel, String name, MessageHandler handler) {
    }

    private static final class Counters {
        volatile String name;
        final LongAdder in = new LongAdder();
        final LongAdder bytesIn = new LongAdder();
        final LongAdder out = new LongAdder();
        final LongAdder bytesOut = new LongAdder();
        final LongAdder errors = new LongAdder();

        Counters(String name) {
            this.name = name;
        }
    }
}
