package io.membus.transport.tcp;

import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.message.Outbox;
import io.membus.core.directory.PeerInfo;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;

import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The two-sided messages of one {@link TcpConnection}: its {@link Outbox} (credits,
 * deadlines, answers by correlation id) and the queue of messages the outbox gave a credit,
 * in order, waiting for the connection's I/O thread to write them as MSG frames in one
 * buffer with one flush ({@link #writeQueued}). A message is never carried over a
 * reconnect: a loss resets the outbox and drops the queue ({@link #reset}).
 *
 * <p><b>Note:</b> thread-safe: any thread posts through the outbox, which queues under its
 * own lock (a concurrent queue, so order is the outbox's credit order); the queue is
 * drained on the connection's I/O thread only.
 */
final class TcpMessageQueue {
    private final TcpConnection connection;
    private final Outbox outbox;
    /** Messages given a credit by the outbox, in order, waiting for the I/O thread to write them. */
    private final ConcurrentLinkedQueue<OutMessage> issued = new ConcurrentLinkedQueue<>();

    private record OutMessage(long correlation, short channel, boolean request, byte[] payload) {
    }

    TcpMessageQueue(TcpConnection connection, TcpTransport transport, PeerInfo peer) {
        this.connection = connection;
        this.outbox = new Outbox(peer.nodeId(), transport.settings.operationTimeout, transport.messages(),
                this::transmit);
    }

    Outbox outbox() {
        return outbox;
    }

    /** The outbox gave a message a credit (under its lock): queue it for the I/O thread. */
    private boolean transmit(long correlation, short channel, boolean request, byte[] payload) {
        if (!connection.isOpen()) {
            throw connection.unavailable();
        }
        issued.offer(new OutMessage(correlation, channel, request, payload));
        connection.wake();
        return true;
    }

    /** Writes the queued messages to {@code ch}, in order, in one buffer with one flush (I/O thread). */
    void writeQueued(Channel ch) {
        if (ch == null || issued.isEmpty()) {
            return; // not open: failAll has failed them (the outbox was reset)
        }
        ByteBuf out = ch.alloc().ioBuffer(4096);
        OutMessage m;
        while ((m = issued.poll()) != null) {
            Frame.writeMessage(out, m.correlation(), m.channel(), m.request(), m.payload());
        }
        ch.writeAndFlush(out, ch.voidPromise());
    }

    /**
     * The connection was lost (I/O thread): the outbox fails its own (it is reset first, under
     * its lock, so a message it gave a credit before is in the queue now and is dropped here,
     * never sent on the next connection).
     */
    void reset(NodeUnavailableException e) {
        outbox.reset(e);
        issued.clear();
    }
}
