package io.membus.core.transport;

import com.typesafe.config.ConfigFactory;
import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TransportConfigTest {

    @Test
    void typedGettersNameTheFullKeyAndWhatIsAllowed() {
        TransportConfig c = TransportConfig.builder(3).property("x.port", "70000").property("x.timeout", "abc")
                .property("x.secret", "s3cret").build();
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> c.getInt("x.port", 0, 65535));
        assertEquals("bad config: key=membus.transports.x.port, value=70000, allowed=an integer in 0..65535",
                e.getMessage());
        assertEquals("membus.transports.x.port", e.key());
        DsmConfigException d = assertThrows(DsmConfigException.class, () -> c.getDuration("x.timeout"));
        assertTrue(d.getMessage().startsWith("bad config: key=membus.transports.x.timeout, value=abc"), d.getMessage());
        DsmConfigException missing = assertThrows(DsmConfigException.class, () -> c.require("x.missing", "a host name"));
        assertEquals("membus.transports.x.missing", missing.key());
        assertEquals("<missing>", missing.value());
        assertFalse(c.toString().contains("s3cret"), "secrets are never printed");
        DsmConfigException hidden = assertThrows(DsmConfigException.class, () -> c.getInt("x.secret", 0, 1));
        assertFalse(hidden.getMessage().contains("s3cret"), hidden.getMessage());
    }

    @Test
    void durationsAndSizesInTheTypesafeConfigForms() {
        TransportConfig c = TransportConfig.builder(1).property("x.a", "250ms").property("x.b", "5s")
                .property("x.c", "2m").property("x.d", 40).property("x.e", "0s").property("x.f", "-1s")
                .property("x.g", Duration.ofMillis(7)).property("x.s", "64KiB").property("x.t", "1MiB").build();
        assertEquals(Duration.ofMillis(250), c.getDuration("x.a"));
        assertEquals(Duration.ofSeconds(5), c.getDuration("x.b"));
        assertEquals(Duration.ofMinutes(2), c.getDuration("x.c"));
        assertEquals(Duration.ofMillis(40), c.getDuration("x.d"), "a bare number is milliseconds");
        assertEquals(Duration.ofMillis(7), c.getDuration("x.g"));
        assertThrows(DsmConfigException.class, () -> c.getDuration("x.e"));
        assertThrows(DsmConfigException.class, () -> c.getDuration("x.f"));
        assertEquals(65536, c.getBytes("x.s", 0, 1 << 20));
        DsmConfigException big = assertThrows(DsmConfigException.class, () -> c.getBytes("x.t", 0, 65536));
        assertEquals("membus.transports.x.t", big.key());
    }

    @Test
    void defaultsComeFromReferenceConfAndGivenSettingsLieOverThem() {
        TransportConfig plain = TransportConfig.builder(1).build();
        assertEquals("default", plain.require("local.fabric", "a name"));
        assertEquals(64 * 1024, plain.getBytes("messages.max-size", 0, 1 << 24));
        assertEquals(64, plain.getInt("messages.inbox", 1, 1 << 16));
        TransportConfig set = TransportConfig.builder(1)
                .transports(ConfigFactory.parseString("local.fabric = a, messages.inbox = 8"))
                .property("local.fabric", "b").build();
        assertEquals("b", set.require("local.fabric", "a name"), "property() wins over transports()");
        assertEquals(8, set.getInt("messages.inbox", 1, 1 << 16));
        assertEquals(2, set.getInt("messages.handler-threads", 1, 256), "untouched keys keep their default");
    }

    @Test
    void aMisspeltKeyInAKnownSubtreeIsRefusedNamingTheKnownKeys() {
        DsmConfigException e = assertThrows(DsmConfigException.class,
                () -> TransportConfig.builder(1).property("local.fabrik", "x").build());
        assertEquals("membus.transports.local.fabrik", e.key());
        assertTrue(e.allowed().contains("fabric"), e.getMessage());
        DsmConfigException notObject = assertThrows(DsmConfigException.class,
                () -> TransportConfig.builder(1).property("messages", 5).build());
        assertEquals("membus.transports.messages", notObject.key());
        // a subtree no module on the class path defines belongs to a transport not in use here
        assertEquals("y", TransportConfig.builder(1).property("carrier-pigeon.coop", "y").build()
                .require("carrier-pigeon.coop", "a coop"));
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
