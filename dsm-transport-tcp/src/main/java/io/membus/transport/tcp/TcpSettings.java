package io.membus.transport.tcp;

import io.membus.core.error.DsmConfigException;
import io.membus.core.transport.TransportConfig;

import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The {@code tcp.*} properties of a node, parsed and checked once.
 *
 * <table>
 *   <caption>properties</caption>
 *   <tr><td>{@code tcp.secret}</td><td>required: the cluster secret, at least 16 bytes (UTF-8)</td></tr>
 *   <tr><td>{@code tcp.host}</td><td>address to bind (default 127.0.0.1)</td></tr>
 *   <tr><td>{@code tcp.port}</td><td>port to bind, 0 = ephemeral (default 0)</td></tr>
 *   <tr><td>{@code tcp.advertise-host}</td><td>host peers reach this node at (default: tcp.host)</td></tr>
 *   <tr><td>{@code tcp.handshake-timeout}</td><td>a peer must authenticate within it (default 5s)</td></tr>
 *   <tr><td>{@code tcp.max-handshaking}</td><td>accepted connections not yet authenticated; more are closed at
 *   once (default 256)</td></tr>
 *   <tr><td>{@code tcp.reconnect-min-backoff}, {@code tcp.reconnect-max-backoff}</td><td>reconnect delays (50ms, 5s)</td></tr>
 *   <tr><td>{@code tcp.max-frame}</td><td>largest frame accepted (default 16 MiB + 64)</td></tr>
 *   <tr><td>{@code tcp.max-in-flight}</td><td>verbs on the wire per connection; more wait (default 1024)</td></tr>
 *   <tr><td>{@code tcp.io}</td><td>auto | epoll | nio (default auto)</td></tr>
 *   <tr><td>{@code tcp.io-threads}</td><td>Netty I/O threads of the node (default 1)</td></tr>
 * </table>
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
final class TcpSettings {
    static final int MIN_SECRET_BYTES = 16;

    final byte[] secret;
    final String host;
    final int port;
    final String advertiseHost;
    final Duration handshakeTimeout;
    final int maxHandshaking;
    final Duration reconnectMinBackoff;
    final Duration reconnectMaxBackoff;
    final int maxFrame;
    final int maxInFlight;
    final String io;
    final int ioThreads;
    final Duration operationTimeout;
    final Duration connectTimeout;

    TcpSettings(TransportConfig config) {
        String s = config.properties().get("tcp.secret");
        if (s == null || s.isEmpty()) {
            throw new DsmConfigException("tcp.secret", "<missing>", "the cluster secret: at least " + MIN_SECRET_BYTES
                    + " bytes, the same on every node (e.g. 32 random hex characters)");
        }
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        if (bytes.length < MIN_SECRET_BYTES) {
            throw new DsmConfigException("tcp.secret", "<hidden, " + bytes.length + " bytes>", "at least "
                    + MIN_SECRET_BYTES + " bytes, the same on every node (e.g. 32 random hex characters)");
        }
        this.secret = bytes;
        this.host = config.get("tcp.host", "127.0.0.1").trim();
        this.port = config.getInt("tcp.port", 0, 0, 65535);
        this.advertiseHost = config.get("tcp.advertise-host", host).trim();
        if (advertiseHost.isEmpty() || advertiseHost.equals("0.0.0.0") || advertiseHost.equals("::")) {
            throw new DsmConfigException("tcp.advertise-host", advertiseHost, "a host peers can reach this node at;"
                    + " set it when tcp.host is a wildcard address");
        }
        this.handshakeTimeout = config.getDuration("tcp.handshake-timeout", Duration.ofSeconds(5));
        this.maxHandshaking = config.getInt("tcp.max-handshaking", 256, 1, 1 << 16);
        this.reconnectMinBackoff = config.getDuration("tcp.reconnect-min-backoff", Duration.ofMillis(50));
        this.reconnectMaxBackoff = config.getDuration("tcp.reconnect-max-backoff", Duration.ofSeconds(5));
        if (reconnectMaxBackoff.compareTo(reconnectMinBackoff) < 0) {
            throw new DsmConfigException("tcp.reconnect-max-backoff", reconnectMaxBackoff.toMillis() + "ms",
                    "at least tcp.reconnect-min-backoff (" + reconnectMinBackoff.toMillis() + "ms)");
        }
        this.maxFrame = config.getInt("tcp.max-frame", Frame.DEFAULT_MAX_FRAME, 4096, Integer.MAX_VALUE - 8);
        this.maxInFlight = config.getInt("tcp.max-in-flight", 1024, 1, 1 << 20);
        this.io = config.get("tcp.io", "auto").trim().toLowerCase(java.util.Locale.ROOT);
        if (!io.equals("auto") && !io.equals("epoll") && !io.equals("nio")) {
            throw new DsmConfigException("tcp.io", io, "auto, epoll or nio");
        }
        this.ioThreads = config.getInt("tcp.io-threads", 1, 1, 64);
        this.operationTimeout = config.operationTimeout();
        this.connectTimeout = config.connectTimeout();
    }
}
