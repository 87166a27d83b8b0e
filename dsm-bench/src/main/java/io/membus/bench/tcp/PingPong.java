package io.membus.bench.tcp;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.util.concurrent.DefaultThreadFactory;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The floor of the tcp benchmarks: a raw Netty ping-pong with the frame sizes of
 * a verb and its response, between the same two processes, with the same I/O
 * set-up as the tcp transport (one epoll I/O thread per side, TCP_NODELAY, the
 * caller's thread waiting on a future completed by the client's I/O thread).
 *
 * <pre>
 *   ping: length int32 LE | responseSize int32 LE | padding     (requestSize bytes in all)
 *   pong: length int32 LE | zeros                              (responseSize bytes in all)
 * </pre>
 *
 * <p><b>Note:</b> a {@link Client} is used by one benchmark thread at a time.
 */
final class PingPong {
    private PingPong() {
    }

    static EventLoopGroup group(String name) {
        return new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory(name, true),
                Epoll.isAvailable() ? EpollIoHandler.newFactory() : NioIoHandler.newFactory());
    }

    /** Cuts the stream at LE int32 length fields. */
    private static final class Frames extends ByteToMessageDecoder {
        @Override
        protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
            if (in.readableBytes() < 4) {
                return;
            }
            int length = in.getIntLE(in.readerIndex());
            if (in.readableBytes() < 4 + length) {
                return;
            }
            out.add(in.readRetainedSlice(4 + length));
        }
    }

    /** The echo side: answers each ping with a pong of the size it asks for, one flush per read batch. */
    static Channel serve(EventLoopGroup group, String host) {
        return new ServerBootstrap().group(group)
                .channel(Epoll.isAvailable() ? EpollServerSocketChannel.class : NioServerSocketChannel.class)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new Frames(), new ChannelInboundHandlerAdapter() {
                            private ByteBuf out;

                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ByteBuf ping = (ByteBuf) msg;
                                int responseSize = ping.getIntLE(ping.readerIndex() + 4);
                                ping.release();
                                if (out == null) {
                                    out = ctx.alloc().ioBuffer(Math.max(256, responseSize));
                                }
                                out.writeIntLE(responseSize - 4);
                                out.writeZero(responseSize - 4);
                            }

                            @Override
                            public void channelReadComplete(ChannelHandlerContext ctx) {
                                if (out != null) {
                                    ctx.writeAndFlush(out, ctx.voidPromise());
                                    out = null;
                                }
                            }
                        });
                    }
                }).bind(host, 0).syncUninterruptibly().channel();
    }

    static int port(Channel server) {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    /** The ping side. */
    static final class Client extends ChannelInboundHandlerAdapter {
        private final Channel channel;
        private final ByteBuf ping;
        private int expected; // written by the caller before the write that leads to the pongs
        private int received;
        private CompletableFuture<Void> done;

        Client(EventLoopGroup group, String host, int port, int requestSize, int responseSize) {
            ByteBuf p = io.netty.buffer.Unpooled.directBuffer(requestSize);
            p.writeIntLE(requestSize - 4);
            p.writeIntLE(responseSize);
            p.writeZero(requestSize - 8);
            this.ping = p;
            Client self = this;
            this.channel = new Bootstrap().group(group)
                    .channel(Epoll.isAvailable() ? EpollSocketChannel.class : NioSocketChannel.class)
                    .option(ChannelOption.TCP_NODELAY, true)
                    .handler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new Frames(), self);
                        }
                    }).connect(host, port).syncUninterruptibly().channel();
        }

        /** Sends {@code n} pings in one flush and waits for the {@code n} pongs. */
        void roundTrips(int n) {
            CompletableFuture<Void> f = new CompletableFuture<>();
            channel.eventLoop().execute(() -> {
                expected = n;
                received = 0;
                done = f;
                ByteBuf out = channel.alloc().ioBuffer(ping.readableBytes() * n);
                for (int i = 0; i < n; i++) {
                    out.writeBytes(ping, ping.readerIndex(), ping.readableBytes());
                }
                channel.writeAndFlush(out, channel.voidPromise());
            });
            f.join(); // waits exactly as the tcp benchmark waits for its verb (JMH's -to bounds a hang)
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ((ByteBuf) msg).release();
            if (++received == expected) {
                done.complete(null);
            }
        }

        void close() {
            channel.close().syncUninterruptibly();
            ping.release();
        }
    }
}
