package io.membus.transport.tcp;

import io.membus.core.auth.PeerAuth;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.transport.message.HandshakeRecord;
import io.membus.core.directory.PeerInfo;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.DecoderException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.CompletableFuture;

/**
 * The initiator's pipeline end of one channel of a {@link TcpConnection}: the client
 * side of the handshake (HELLO, check the target's proof and identity, AUTH, WELCOME),
 * then responses, message answers and credit grants, handed to the connection.
 *
 * <p><b>Note:</b> not thread-safe: one instance per channel, confined to the channel's
 * I/O thread (Netty calls a handler on one thread); what it hands over reaches other
 * threads through the connection's futures.
 */
final class ClientHandler extends ChannelInboundHandlerAdapter {
    /** The connection's logger: what this handler logs is about the connection. */
    private static final Logger LOG = LoggerFactory.getLogger(TcpConnection.class);

    private final TcpConnection connection;
    private final TcpTransport transport;
    private final PeerInfo peer;
    private final CompletableFuture<Void> ready;
    private final Frame frame = new Frame();
    private byte[] nonce;
    private boolean authenticated;
    private boolean challenged;
    private String closedBy; // the peer's reason, when it closed in order

    ClientHandler(TcpConnection connection, PeerInfo peer, CompletableFuture<Void> ready) {
        this.connection = connection;
        this.transport = connection.transport();
        this.peer = peer;
        this.ready = ready;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        // this I/O thread's loop takes work queued for the end of its turn (a replication stream's send)
        io.membus.core.transport.TransportThreads.setTurnExecutor(ctx.executor());
        nonce = PeerAuth.nonce();
        ByteBuf b = ctx.alloc().ioBuffer(Frame.HEADER_LENGTH + Frame.HELLO_BODY_LENGTH);
        Frame.writeHello(b, transport.nodeId(), transport.incarnation(), peer.nodeId(), peer.incarnation(), nonce);
        ctx.writeAndFlush(b, ctx.voidPromise());
        ctx.fireChannelActive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ByteBuf buf = (ByteBuf) msg;
        try {
            frame.wrap(buf, buf.readerIndex());
            String invalid = frame.validate();
            if (invalid != null) {
                throw new ProtocolException(peer.toString(), invalid);
            }
            if (authenticated) {
                if (frame.correlationId() == 0 && frame.opcode() == Frame.OP_ERROR) {
                    closedBy = connection.error(frame).getMessage();
                    ctx.close();
                    return;
                }
                if (onMessageFrame()) {
                    return;
                }
                if (frame.opcode() != Frame.OP_OK && frame.opcode() != Frame.OP_ERROR) {
                    throw new ProtocolException(peer.toString(), "opcode=" + Frame.opName(frame.opcode())
                            + " where a response was expected");
                }
                connection.response(frame);
            } else {
                handshake(ctx);
            }
        } finally {
            buf.release();
        }
    }

    /** Routes a message answer or credit grant to the outbox; false for any other frame. */
    private boolean onMessageFrame() {
        switch (frame.opcode()) {
            case Frame.OP_MSG_CREDIT -> connection.outbox().grant(frame.intAt(Frame.CREDIT_CREDITS_FIELD_OFFSET),
                    frame.intAt(Frame.CREDIT_MAX_SIZE_FIELD_OFFSET));
            case Frame.OP_MSG_REPLY -> connection.outbox().replied(frame.correlationId(), frame.messagePayload());
            case Frame.OP_MSG_ERROR -> connection.outbox().failed(frame.correlationId(), frame.messageErrorCode(),
                    frame.messageErrorDetail(), frame.messageErrorText());
            default -> {
                return false;
            }
        }
        return true;
    }

    private void handshake(ChannelHandlerContext ctx) {
        byte op = frame.opcode();
        if (op == Frame.OP_ERROR || op == Frame.OP_REFUSED) { // a bad frame of ours, or the target's refusal
            fail(ctx, connection.error(frame));
        } else if (op == Frame.OP_CHALLENGE && !challenged) {
            challenged = true;
            byte[] mine;
            try {
                mine = answerChallenge(transport, peer, nonce, frame);
            } catch (DsmException e) {
                fail(ctx, e);
                return;
            }
            ByteBuf b = ctx.alloc().ioBuffer(Frame.HEADER_LENGTH + Frame.AUTH_BODY_LENGTH);
            Frame.writeAuth(b, mine);
            ctx.writeAndFlush(b, ctx.voidPromise());
        } else if (op == Frame.OP_WELCOME && challenged) {
            if (ready.isDone()) {
                ctx.close();
                return;
            }
            connection.lanePort(((HandshakeRecord.Welcome) frame.handshakeRecord(peer.toString())).port());
            if (!connection.opened(ctx.channel())) { // closed by its owner during this handshake
                ctx.close();
                return;
            }
            authenticated = true;
            FrameDecoder decoder = ctx.pipeline().get(FrameDecoder.class);
            if (decoder != null) {
                decoder.authenticated();
            }
            ready.complete(null);
        } else {
            throw new ProtocolException(peer.toString(), "opcode=" + Frame.opName(op) + " during the handshake");
        }
    }

    /**
     * Checks a CHALLENGE frame's record: the target's proof under the cluster secret, its
     * node and its incarnation. Shared by every initiator end (the pipelined channel and the
     * blocking lanes).
     *
     * @return this node's proof, to send in AUTH
     * @throws DsmException naming what did not match (the connection must be closed)
     */
    static byte[] answerChallenge(TcpTransport transport, PeerInfo peer, byte[] nonce, Frame frame) {
        HandshakeRecord.Challenge challenge = (HandshakeRecord.Challenge) frame.handshakeRecord(peer.toString());
        int node = challenge.node();
        long incarnation = challenge.incarnation();
        byte[] serverNonce = challenge.nonce();
        byte[] proof = challenge.proof();
        byte[] expected = transport.handshake.proof(PeerAuth.Role.TARGET, transport.nodeId(),
                transport.incarnation(), node, incarnation, nonce, serverNonce);
        if (!PeerAuth.matches(expected, proof)) {
            AuthenticationException e = new AuthenticationException(peer.toString(),
                    "reason=the server proof does not verify under this node's cluster secret");
            LOG.warn("{}; disconnected", e.getMessage());
            throw e;
        }
        if (node != peer.nodeId()) {
            throw NodeUnavailableException.notSent(peer.nodeId(), "address " + peer.address()
                    + " serves node " + node + ", not node " + peer.nodeId()
                    + "; the directory entry is out of date");
        }
        if (incarnation != peer.incarnation()) {
            throw new StaleIncarnationException(peer.nodeId(), peer.incarnation(), incarnation);
        }
        return transport.handshake.proof(PeerAuth.Role.INITIATOR, transport.nodeId(), transport.incarnation(),
                node, incarnation, nonce, serverNonce);
    }

    private void fail(ChannelHandlerContext ctx, DsmException e) {
        ready.completeExceptionally(e);
        ctx.close();
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        if (authenticated) {
            connection.sendWaiting(); // responses freed window slots: waiting verbs go out, one flush
        }
        ctx.fireChannelReadComplete();
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (authenticated && ctx.channel().isWritable()) {
            connection.sendWaiting(); // the peer read what was queued: waiting verbs go out
        }
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        if (authenticated) {
            connection.channelLost(closedBy != null ? closedBy : "the peer closed the connection", closedBy != null);
        } else {
            ready.completeExceptionally(NodeUnavailableException.notSent(peer.nodeId(), "the connection to "
                    + peer.address() + " closed during the handshake"));
        }
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        Throwable c = cause instanceof DecoderException && cause.getCause() != null ? cause.getCause() : cause;
        if (c instanceof ProtocolException) {
            LOG.warn("{}; disconnected", c.getMessage());
        } else {
            LOG.debug("connection to {} failed", peer, c);
        }
        if (!authenticated) {
            ready.completeExceptionally(c instanceof DsmException d ? d
                    : NodeUnavailableException.notSent(peer.nodeId(), "connection to " + peer.address()
                    + " failed: " + c, c));
        }
        ctx.close();
    }
}
