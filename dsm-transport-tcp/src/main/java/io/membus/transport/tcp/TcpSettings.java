package io.membus.transport.tcp;

import io.membus.core.transport.TransportConfig;

import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The {@code membus.transports.tcp} settings of a node, parsed and checked once. This
 * module's {@code reference.conf} defines and documents every key with its default:
 * {@code secret} (required, at least 16 bytes), {@code host}, {@code port},
 * {@code advertise-host}, {@code handshake-timeout}, {@code max-handshaking}, {@code max-handshaking-per-source},
 * {@code reconnect-min-backoff}, {@code reconnect-max-backoff}, {@code max-frame},
 * {@code max-in-flight}, {@code blocking-lanes}, {@code hold-reads}, {@code lane-server}, {@code io} and
 * {@code io-threads}.
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
    final int maxHandshakingPerSource;
    final Duration reconnectMinBackoff;
    final Duration reconnectMaxBackoff;
    final int maxFrame;
    final int maxInFlight;
    final int blockingLanes;
    /** {@code hold-reads}: whether a {@code readAsync} may be held on a blocking lane ({@link LaneFlight}). */
    final boolean holdReads;
    final boolean laneServer;
    final String io;
    final int ioThreads;
    final Duration operationTimeout;
    final Duration connectTimeout;

    TcpSettings(TransportConfig config) {
        String allowedSecret = "the cluster secret: at least " + MIN_SECRET_BYTES
                + " bytes, the same on every node (e.g. 32 random hex characters)";
        String s = config.getString("tcp.secret", allowedSecret);
        if (s.isEmpty()) {
            throw TransportConfig.bad("tcp.secret", "<missing>", allowedSecret);
        }
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        if (bytes.length < MIN_SECRET_BYTES) {
            throw TransportConfig.bad("tcp.secret", "<hidden, " + bytes.length + " bytes>", "at least "
                    + MIN_SECRET_BYTES + " bytes, the same on every node (e.g. 32 random hex characters)");
        }
        this.secret = bytes;
        this.host = config.require("tcp.host", "an address to bind, e.g. 127.0.0.1 or 0.0.0.0").trim();
        this.port = config.getInt("tcp.port", 0, 65535);
        String advertise = config.getString("tcp.advertise-host", "a host peers can reach this node at").trim();
        this.advertiseHost = advertise.isEmpty() ? host : advertise;
        if (advertiseHost.equals("0.0.0.0") || advertiseHost.equals("::")) {
            throw TransportConfig.bad("tcp.advertise-host", advertiseHost, "a host peers can reach this node at;"
                    + " set it when membus.transports.tcp.host is a wildcard address");
        }
        this.handshakeTimeout = config.getDuration("tcp.handshake-timeout");
        this.maxHandshaking = config.getInt("tcp.max-handshaking", 1, 1 << 16);
        this.maxHandshakingPerSource = config.getInt("tcp.max-handshaking-per-source", 1, 1 << 16);
        this.reconnectMinBackoff = config.getDuration("tcp.reconnect-min-backoff");
        this.reconnectMaxBackoff = config.getDuration("tcp.reconnect-max-backoff");
        if (reconnectMaxBackoff.compareTo(reconnectMinBackoff) < 0) {
            throw TransportConfig.bad("tcp.reconnect-max-backoff", reconnectMaxBackoff.toMillis() + "ms",
                    "at least membus.transports.tcp.reconnect-min-backoff (" + reconnectMinBackoff.toMillis() + "ms)");
        }
        this.maxFrame = (int) config.getBytes("tcp.max-frame", 4096, Integer.MAX_VALUE - 8);
        this.maxInFlight = config.getInt("tcp.max-in-flight", 1, 1 << 20);
        this.blockingLanes = config.getInt("tcp.blocking-lanes", 0, Long.SIZE);
        this.holdReads = config.getBoolean("tcp.hold-reads");
        this.laneServer = config.getBoolean("tcp.lane-server");
        this.io = config.getString("tcp.io", "auto, epoll or nio").trim().toLowerCase(java.util.Locale.ROOT);
        if (!io.equals("auto") && !io.equals("epoll") && !io.equals("nio")) {
            throw TransportConfig.bad("tcp.io", io, "auto, epoll or nio");
        }
        this.ioThreads = config.getInt("tcp.io-threads", 1, 64);
        this.operationTimeout = config.operationTimeout();
        this.connectTimeout = config.connectTimeout();
    }
}
