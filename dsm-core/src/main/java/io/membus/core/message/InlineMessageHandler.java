package io.membus.core.message;

/**
 * A {@link MessageHandler} that may handle some of its messages on the transport's
 * receiving thread (an I/O thread) instead of the node's message executor, saving the
 * two thread hand-offs of that executor (to it, and back for the reply). The transport
 * must allow it (the transport SPI's
 * {@code io.membus.core.transport.message.MessageEndpoint#open(int, Responder, boolean)}); {@code tcp}
 * does, {@code local}, {@code shm} and {@code rdma} do not (their receiving thread is the
 * sender's, or a poller whose delay would hold every sender).
 *
 * <p>A message is handled inline only when {@link #inline} says so <em>and</em> its
 * sender's inbox is idle (nothing of that sender waits or runs on the executor), so the
 * messages of one sender are still handled one at a time, in the order they were sent,
 * whichever thread handles each. Everything else of {@link MessageHandler}'s contract
 * holds; in addition an inline message must not block, must not wait for anything
 * remote, and must take only short locks: it holds the receiving thread, and with it
 * every connection that thread serves.
 *
 * <p><b>Note:</b> thread-safe, as {@link MessageHandler}; {@link #inline} is called on
 * the receiving thread before the message is queued or handled and must be cheap (it
 * may look at the payload, not change anything).
 */
public interface InlineMessageHandler extends MessageHandler {

    /** Whether this message may be handled on the receiving transport thread (quick and non-blocking). */
    boolean inline(int fromNode, byte[] payload);
}
