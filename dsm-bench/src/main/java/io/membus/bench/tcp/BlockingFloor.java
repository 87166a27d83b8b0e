package io.membus.bench.tcp;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;

/**
 * The floor a synchronous remote operation is measured against: plain Java
 * blocking sockets, a thread per connection on the server, the caller's thread
 * writing its ping and reading the pong itself (two thread hops per round trip,
 * no I/O framework). Frames are those of {@link PingPong}:
 *
 * <pre>
 *   ping: length int32 LE | responseSize int32 LE | padding     (requestSize bytes in all)
 *   pong: length int32 LE | zeros                              (responseSize bytes in all)
 * </pre>
 *
 * <p>Two server modes ({@link Mode}): {@link Mode#PER_REPLY} writes each pong as soon as its
 * ping is read (one write per reply); {@link Mode#BATCHED} buffers its pongs and flushes only
 * when no request is buffered any more (none read but not answered, none waiting in the
 * socket), so the pongs of pings that arrived together leave in one write, as a server that
 * batches its replies does (issue 28's floor for verbs in flight).
 *
 * <p><b>Note:</b> the server is thread-safe (a thread per connection, each with its own
 * buffers); a {@link Client} is used by one thread at a time. Nothing is shared between
 * connections, so no memory ordering beyond the socket's own is involved.
 */
public final class BlockingFloor {
    /** How the server writes its pongs. */
    public enum Mode {
        /** One write (and so one segment on loopback) per pong. */
        PER_REPLY,
        /** Pongs buffered; flushed when no request is left buffered or waiting in the socket. */
        BATCHED
    }

    private BlockingFloor() {
    }

    /** Serves pings on an ephemeral port of {@code host} on daemon threads, a write per pong; returns the server socket. */
    public static ServerSocket serve(String host) throws IOException {
        return serve(host, Mode.PER_REPLY);
    }

    /**
     * Serves pings on an ephemeral port of {@code host} on daemon threads in {@code mode};
     * returns the server socket (closing it stops accepting; open connections end when their
     * client closes).
     */
    public static ServerSocket serve(String host, Mode mode) throws IOException {
        ServerSocket server = new ServerSocket(0, 64, InetAddress.getByName(host));
        Thread acceptor = new Thread(() -> {
            while (!server.isClosed()) {
                try {
                    Socket s = server.accept();
                    s.setTcpNoDelay(true);
                    Thread t = new Thread(() -> {
                        if (mode == Mode.BATCHED) {
                            pongBatched(s);
                        } else {
                            pong(s);
                        }
                    }, "floor-blocking-" + s.getPort());
                    t.setDaemon(true);
                    t.start();
                } catch (IOException e) {
                    return; // closed
                }
            }
        }, "floor-blocking-accept");
        acceptor.setDaemon(true);
        acceptor.start();
        return server;
    }

    private static void pong(Socket s) {
        byte[] buf = new byte[1 << 20];
        try (s) {
            DataInputStream in = new DataInputStream(s.getInputStream());
            OutputStream out = s.getOutputStream();
            while (true) {
                in.readFully(buf, 0, 8);
                int length = intLE(buf, 0);
                int responseSize = intLE(buf, 4);
                in.readFully(buf, 8, length - 4);
                java.util.Arrays.fill(buf, 0, responseSize, (byte) 0);
                putIntLE(buf, 0, responseSize - 4);
                out.write(buf, 0, responseSize);
            }
        } catch (IOException e) {
            // the client went away
        }
    }

    /** {@link Mode#BATCHED}: pongs into a buffer, flushed once nothing is left to read without blocking. */
    private static void pongBatched(Socket s) {
        byte[] buf = new byte[1 << 20];
        try (s) {
            BufferedInputStream buffered = new BufferedInputStream(s.getInputStream(), 1 << 16);
            DataInputStream in = new DataInputStream(buffered);
            BufferedOutputStream out = new BufferedOutputStream(s.getOutputStream(), 1 << 16);
            while (true) {
                in.readFully(buf, 0, 8);
                int length = intLE(buf, 0);
                int responseSize = intLE(buf, 4);
                in.readFully(buf, 8, length - 4);
                java.util.Arrays.fill(buf, 0, responseSize, (byte) 0);
                putIntLE(buf, 0, responseSize - 4);
                out.write(buf, 0, responseSize);
                // available(): bytes in the stream's buffer plus those the socket holds, without blocking
                if (buffered.available() == 0) {
                    out.flush();
                }
            }
        } catch (IOException e) {
            // the client went away
        }
    }

    static int intLE(byte[] b, int at) {
        return (b[at] & 0xff) | (b[at + 1] & 0xff) << 8 | (b[at + 2] & 0xff) << 16 | (b[at + 3] & 0xff) << 24;
    }

    static void putIntLE(byte[] b, int at, int v) {
        b[at] = (byte) v;
        b[at + 1] = (byte) (v >>> 8);
        b[at + 2] = (byte) (v >>> 16);
        b[at + 3] = (byte) (v >>> 24);
    }

    /** One blocking connection to the floor server. */
    public static final class Client implements AutoCloseable {
        private final Socket socket;
        private final InputStream in;
        private final OutputStream out;
        private final byte[] ping;
        private final byte[] pongs;
        private final int responseSize;

        /**
         * Connects to the floor server at {@code host:port}; each ping is {@code requestSize} bytes and asks for a
         * pong of {@code responseSize} bytes (both at least 8); up to {@code maxInFlight} pings at once.
         */
        public Client(String host, int port, int requestSize, int responseSize, int maxInFlight) throws IOException {
            socket = new Socket(host, port);
            socket.setTcpNoDelay(true);
            in = socket.getInputStream();
            out = socket.getOutputStream();
            this.responseSize = responseSize;
            ping = new byte[requestSize * maxInFlight];
            for (int i = 0; i < maxInFlight; i++) {
                putIntLE(ping, i * requestSize, requestSize - 4);
                putIntLE(ping, i * requestSize + 4, responseSize);
            }
            pongs = new byte[responseSize * maxInFlight];
        }

        /** {@code n} pings written at once, then their {@code n} pongs read. */
        public void roundTrips(int n) throws IOException {
            out.write(ping, 0, ping.length / (pongs.length / responseSize) * n);
            int want = responseSize * n;
            int have = 0;
            while (have < want) {
                int r = in.read(pongs, have, want - have);
                if (r < 0) {
                    throw new IOException("the floor server closed the connection");
                }
                have += r;
            }
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }
}
