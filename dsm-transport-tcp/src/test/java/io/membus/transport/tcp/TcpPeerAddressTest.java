package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A tcp peer's directory address goes through the one parser ({@link io.membus.core.config.HostPort}). */
class TcpPeerAddressTest {
    private final Nodes nodes = new Nodes();

    @AfterEach
    void close() {
        nodes.close();
    }

    @Test
    void aPeerAddressThatIsNotHostPortFailsTheConnectNamingWhy() {
        Transport a = nodes.start(1);
        for (String[] c : new String[][]{{"somewhere", "there is no port"}, {"::1:4000", "IPv6 address goes in brackets"},
                {"h:70000", "outside 1..65535"}}) {
            NodeUnavailableException e = assertThrows(NodeUnavailableException.class,
                    () -> RemoteMemory.await(a.connect(new PeerInfo(2, 7, c[0])), Duration.ofSeconds(10)), c[0]);
            assertEquals(2, e.nodeId());
            assertFalse(e.mayHaveRun(), e.getMessage());
            assertTrue(e.getMessage().contains(c[1]) && e.getMessage().contains("peer address"), e.getMessage());
        }
    }

    @Test
    void aNodeOnTheIpv6LoopbackPublishesItsAddressInBracketsAndIsReached() {
        try (ServerSocket s = new ServerSocket()) {
            s.bind(new InetSocketAddress(InetAddress.getByName("::1"), 0));
        } catch (IOException e) {
            Assumptions.abort("no IPv6 loopback on this machine: " + e);
        }
        Transport a = nodes.start(1, "tcp.host", "::1");
        Transport b = nodes.start(2, "tcp.host", "::1");
        assertTrue(a.localAddress().startsWith("[::1]:"), a.localAddress());
        Segment seg = a.export(SegmentSpec.of(0, 4096));
        Connection ba = RemoteMemory.await(b.connect(a.self()), Duration.ofSeconds(20));
        assertEquals(0L, RemoteMemory.await(ba.fetchAndAdd(seg.pointer(8), seg.remoteKey(), 5), Duration.ofSeconds(20)));
        assertEquals(5L, seg.readLong(8));
    }
}
