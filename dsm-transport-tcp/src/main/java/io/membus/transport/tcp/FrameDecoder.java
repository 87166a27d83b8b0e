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
 * {@link ProtocolException}; nothing of such a frame is passed on. Until the
 * handshake completes the maximum is {@link #HANDSHAKE_MAX_FRAME}, so a peer
 * that has not authenticated cannot make the node buffer a large frame.
 *
 * <p><b>Note:</b> one instance per channel; runs on the channel's I/O thread.
 */
final class FrameDecoder extends ByteToMessageDecoder {
    /** Largest frame before the handshake completes: room for any handshake frame or a refusal. */
    static final int HANDSHAKE_MAX_FRAME = Math.max(Frame.ERROR_MESSAGE_FIELD_OFFSET + Frame.MAX_ERROR_MESSAGE,
            Frame.HEADER_LENGTH + io.membus.core.transport.message.HandshakeRecord.MAX_LENGTH);

    private final int authenticatedMaxFrame;
    private final String peer;
    private int maxFrame = HANDSHAKE_MAX_FRAME;

    FrameDecoder(int maxFrame, String peer) {
        this.authenticatedMaxFrame = maxFrame;
        this.peer = peer;
    }

    /** The peer authenticated: frames up to the configured maximum are accepted (I/O thread). */
    void authenticated() {
        maxFrame = authenticatedMaxFrame;
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
                    + (maxFrame - 4) + (maxFrame == authenticatedMaxFrame ? " (membus.transports.tcp.max-frame=" + maxFrame + ")"
                    : " (before the handshake)"));
        }
        if (in.readableBytes() < 4 + length) {
            return;
        }
        out.add(in.readRetainedSlice(4 + length));
    }
}
