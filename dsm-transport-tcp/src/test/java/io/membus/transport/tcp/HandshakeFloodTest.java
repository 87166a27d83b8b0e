package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.transport.BlockingVerbs;
import io.membus.core.transport.Connection;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Issue 26.3: one process holding 300 half-open connections to a node's ports made every
 * new client fail ("closed during the handshake"): the handshake slots were one counter for
 * both ports with no share per source. Here a flood from 127.0.0.2 (another source on
 * loopback) keeps 300 silent connections open to the lane port and the node's port,
 * reopening each one the node closes, with the default slots; clients on 127.0.0.1 must
 * connect and run verbs, pipelined and on lanes, all along.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class HandshakeFloodTest {
    private final Nodes nodes = new Nodes();

    @AfterEach
    void close() {
        nodes.close();
    }

    /** Keeps {@code count} silent connections from {@code fromHost} open to each address, reopening closed ones. */
    private static final class Flood implements AutoCloseable {
        private final Selector selector = Selector.open();
        private final AtomicBoolean stop = new AtomicBoolean();
        private final Thread thread;
        final AtomicLong opened = new AtomicLong();
        final AtomicLong closedByNode = new AtomicLong();

        Flood(String fromHost, List<InetSocketAddress> targets, int countEach) throws IOException {
            for (InetSocketAddress t : targets) {
                for (int i = 0; i < countEach; i++) {
                    open(fromHost, t);
                }
            }
            thread = new Thread(() -> {
                ByteBuffer sink = ByteBuffer.allocate(4096);
                try {
                    while (!stop.get()) {
                        selector.select(50);
                        for (SelectionKey k : selector.selectedKeys()) {
                            SocketChannel ch = (SocketChannel) k.channel();
                            int n;
                            try {
                                sink.clear();
                                n = ch.read(sink);
                            } catch (IOException e) {
                                n = -1;
                            }
                            if (n < 0) { // the node closed it: the attacker opens another at once
                                k.cancel();
                                ch.close();
                                closedByNode.incrementAndGet();
                                try {
                                    open(fromHost, (InetSocketAddress) k.attachment());
                                } catch (IOException e) {
                                    // the node refused the connect itself: try again on the next round
                                }
                            }
                        }
                        selector.selectedKeys().clear();
                    }
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }, "flood");
            thread.setDaemon(true);
            thread.start();
        }

        private void open(String fromHost, InetSocketAddress target) throws IOException {
            SocketChannel ch = SocketChannel.open();
            ch.bind(new InetSocketAddress(fromHost, 0));
            ch.connect(target);
            ch.configureBlocking(false);
            selector.wakeup();
            ch.register(selector, SelectionKey.OP_READ, target);
            opened.incrementAndGet();
        }

        @Override
        public void close() throws Exception {
            stop.set(true);
            thread.join(5000);
            for (SelectionKey k : selector.keys()) {
                k.channel().close();
            }
            selector.close();
        }
    }

    private static InetSocketAddress address(String hostPort) {
        return io.membus.core.config.HostPort.parse("peer address", hostPort).socketAddress();
    }

    /** A client node on 127.0.0.1 connects and runs verbs on both paths; returns the time connect took. */
    private long clientWorks(int id, Transport a, Segment seg) throws Exception {
        Transport b = nodes.start(id);
        long t0 = System.nanoTime();
        Connection c = RemoteMemory.await(b.connect(a.self()), Duration.ofSeconds(20));
        long took = System.nanoTime() - t0;
        RemoteMemory.await(c.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1), Duration.ofSeconds(20));
        // three threads on lanes at once: three lane handshakes on the flooded lane port
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
        AtomicLong onLanes = new AtomicLong();
        for (int i = 0; i < 3; i++) {
            Thread t = new Thread(() -> {
                try {
                    for (int n = 0; n < 20; n++) {
                        BlockingVerbs v = c.blockingNow();
                        if (v != null) {
                            v.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1);
                            onLanes.incrementAndGet();
                        } else {
                            RemoteMemory.await(c.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1), Duration.ofSeconds(20));
                        }
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join(60_000);
        }
        assertTrue(failures.isEmpty(), "client " + id + " failed: " + failures);
        assertTrue(onLanes.get() > 0, "client " + id + " ran no verb on a lane");
        return took;
    }

    @Test
    void aFloodOfHalfOpenConnectionsFromOneSourceDelaysNoOtherSource() throws Exception {
        Transport a = nodes.start(1, "tcp.handshake-timeout", "2s");
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        InetSocketAddress node = address(a.localAddress());
        InetSocketAddress lanes = new InetSocketAddress(node.getAddress(), ((TcpTransport) a).lanePort());
        try (Flood flood = new Flood("127.0.0.2", List.of(lanes, node), 150)) {
            Thread.sleep(300); // the flood holds what it can
            long first = clientWorks(2, a, seg);
            Thread.sleep(2500); // past a handshake timeout: the node closed the flood's first wave, it reopened
            long second = clientWorks(3, a, seg);
            System.out.println("flood: " + flood.opened.get() + " connections opened, " + flood.closedByNode.get()
                    + " closed by the node; clients connected in " + first / 1_000_000 + " ms and "
                    + second / 1_000_000 + " ms");
            assertTrue(flood.closedByNode.get() > 0, "the node never closed a flood connection");
        }
        assertEquals(2L * (1 + 60), (long) RemoteMemory.await(
                nodes.start(4).connect(a.self()).thenCompose(c -> c.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 0)),
                Duration.ofSeconds(20)), "every verb of both clients ran");
    }
}
