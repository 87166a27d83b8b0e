package io.membus.core.message;

/**
 * Handles the messages of one channel on the receiving node. Runs on the node's
 * message executor, never on an I/O thread (unless it is an {@link InlineMessageHandler}
 * and says a message may run there); the messages of one sender are
 * handled one at a time, in the order they were sent, while messages of
 * different senders may be handled at the same time on different threads.
 *
 * <p>A handler that throws is logged by the receiver, and the sender's future
 * fails with {@link io.membus.core.error.HandlerFailedException}; the connection
 * stays. A handler should not block for long: while it runs, later messages of
 * the same sender wait (and, once the sender's credits are used up, the sender
 * waits too). It must never wait for a message to the sender whose message it is
 * handling (the sender may be waiting for this handler's credit).
 *
 * <p><b>Note:</b> called by several threads at once (one per sender at most);
 * implementations must be thread-safe. Everything the sender did before sending
 * happens-before the handler runs; everything the handler did happens-before the
 * sender's future completes.
 */
@FunctionalInterface
public interface MessageHandler {

    /**
     * Handles one message.
     *
     * @param fromNode the sender's node id
     * @param payload  the message's bytes; the handler owns the array
     * @return the reply to a request ({@code null} means an empty reply); ignored for one-way messages
     */
    byte[] onMessage(int fromNode, byte[] payload);
}
