package io.membus.core.transport.message;

import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.message.InlineMessageHandler;

import java.util.ArrayDeque;

/**
 * The bounded inbox of one sender on a receiving node: at most
 * {@link MessageEndpoint#inboxCapacity()} messages wait or run here at once
 * (the sender holds that many credits and spends one per message until it is
 * answered), so a slow handler slows its sender and memory stays bounded.
 * Messages are handled one at a time, in arrival order, on the endpoint's
 * executor; the inbox is scheduled there only while it has work.
 *
 * <p>An inbox opened {@code inline} ({@link MessageEndpoint#open(int, Responder, boolean)})
 * handles a message of an {@link InlineMessageHandler} that accepts it on the delivering
 * thread itself, when nothing of this sender waits or runs on the executor: the order of
 * handling is still the order of delivery, one message at a time.
 *
 * <p><b>Note:</b> thread-safe. {@link #deliver} is called by one transport thread
 * at a time per inbox (the order of those calls is the order of handling). A message
 * handled inline runs under the same rules as one run by the executor ({@link #current}
 * marks it, its answer is claimed once); what the delivering thread did before
 * {@code deliver} happens-before the handler, which runs on that thread.
 */
public final class Inbox implements Runnable {
    /** Messages handled per turn on the executor before other inboxes get a turn. */
    private static final int TURN = 32;

    private final MessageEndpoint endpoint;
    private final int fromNode;
    private final Responder responder;
    private final ArrayDeque<Message> queue = new ArrayDeque<>(); // guarded by this
    private Message current; // guarded by this
    private boolean scheduled; // guarded by this
    private String closedReason; // guarded by this
    private final boolean inline;

    Inbox(MessageEndpoint endpoint, int fromNode, Responder responder, boolean inline) {
        this.endpoint = endpoint;
        this.fromNode = fromNode;
        this.responder = responder;
        this.inline = inline;
    }

    /** The sender whose messages arrive here. */
    public int fromNode() {
        return fromNode;
    }

    /**
     * Takes one message into the inbox. The checks (channel, size, fence) are made
     * when it is handled (on the executor, or here when it is handled inline).
     *
     * @return {@code false} when the inbox is full — the sender spent more credits
     * than it was granted, a protocol error of the transport — or closed; the
     * message was not taken
     */
    public boolean deliver(long correlation, short channel, boolean request, byte[] payload) {
        Message m = new Message(correlation, channel, request, payload);
        boolean here = inline && endpoint.inline(fromNode, channel, payload);
        boolean schedule = false;
        synchronized (this) {
            if (closedReason != null || queue.size() + (current != null ? 1 : 0) >= endpoint.inboxCapacity()) {
                return false;
            }
            if (here && !scheduled && current == null) { // idle: nothing of this sender waits or runs elsewhere
                current = m;
            } else {
                here = false;
                queue.add(m);
                schedule = !scheduled;
                scheduled = true;
            }
        }
        if (here) {
            runInline(m);
        } else if (schedule) {
            endpoint.schedule(this);
        }
        return true;
    }

    /** Handles {@code m}, already {@link #current}, on the delivering thread. */
    private void runInline(Message m) {
        try {
            endpoint.handle(fromNode, m.correlation, m.channel, m.request, m.payload, this);
        } finally {
            synchronized (this) {
                if (current == m) {
                    current = null;
                }
            }
        }
    }

    /** Whether the executor holds this inbox (queued or running its turn); for tests. */
    synchronized boolean scheduledForTest() {
        return scheduled;
    }

    /** Messages waiting or running here now. */
    public synchronized int size() {
        return queue.size() + (current != null ? 1 : 0);
    }

    @Override
    public void run() {
        for (int i = 0; i < TURN; i++) {
            Message m;
            synchronized (this) {
                m = closedReason == null ? queue.poll() : null;
                if (m == null) {
                    scheduled = false;
                    return;
                }
                current = m;
            }
            try {
                endpoint.handle(fromNode, m.correlation, m.channel, m.request, m.payload, this);
            } finally {
                synchronized (this) {
                    if (current == m) {
                        current = null; // answered by close, or not at all (handle answers every message)
                    }
                }
            }
        }
        endpoint.schedule(this); // more waiting: go to the back of the executor's queue
    }

    /** Answers a message unless it was answered already (by {@link #close}). */
    void reply(long correlation, byte[] reply) {
        if (claim(correlation)) {
            responder.reply(correlation, reply);
        }
    }

    void fail(long correlation, DsmException failure) {
        if (claim(correlation)) {
            responder.fail(correlation, failure);
        }
    }

    /**
     * Marks the running message answered and leaves its place in the inbox before
     * the answer goes out: the answer returns the sender's credit, and the sender
     * may spend it at once (on {@code local}, on this very thread).
     */
    private synchronized boolean claim(long correlation) {
        if (current != null && current.correlation == correlation) {
            if (current.answered) {
                return false;
            }
            current.answered = true;
            current = null;
        }
        return true;
    }

    /**
     * Closes the inbox: messages not yet handled are dropped, and — when
     * {@code answer} — they and the one being handled are answered with
     * {@link NodeUnavailableException} (the receiver is going away while the
     * sender still listens). Without {@code answer} (the sender's connection is
     * gone) they are dropped silently: the sender has failed them already.
     * Idempotent.
     */
    public void close(String reason, boolean answer) {
        Message[] dropped;
        Message running;
        synchronized (this) {
            if (closedReason != null) {
                return;
            }
            closedReason = reason;
            dropped = queue.toArray(new Message[0]);
            queue.clear();
            running = current != null && !current.answered ? current : null;
            if (running != null) {
                running.answered = true;
            }
        }
        if (!answer) {
            return;
        }
        NodeUnavailableException e = new NodeUnavailableException(endpoint.nodeId(), reason);
        if (running != null) {
            responder.fail(running.correlation, e);
        }
        for (Message m : dropped) {
            responder.fail(m.correlation, e);
        }
    }

    public synchronized boolean isClosed() {
        return closedReason != null;
    }

    private static final class Message {
        final long correlation;
        final short channel;
        final boolean request;
        final byte[] payload;
        boolean answered; // guarded by the inbox

        Message(long correlation, short channel, boolean request, byte[] payload) {
            this.correlation = correlation;
            this.channel = channel;
            this.request = request;
            this.payload = payload;
        }
    }
}
