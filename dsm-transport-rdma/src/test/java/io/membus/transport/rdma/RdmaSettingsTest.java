package io.membus.transport.rdma;

import io.membus.core.Access;
import io.membus.core.error.DsmConfigException;
import io.membus.core.transport.TransportConfig;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RdmaSettingsTest {
    private static TransportConfig.Builder base() {
        return TransportConfig.builder(1).property("rdma.host", "10.0.0.5").property("rdma.secret", "0123456789abcdef");
    }

    @Test
    void defaults() {
        RdmaSettings s = RdmaSettings.from(base().build());
        assertEquals(64, s.queueDepth());
        assertEquals(65536, s.stagingBytes());
        assertEquals(0, s.controlPort());
        assertFalse(s.atomicGlob(), "without IBV_ATOMIC_GLOB declared, CPU atomics are not coherent with the NIC's");
        assertTrue(RdmaSettings.from(base().property("rdma.atomic-glob", "true").build()).atomicGlob());
        assertFalse(s.toString().contains("0123456789abcdef"), "the secret is never printed");
    }

    @Test
    void badValuesNameTheKey() {
        assertEquals("membus.transports.rdma.host", assertThrows(DsmConfigException.class,
                () -> RdmaSettings.from(TransportConfig.builder(1).build())).key());
        assertEquals("membus.transports.rdma.host", assertThrows(DsmConfigException.class,
                () -> RdmaSettings.from(base().property("rdma.host", "::1").build())).key());
        assertEquals("membus.transports.rdma.secret", assertThrows(DsmConfigException.class,
                () -> RdmaSettings.from(base().property("rdma.secret", "short").build())).key());
        assertEquals("membus.transports.rdma.queue-depth", assertThrows(DsmConfigException.class,
                () -> RdmaSettings.from(base().property("rdma.queue-depth", "48").build())).key());
        assertEquals("membus.transports.rdma.atomic-glob", assertThrows(DsmConfigException.class,
                () -> RdmaSettings.from(base().property("rdma.atomic-glob", "maybe").build())).key());
        // each connection registers queue-depth x staging-bytes as one region: DiSNI 2.1 takes an int length
        DsmConfigException ring = assertThrows(DsmConfigException.class, () -> RdmaSettings.from(base()
                .property("rdma.queue-depth", "4096").property("rdma.staging-bytes", "1048576").build()));
        assertEquals("membus.transports.rdma.staging-bytes", ring.key());
        assertTrue(ring.getMessage().contains("at most 524287 with membus.transports.rdma.queue-depth=4096"), ring.getMessage());
    }

    @Test
    void regionAccessFollowsTheSegmentFlags() {
        assertEquals(1 | 4, RdmaTransport.regionAccess(Access.READ_ONLY));
        assertEquals(1 | 2 | 4, RdmaTransport.regionAccess(Access.READ_WRITE));
        assertEquals(1 | 2 | 4 | 8, RdmaTransport.regionAccess(Access.ALL));
    }
}
