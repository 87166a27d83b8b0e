package io.membus.transport.rdma;

import io.membus.core.transport.TransportConfig;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;

/**
 * The {@code membus.transports.rdma} settings of a node, parsed and checked. This
 * module's {@code reference.conf} defines and documents every key with its default:
 * {@code host} (required, IPv4), {@code port}, {@code cm-port}, {@code secret}
 * (required, at least 16 characters), {@code queue-depth} (a power of two 2..4096),
 * {@code staging-bytes} and {@code atomic-glob} (declare {@code IBV_ATOMIC_GLOB}; DiSNI
 * 2.1 has no {@code ibv_query_device}, so the safe default assumes the device lacks it).
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
            throw TransportConfig.bad("rdma.host", host, "an IPv4 address of an RDMA interface", e);
        }
        if (!(address instanceof Inet4Address)) {
            throw TransportConfig.bad("rdma.host", host, "an IPv4 address (DiSNI's RDMA CM supports IPv4 only)");
        }
        String secret = c.getString("rdma.secret", "the cluster secret, at least 16 characters, the same on every node");
        if (secret.length() < 16) {
            throw TransportConfig.bad("rdma.secret", secret.isEmpty() ? "<missing>"
                    : "<hidden, " + secret.length() + " characters>", "at least 16 characters, the same on every node");
        }
        int depth = c.getInt("rdma.queue-depth", 2, 4096);
        if (Integer.bitCount(depth) != 1) {
            throw TransportConfig.bad("rdma.queue-depth", depth, "a power of two in 2..4096");
        }
        boolean glob = c.getBoolean("rdma.atomic-glob");
        int staging = (int) c.getBytes("rdma.staging-bytes", 64, 16 << 20);
        if ((long) depth * staging > Integer.MAX_VALUE) {
            throw TransportConfig.bad("rdma.staging-bytes", staging, "at most " + Integer.MAX_VALUE / depth
                    + " with membus.transports.rdma.queue-depth=" + depth + ": each connection registers queue-depth"
                    + " x staging-bytes as one memory region, and DiSNI 2.1 takes its length as an int (2 GiB - 1)");
        }
        return new RdmaSettings(address, host, c.getInt("rdma.port", 0, 65535), c.getInt("rdma.cm-port", 0, 65535),
                secret.getBytes(StandardCharsets.UTF_8), depth, staging, glob);
    }

    @Override
    public String toString() {
        return "RdmaSettings{host=" + host + ", controlPort=" + controlPort + ", cmPort=" + cmPort + ", queueDepth="
                + queueDepth + ", stagingBytes=" + stagingBytes + ", atomicGlob="
                + atomicGlob + "}";
    }
}
