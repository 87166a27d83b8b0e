package io.membus.transport.tcp;

import io.membus.core.auth.PeerAuth;
import io.membus.core.config.HostPort;
import io.membus.core.error.TransportUnavailableException;
import io.membus.core.transport.AbstractTransport;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.TransportConfig;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.membus.core.transport.TransportThreads;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The {@code tcp} transport: every node runs a "soft NIC", a Netty server that
 * executes one-sided verbs from authenticated peers on its I/O threads against
 * {@link #table()} (never on application threads), and opens
 * {@link TcpConnection}s to peers. See {@link Frame} for the wire format,
 * {@link PeerAuth} for authentication, and docs/tcp-transport.md for the
 * design; {@link TcpSettings} lists the {@code tcp.*} properties.
 *
 * <p>Epoll is used where the kernel has it ({@code membus.transports.tcp.io=auto}), NIO elsewhere.
 *
 * <p><b>Note:</b> thread-safe. Verbs it serves run on its I/O threads, one
 * connection's verbs on one thread in arrival order; their memory effects are
 * those of {@link io.membus.core.transport.SegmentTable}. {@link #close()} waits
 * for the I/O threads to stop, so it must not be called on one of them (from a
 * verb's callback).
 */
public final class TcpTransport extends AbstractTransport {
    private static final Logger LOG = LoggerFactory.getLogger(TcpTransport.class);
    /** Outbound bytes queued per channel above which it stops taking more (both sides). */
    static final WriteBufferWaterMark WATER_MARK = new WriteBufferWaterMark(256 * 1024, 1024 * 1024);

    final TcpSettings settings;
    final PeerAuth handshake;
    /** Where refused peers are logged, rate-limited. */
    final RefusalLog refusals = new RefusalLog(LoggerFactory.getLogger(ServerHandler.class));
    private final EventLoopGroup group;
    private final Class<? extends SocketChannel> socketChannel;
    private final Channel serverChannel;
    private final String localAddress;
    /** Authenticated (or handshaking) server-side channels. */
    private final Map<Channel, ServerHandler> served = new ConcurrentHashMap<>();
    /**
     * The connections this node opened and has not closed. {@link #closeTransport()} closes what is left
     * in it: a {@code connect} that passed its closed check just before {@code close()} set the flag
     * may open a connection the base class's sweep of its map missed, and its dial would go to I/O
     * threads that are shutting down, whose listeners Netty drops (its start would never complete).
     */
    private final java.util.Set<TcpConnection> opened = ConcurrentHashMap.newKeySet();
    /** Serves the blocking lanes peers open to this node; null when {@code lane-server = false}. */
    private final LaneServer laneServer;
    /**
     * Threads that read the answers of held reads ({@link LaneFlight}) that have callbacks and
     * no waiter yet, or whose waiter may not block that long, and open lanes for flights: made on
     * demand, ended when idle for a second and at close. No maximum of its own: each reader task
     * holds a distinct flight, which holds a distinct lane, so the lanes of every connection
     * ({@code blocking-lanes} per peer) bound the readers, plus one lane opener per connection at
     * a time; a fixed maximum for the whole transport let one slow peer's flights hold every
     * reader while callback-only reads to healthy peers failed with a not-sent timeout.
     */
    private final java.util.concurrent.ThreadPoolExecutor flightReaders;
    /**
     * Test hook: where this node's verb executors find a verb's ack gate instead of
     * {@code table().gate(ptr)} (null, the default, in production). Read once by each
     * executor when its connection or lane is accepted: set it before peers connect.
     */
    volatile VerbExecutor.GateLookup gateLookup;
    /**
     * The handshake slots of both ports: accepted connections that have not authenticated yet, at most
     * {@code membus.transports.tcp.max-handshaking}, and {@code max-handshaking-per-source} per source address.
     */
    final HandshakeSlots slots;
    /** The newest incarnation each initiator node authenticated with: older ones are refused. */
    private final Map<Integer, Long> initiatorIncarnations = new ConcurrentHashMap<>();

    public TcpTransport(TransportConfig config) {
        super(config);
        this.settings = new TcpSettings(config);
        this.handshake = new PeerAuth(settings.secret, "tcp");
        this.slots = new HandshakeSlots(settings.maxHandshaking, settings.maxHandshakingPerSource,
                settings.handshakeTimeout.toNanos());
        boolean epoll = switch (settings.io) {
            case "epoll" -> {
                if (!Epoll.isAvailable()) {
                    throw new TransportUnavailableException("tcp", "membus.transports.tcp.io=epoll but epoll is not available here ("
                            + Epoll.unavailabilityCause() + "); use membus.transports.tcp.io=auto or membus.transports.tcp.io=nio",
                            Epoll.unavailabilityCause());
                }
                yield true;
            }
            case "nio" -> false;
            default -> Epoll.isAvailable();
        };
        IoHandlerFactory io = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        this.group = new MultiThreadIoEventLoopGroup(settings.ioThreads,
                TransportThreads.marking(new DefaultThreadFactory("membus-tcp-" + config.nodeId(), true)), io);
        this.socketChannel = epoll ? EpollSocketChannel.class : NioSocketChannel.class;
        Class<? extends ServerChannel> serverClass = epoll ? EpollServerSocketChannel.class
                : NioServerSocketChannel.class;
        try {
            ServerBootstrap b = new ServerBootstrap()
                    .group(group)
                    .channel(serverClass)
                    .option(ChannelOption.SO_REUSEADDR, true)
                    .childOption(ChannelOption.TCP_NODELAY, true)
                    .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, WATER_MARK)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            String peer = String.valueOf(ch.remoteAddress());
                            java.net.InetAddress source = ch.remoteAddress().getAddress();
                            ServerHandler handler = new ServerHandler(TcpTransport.this, peer, source);
                            // a connection flood: each unauthenticated connection holds a slot, a channel and a
                            // timer for membus.transports.tcp.handshake-timeout; beyond its source's share it waits
                            // unread, and its source's later ones wait behind every other source's
                            HandshakeSlots.Offer offer = slots.offer(source, new HandshakeSlots.Waiter() {
                                @Override
                                public void admitted() {
                                    ch.eventLoop().execute(handler::admitted);
                                }

                                @Override
                                public void expired() {
                                    refusals.warn("peer " + peer + " waited " + settings.handshakeTimeout.toMillis()
                                            + " ms for a handshake slot (membus.transports.tcp.max-handshaking-per-source="
                                            + settings.maxHandshakingPerSource + ", max-handshaking="
                                            + settings.maxHandshaking + "): disconnected");
                                    ch.close();
                                }
                            });
                            if (offer == HandshakeSlots.Offer.REFUSED) {
                                refusals.warn("peer " + peer + " refused: its address already waits with too many"
                                        + " connections for a handshake slot (membus.transports.tcp.max-handshaking="
                                        + settings.maxHandshaking + "); disconnected");
                                ch.close();
                                return;
                            }
                            if (offer == HandshakeSlots.Offer.ADMITTED) {
                                handler.holdsSlot();
                            } else {
                                ch.config().setAutoRead(false); // not read, not timed, until it holds a slot
                            }
                            served.put(ch, handler);
                            ch.closeFuture().addListener(f -> served.remove(ch));
                            ch.pipeline().addLast(new FrameDecoder(settings.maxFrame, peer), handler);
                        }
                    });
            this.serverChannel = b.bind(settings.host, settings.port).syncUninterruptibly().channel();
        } catch (RuntimeException e) {
            group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            throw new TransportUnavailableException("tcp", "cannot listen on membus.transports.tcp.host=" + settings.host
                    + ", membus.transports.tcp.port=" + settings.port + ": " + e + "; choose a free port (0 = any) or another host", e);
        }
        LaneServer lanes = null;
        if (settings.laneServer) {
            try {
                lanes = new LaneServer(this, settings.host);
            } catch (java.io.IOException e) {
                serverChannel.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
                group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
                throw new TransportUnavailableException("tcp", "cannot listen for blocking lanes on"
                        + " membus.transports.tcp.host=" + settings.host + ": " + e
                        + "; choose another host, or set membus.transports.tcp.lane-server=false", e);
            }
        }
        this.laneServer = lanes;
        java.util.concurrent.atomic.AtomicInteger readerCount = new java.util.concurrent.atomic.AtomicInteger();
        // no maximum: the lanes bound the tasks (see flightReaders); a SynchronousQueue hands each to a thread at once
        this.flightReaders = new java.util.concurrent.ThreadPoolExecutor(0, Integer.MAX_VALUE, 1,
                TimeUnit.SECONDS, new java.util.concurrent.SynchronousQueue<>(),
                TransportThreads.marking(r -> {
                    Thread t = new Thread(r, "membus-tcp-" + config.nodeId() + "-flights-"
                            + readerCount.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                }));
        int port = ((InetSocketAddress) serverChannel.localAddress()).getPort();
        this.localAddress = HostPort.format(settings.advertiseHost, port); // an IPv6 host in brackets
        LOG.debug("node {} (incarnation {}) serves tcp verbs at {} ({})", nodeId(), incarnation(), localAddress,
                epoll ? "epoll" : "nio");
    }

    @Override
    public String name() {
        return TcpTransportProvider.NAME;
    }

    /**
     * The target's I/O threads and lanes run every verb on its {@link io.membus.core.transport.SegmentTable}
     * (whole words, CPU atomics) and refuse a fenced initiator's verbs.
     */
    @Override
    public io.membus.core.capability.TransportCapabilities capabilities() {
        return io.membus.core.capability.TransportCapabilities.SOFTWARE;
    }

    @Override
    public String localAddress() {
        return localAddress;
    }

    @Override
    protected CompletableFuture<Connection> open(PeerInfo peer) {
        TcpConnection c;
        try {
            c = new TcpConnection(this, peer, group.next());
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        opened.add(c);
        // close() sets the flag before it closes what is in the set, and this reads the flag after adding to
        // it (both volatile / CAS): one of the two sees the other, so no connection is left open
        if (isClosed()) {
            c.close("the initiator's transport closed");
            return CompletableFuture.failedFuture(closedException());
        }
        return c.start().thenApply(x -> c);
    }

    /** A connection of this node closed for good ({@link TcpConnection#close(String)}). */
    void forget(TcpConnection c) {
        opened.remove(c);
    }

    Class<? extends SocketChannel> socketChannelClass() {
        return socketChannel;
    }

    /**
     * Records that {@code nodeId} authenticated with {@code incarnation}.
     *
     * @return the newer incarnation already seen, or {@code 0} when this one is current
     */
    /** The port of this node's lane server, announced in WELCOME; 0 when lanes are served on the Netty port. */
    int lanePort() {
        return laneServer == null ? 0 : laneServer.port();
    }

    long admitInitiator(int nodeId, long incarnation, Object owner) {
        long[] newer = {0};
        initiatorIncarnations.merge(nodeId, incarnation, (old, now) -> {
            if (old > now) {
                newer[0] = old;
                return old;
            }
            return now;
        });
        if (newer[0] == 0) {
            // a restarted initiator: its earlier incarnation's channels are closed
            String why = "node " + nodeId + " restarted with incarnation " + incarnation;
            served.forEach((ch, h) -> {
                if (ch != owner && h.initiatorNode() == nodeId && h.initiatorIncarnation() != 0
                        && h.initiatorIncarnation() < incarnation) {
                    h.drop(why);
                }
            });
            if (laneServer != null) {
                laneServer.drop(c -> c != owner && c.initiatorNode == nodeId && c.initiatorIncarnation < incarnation,
                        why);
            }
        }
        return newer[0];
    }

    /**
     * Closes the connections {@code nodeId} opened to this node, without fencing
     * it: its verbs in flight fail, and it may reconnect. For operators and tests.
     *
     * @return how many connections were closed
     */
    public int disconnect(int nodeId, String reason) {
        int[] n = {0};
        served.forEach((ch, h) -> {
            if (h.initiatorNode() == nodeId) {
                h.drop(reason);
                n[0]++;
            }
        });
        return n[0] + (laneServer == null ? 0 : laneServer.drop(c -> c.initiatorNode == nodeId, reason));
    }

    @Override
    protected void fenced(int nodeId, String reason) {
        served.forEach((ch, h) -> {
            if (h.initiatorNode() == nodeId) {
                h.drop("fenced: " + reason);
            }
        });
        if (laneServer != null) {
            laneServer.drop(c -> c.initiatorNode == nodeId, "fenced: " + reason);
        }
    }

    /** Where {@link LaneFlight} runs the reader of a flight with callbacks and no waiter (may refuse: the fallback reads it). */
    java.util.concurrent.Executor flightReaders() {
        return flightReaders;
    }

    @Override
    protected void closeTransport() {
        flightReaders.shutdown(); // a reader blocked on a lane ends as the connections close their lanes
        for (TcpConnection c : opened) {
            c.close("the initiator's transport closed"); // opened by a connect that raced close(): see opened
        }
        slots.close(); // connections waiting for a slot are closed
        if (laneServer != null) {
            laneServer.close(); // its threads end as their sockets close
        }
        serverChannel.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        for (ServerHandler h : served.values()) {
            h.drop("node " + nodeId() + " is shutting down"); // peers learn why, and fail their verbs at once
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
        for (Channel ch : served.keySet()) {
            // the goodbye frames go out before the I/O threads stop
            ch.closeFuture().awaitUninterruptibly(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        }
        // the timeout bounds close(); quiet period 0: nothing is left to run on the loops
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
        try {
            flightReaders.awaitTermination(2, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The lane server, or null; for tests. */
    LaneServer laneServer() {
        return laneServer;
    }

    /** Lanes the lane server serves now (0 without one); for tests. */
    int lanesServed() {
        return laneServer == null ? 0 : laneServer.servedCount();
    }

    /** Accepted channels not yet closed (handshaking or authenticated); for tests. */
    int servedCount() {
        return served.size();
    }

    /** Whether this transport still serves (not closed). */
    boolean serving() {
        return !isClosed();
    }
}
