package io.membus.transport.rdma;

import io.membus.core.error.DsmConfigException;
import io.membus.core.transport.TransportConfig;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;

/**
 * The {@code rdma.*} properties of a node, parsed and checked.
 *
 * <ul>
 *   <li>{@code rdma.host} (required): IPv4 address of this node's RDMA interface (IPoIB or RoCE);</li>
 *   <li>{@code rdma.port} (default 0: any free port): TCP port of the control channel;</li>
 *   <li>{@code rdma.cm-port} (default 0: any free port): RDMA CM port peers connect queue pairs to;</li>
 *   <li>{@code rdma.secret} (required, at least 16 bytes): the cluster secret of the handshake's HMAC;</li>
 *   <li>{@code rdma.queue-depth} (default 64, a power of two 2..4096): work requests in flight per connection;</li>
 *   <li>{@code rdma.staging-bytes} (default 65536): registered bytes per slot; longer verbs are split;</li>
 *   <li>{@code rdma.atomic-glob} (default false): declare that the device reports
 *       {@code IBV_ATOMIC_GLOB} ({@code ibv_devinfo -v}: {@code atomic_cap: ATOMIC_GLOB}); DiSNI 2.1 has no
 *       {@code ibv_query_device}, so the safe default assumes it does not.</li>
 * </ul>
 *
 * <p>Outstanding RDMA reads and atomics per queue pair (initiator depth, responder resources)
 * are set by libdisni to the device's {@code max_qp_rd_atom}.
 *
 * <p><b>Note:</b> immutable value; thread-safe.
 */
public record RdmaSettings(InetAddress address, String host, int controlPort, int cmPort, byte[] secret,
                           int queueDepth, int stagingBytes, boolean atomicGlob) {

    public static RdmaSettings from(TransportConfig c) {
        String host = c.require("rdma.host", "the IPv4 address of this node's RDMA interface, e.g. 192.168.1.10");
        InetAddress address;
        try {
            address = InetAddress.getByName(host);
        } catch (UnknownHostException e) {
            throw new DsmConfigException("rdma.host", host, "an IPv4 address of an RDMA interface", e);
        }
        if (!(address instanceof Inet4Address)) {
            throw new DsmConfigException("rdma.host", host, "an IPv4 address (DiSNI's RDMA CM supports IPv4 only)");
        }
        String secret = c.require("rdma.secret", "the cluster secret, at least 16 characters, the same on every node");
        if (secret.length() < 16) {
            throw new DsmConfigException("rdma.secret", "<hidden, " + secret.length() + " characters>",
                    "at least 16 characters, the same on every node");
        }
        int depth = c.getInt("rdma.queue-depth", 64, 2, 4096);
        if (Integer.bitCount(depth) != 1) {
            throw new DsmConfigException("rdma.queue-depth", depth, "a power of two in 2..4096");
        }
        String glob = c.get("rdma.atomic-glob", "false").trim();
        if (!glob.equals("true") && !glob.equals("false")) {
            throw new DsmConfigException("rdma.atomic-glob", glob, "true or false");
        }
        int staging = c.getInt("rdma.staging-bytes", 64 * 1024, 64, 16 << 20);
        if ((long) depth * staging > Integer.MAX_VALUE) {
            throw new DsmConfigException("rdma.staging-bytes", staging, "at most " + Integer.MAX_VALUE / depth
                    + " with rdma.queue-depth=" + depth + ": each connection registers queue-depth x staging-bytes"
                    + " as one memory region, and DiSNI 2.1 takes its length as an int (2 GiB - 1)");
        }
        return new RdmaSettings(address, host, c.getInt("rdma.port", 0, 0, 65535), c.getInt("rdma.cm-port", 0, 0, 65535),
                secret.getBytes(StandardCharsets.UTF_8), depth, staging, Boolean.parseBoolean(glob));
    }

    @Override
    public String toString() {
        return "RdmaSettings{host=" + host + ", controlPort=" + controlPort + ", cmPort=" + cmPort + ", queueDepth="
                + queueDepth + ", stagingBytes=" + stagingBytes + ", atomicGlob="
                + atomicGlob + "}";
    }
}
