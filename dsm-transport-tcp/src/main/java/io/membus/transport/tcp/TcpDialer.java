package io.membus.transport.tcp;

import io.membus.core.error.AuthenticationException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.directory.PeerInfo;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.socket.SocketChannel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Opens the channels of one {@link TcpConnection}: one connect + handshake attempt under
 * the connect deadline ({@link #attempt}), and the reconnect policy after a loss
 * ({@link #scheduleReconnect}): exponential backoff with jitter between
 * {@code membus.transports.tcp.reconnect-min-backoff} and {@code max-backoff}; a
 * reconnect that meets another incarnation of the peer, a wrong secret or a fence closes
 * the connection for good. The connect deadline and the backoff are timed by the shared
 * timer wheel and run on the channel's loop ({@link LoopTimer}).
 *
 * <p><b>Note:</b> {@link #attempt} may be called from any thread (the first connect);
 * the reconnect state (attempt count, pending timer) is confined to the connection's
 * event loop, where {@link #scheduleReconnect} and {@link #cancel} run. The outcome of an
 * attempt reaches the caller through its future.
 */
final class TcpDialer {
    private static final Logger LOG = LoggerFactory.getLogger(TcpConnection.class);

    private final TcpConnection connection;
    private final TcpTransport transport;
    private final PeerInfo peer;
    private final String host;
    private final int port;
    private final EventLoop loop;
    // loop-confined
    private LoopTimer reconnectTimer;
    private int reconnectAttempt;

    TcpDialer(TcpConnection connection, TcpTransport transport, PeerInfo peer, String host, int port,
              EventLoop loop) {
        this.connection = connection;
        this.transport = transport;
        this.peer = peer;
        this.host = host;
        this.port = port;
        this.loop = loop;
    }

    /** One connect + handshake; completes {@code ready} with its outcome. */
    void attempt(CompletableFuture<Void> ready) {
        Bootstrap b = new Bootstrap()
                .group(loop)
                .channel(transport.socketChannelClass())
                .option(ChannelOption.TCP_NODELAY, true)
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, TcpTransport.WATER_MARK)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.max(1, transport.settings.connectTimeout.toMillis()))
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new FrameDecoder(transport.settings.maxFrame, peer.toString()),
                                new ClientHandler(connection, peer, ready));
                    }
                });
        ChannelFuture cf;
        LoopTimer timer;
        long handshakeNanos = transport.settings.connectTimeout.toNanos();
        try {
            cf = b.connect(host, port);
            Channel c = cf.channel();
            // the deadline is timed by the shared wheel and acts on the loop, where the handshake completes ready
            timer = LoopTimer.schedule(loop, () -> {
                if (ready.completeExceptionally(NodeUnavailableException.notSent(peer.nodeId(),
                        "no authenticated connection to " + peer.address() + " within the connect timeout ("
                                + transport.settings.connectTimeout.toMillis() + " ms)"))) {
                    c.close();
                }
            }, handshakeNanos);
        } catch (RuntimeException e) { // the I/O threads are shutting down, or the address is unusable
            ready.completeExceptionally(NodeUnavailableException.notSent(peer.nodeId(), "cannot connect to "
                    + peer.address() + ": " + e, e));
            return;
        }
        Channel ch = cf.channel();
        cf.addListener(f -> {
            if (!f.isSuccess()) {
                ready.completeExceptionally(NodeUnavailableException.notSent(peer.nodeId(), "cannot connect to "
                        + peer.address() + ": " + f.cause(), f.cause()));
            }
        });
        ready.whenComplete((v, e) -> {
            timer.cancel();
            if (e != null) {
                ch.close();
            }
        });
    }

    /** After a loss (I/O thread): the next attempt after the backoff, unless closed or the transport stops. */
    void scheduleReconnect() {
        if (connection.isClosed() || !transport.serving()) {
            return;
        }
        long min = transport.settings.reconnectMinBackoff.toNanos();
        long max = transport.settings.reconnectMaxBackoff.toNanos();
        long backoff = Math.min(max, min << Math.min(20, reconnectAttempt));
        backoff = backoff / 2 + ThreadLocalRandom.current().nextLong(backoff / 2 + 1); // jitter
        reconnectAttempt++;
        if (loop.isShuttingDown()) {
            return; // the transport is closing: close() fails what is left
        }
        // the backoff is timed by the shared wheel; the attempt is I/O work on the loop (bootstrap, confined state)
        reconnectTimer = LoopTimer.schedule(loop, () -> {
            if (connection.isClosed()) {
                return;
            }
            CompletableFuture<Void> ready = new CompletableFuture<>();
            attempt(ready);
            ready.whenComplete((v, e) -> {
                if (e == null) {
                    reconnectAttempt = 0;
                    LOG.info("reconnected to {}", peer);
                    transport.observer().reconnected(peer.nodeId());
                } else if (e instanceof StaleIncarnationException || e instanceof AuthenticationException
                        || (e instanceof NodeUnavailableException n && n.fenced())) {
                    LOG.warn("connection to {} closed for good: {}", peer, e.getMessage());
                    connection.close(e.getMessage());
                } else {
                    loop.execute(this::scheduleReconnect);
                }
            });
        }, backoff);
    }

    /** The connection closed (I/O thread): no further attempt. */
    void cancel() {
        if (reconnectTimer != null) {
            reconnectTimer.cancel();
        }
    }
}
