package io.membus.core.transport;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TransportConfigTest {

    @Test
    void typedGettersNameTheKeyAndWhatIsAllowed() {
        TransportConfig c = TransportConfig.builder(3).property("tcp.port", "70000").property("x.timeout", "abc")
                .property("tcp.secret", "s3cret").build();
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> c.getInt("tcp.port", 0, 0, 65535));
        assertEquals("bad config: key=tcp.port, value=70000, allowed=an integer in 0..65535", e.getMessage());
        assertEquals("tcp.port", e.key());
        DsmConfigException d = assertThrows(DsmConfigException.class, () -> c.getDuration("x.timeout", Duration.ZERO));
        assertTrue(d.getMessage().startsWith("bad config: key=x.timeout, value=abc"), d.getMessage());
        assertThrows(DsmConfigException.class, () -> c.require("missing", "a host name"));
        assertFalse(c.toString().contains("s3cret"), "secrets are never printed");
    }

    @Test
    void durationsInTheUsualForms() {
        assertEquals(Duration.ofMillis(250), TransportConfig.parseDuration("k", "250ms"));
        assertEquals(Duration.ofSeconds(5), TransportConfig.parseDuration("k", "5s"));
        assertEquals(Duration.ofMinutes(2), TransportConfig.parseDuration("k", "2m"));
        assertEquals(Duration.ofSeconds(3), TransportConfig.parseDuration("k", "PT3S"));
        assertThrows(DsmConfigException.class, () -> TransportConfig.parseDuration("k", "0s"));
        assertThrows(DsmConfigException.class, () -> TransportConfig.parseDuration("k", "-1s"));
    }

    @Test
    void nodeIdsOutsideThePointerRangeAreRefused() {
        assertThrows(DsmConfigException.class, () -> TransportConfig.builder(0));
        assertThrows(DsmConfigException.class, () -> TransportConfig.builder(65536));
        assertThrows(DsmConfigException.class, () -> TransportConfig.builder(1).operationTimeout(Duration.ZERO));
    }

    @Test
    void anUnknownTransportNamesTheAvailableOnes() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> Transports.provider("carrier-pigeon"));
        // dsm-core alone carries only local; shm, tcp and rdma come with their modules
        assertTrue(e.getMessage().contains("one of [local]") && e.getMessage().contains("module must be on the class path"),
                e.getMessage());
    }
}
