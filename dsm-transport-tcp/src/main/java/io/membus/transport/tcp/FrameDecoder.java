package io.membus.transport.tcp;

import io.membus.core.error.ProtocolException;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;

import java.util.List;

/**
 * Cuts the byte stream into frames by their length field (see {@link Frame}):
 * each frame is passed on as a retained slice that starts at its length field.
 * A length below the header or above the maximum frame size is a
 * {@link ProtocolException}; nothing of such a frame is passed on.
 *
 * <p><b>Note:</b> one instance per channel; runs on the channel's I/O thread.
 */
final class FrameDecoder extends ByteToMessageDecoder {
    private final int maxFrame;
    private final String peer;

    FrameDecoder(int maxFrame, String peer) {
        this.maxFrame = maxFrame;
        this.peer = peer;
    }

    @Override
    protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
        if (in.readableBytes() < 4) {
            return;
        }
        int length = in.getIntLE(in.readerIndex());
        if (length < Frame.MIN_LENGTH_FIELD || length > maxFrame - 4) {
            in.skipBytes(in.readableBytes());
            throw new ProtocolException(peer, "frameLength=" + length + ", allowed=" + Frame.MIN_LENGTH_FIELD + ".."
                    + (maxFrame - 4) + " (tcp.max-frame=" + maxFrame + ")");
        }
        if (in.readableBytes() < 4 + length) {
            return;
        }
        out.add(in.readRetainedSlice(4 + length));
    }
}
