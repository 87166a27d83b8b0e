package io.membus.transport.tcp;

import io.membus.core.error.DsmException;
import io.membus.core.transport.message.MessageFailures;
import io.membus.core.transport.message.Responder;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;

/**
 * Writes the answers of the node's message executor to one accepted connection's channel
 * (a {@link ServerHandler}'s initiator). An answer of a message handled inline, on the
 * channel's I/O thread during a read batch (replication stream messages,
 * docs/replication.md §3.5), goes into the read batch's buffer and leaves with its one
 * flush at the batch's end: no hand-off to the event loop, one write for every answer of
 * the batch. Message answers are matched by correlation id, never by order, so they may
 * pass verb answers that wait for their replica group.
 *
 * <p><b>Note:</b> thread-safe: any thread may answer; an answer from another thread is
 * written with its own {@code writeAndFlush} (Netty orders the writes), one on the I/O
 * thread inside a read batch goes into the handler's buffer (confined to that thread).
 */
final class ChannelResponder implements Responder {
    private final ServerHandler handler;
    private final Channel channel;

    ChannelResponder(ServerHandler handler, Channel channel) {
        this.handler = handler;
        this.channel = channel;
    }

    @Override
    public void reply(long correlation, byte[] reply) {
        if (!channel.isActive()) {
            return; // the initiator is gone: it failed the message already
        }
        ByteBuf batch = handler.readBatchOut(channel);
        if (batch != null) {
            Frame.writeMessageReply(batch, correlation, reply);
            return;
        }
        ByteBuf b = channel.alloc().ioBuffer(Frame.MSG_PAYLOAD_FIELD_OFFSET + reply.length);
        Frame.writeMessageReply(b, correlation, reply);
        channel.writeAndFlush(b, channel.voidPromise());
    }

    @Override
    public void fail(long correlation, DsmException failure) {
        if (!channel.isActive()) {
            return;
        }
        ByteBuf batch = handler.readBatchOut(channel);
        if (batch != null) {
            Frame.writeMessageError(batch, correlation, failure.code().wire(), MessageFailures.detail(failure),
                    MessageFailures.text(failure));
            return;
        }
        ByteBuf b = channel.alloc().ioBuffer(Frame.MSG_ERROR_TEXT_FIELD_OFFSET + io.membus.core.transport.message.MessageRecord.MAX_ERROR_TEXT);
        Frame.writeMessageError(b, correlation, failure.code().wire(), MessageFailures.detail(failure),
                MessageFailures.text(failure));
        channel.writeAndFlush(b, channel.voidPromise());
    }
}
