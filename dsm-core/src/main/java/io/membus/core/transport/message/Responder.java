package io.membus.core.transport.message;

import io.membus.core.error.DsmException;

/**
 * How a receiver's {@link Inbox} answers the messages of one sender: the
 * transport turns each call into a reply on its wire (a frame, a ring record) or
 * completes the sender's future directly ({@code local}). Every message is
 * answered exactly once — one-way messages too, with an empty reply — and the
 * answer returns the message's credit to the sender.
 *
 * <p><b>Note:</b> called from the node's message executor threads, and from the
 * thread closing the endpoint; implementations must be thread-safe and must not
 * block.
 */
public interface Responder {

    /** The handler returned {@code reply} ({@code null}: empty) for message {@code correlation}. */
    void reply(long correlation, byte[] reply);

    /** Message {@code correlation} failed on the receiver with {@code failure}. */
    void fail(long correlation, DsmException failure);
}
