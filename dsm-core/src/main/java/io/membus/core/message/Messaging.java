package io.membus.core.message;

import io.membus.core.RemoteMemory;
import io.membus.core.error.DsmException;
import io.membus.core.transport.Connection;
import io.membus.core.transport.message.MessageEndpoint;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Two-sided messages by node id: what the coherence layer (invalidations), the
 * queues and locks (wake-ups) use beside the one-sided verbs of
 * {@link RemoteMemory}. The connection is found as verbs find theirs.
 *
 * <h2>Contract (every transport)</h2>
 * <ul>
 *   <li><b>Channels.</b> A node {@link #register}s one {@link MessageHandler} per
 *       channel id (a {@code short}, with a name for errors and counters). A message
 *       on a channel the receiver has no handler for is answered with
 *       {@link io.membus.core.error.UnknownChannelException}, never dropped.</li>
 *   <li><b>One-way and request.</b> {@link #sendAsync} completes when the receiver's
 *       handler has taken the message (returned); {@link #requestAsync} completes with
 *       the handler's reply. Both fail with the handler's failure as
 *       {@link io.membus.core.error.HandlerFailedException}; the connection stays.</li>
 *   <li><b>Order.</b> Messages from one sender to one receiver are handled in the
 *       order they were sent (issued by one thread, or ordered by the caller), one at a
 *       time. Messages of different senders are handled concurrently.</li>
 *   <li><b>At most once.</b> A message is never resent. One that fails with
 *       {@link io.membus.core.error.NodeUnavailableException} (the connection was
 *       lost) or {@link io.membus.core.error.DsmTimeoutException} (its deadline, the
 *       operation timeout from the call, passed) may or may not have been handled.
 *       A message to a node that is fenced, not a member, or gone fails at once with
 *       {@code NodeUnavailableException}, as a verb would.</li>
 *   <li><b>Bounded.</b> A payload (or reply) larger than the receiver's
 *       {@code membus.transports.messages.max-size} fails with
 *       {@link io.membus.core.error.MessageTooLargeException}. The receiver keeps at
 *       most {@code membus.transports.messages.inbox} messages per sender: the sender holds that many
 *       credits and gets one back with each answer, so a slow handler slows its
 *       senders (their messages wait, under their deadlines) and no memory grows.</li>
 *   <li><b>Threads.</b> Handlers run on the receiving node's message executor
 *       ({@code membus.transports.messages.handler-threads}), never on an I/O thread. Futures complete
 *       on a transport or executor thread: callbacks must not block.</li>
 * </ul>
 *
 * <p>Naming: plain names block (at most the operation timeout plus a margin) and
 * rethrow the typed {@link DsmException}; {@code *Async} return a future.
 *
 * <p><b>Note:</b> thread-safe. Everything a sender did before sending
 * happens-before the receiver's handler runs; everything the handler did
 * happens-before the sender's future completes.
 */
public final class Messaging {
    private final RemoteMemory memory;
    private final MessageEndpoint endpoint;

    public Messaging(RemoteMemory memory) {
        this.memory = memory;
        this.endpoint = memory.transport().messages();
    }

    /** This node's node id. */
    public int localNodeId() {
        return memory.localNodeId();
    }

    /**
     * Registers this node's handler of {@code channel}.
     *
     * @throws IllegalStateException when the channel has a handler already
     */
    public void register(short channel, String name, MessageHandler handler) {
        endpoint.register(channel, name, handler);
    }

    /** Removes this node's handler of {@code channel}. */
    public boolean unregister(short channel) {
        return endpoint.unregister(channel);
    }

    /**
     * The handler this node registered for {@code channel}, or {@code null} when it has none
     * (a layer that registers one handler per node finds its own again through it).
     */
    public MessageHandler handler(short channel) {
        return endpoint.handler(channel);
    }

    /** The largest payload this node takes; peers should use the same {@code membus.transports.messages.max-size}. */
    public int maxMessageSize() {
        return endpoint.maxMessageSize();
    }

    /** This node's counters per channel (what {@code membus status} shows). */
    public List<ChannelStats> stats() {
        return endpoint.stats();
    }

    public CompletableFuture<Void> sendAsync(int node, short channel, byte[] payload) {
        return memory.onNode(node, (Connection c) -> c.send(channel, payload));
    }

    public CompletableFuture<byte[]> requestAsync(int node, short channel, byte[] payload) {
        return memory.onNode(node, (Connection c) -> c.request(channel, payload));
    }

    /** Sends a one-way message and waits until the receiver's handler has taken it. */
    public void send(int node, short channel, byte[] payload) {
        memory.await(sendAsync(node, channel, payload));
    }

    /** Sends a request and waits for its reply. */
    public byte[] request(int node, short channel, byte[] payload) {
        return memory.await(requestAsync(node, channel, payload));
    }
}
