package io.membus.cluster.names;

import com.typesafe.config.ConfigFactory;
import io.membus.core.error.DsmConfigException;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.capability.TransportCapabilities;
import org.junit.jupiter.api.Test;

import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The {@code membus.names} settings and the switch between the table and the arbiter. */
class NameTableSettingsTest {
    private static final TransportCapabilities FORWARDING = TransportCapabilities.SOFTWARE;
    private static final TransportCapabilities ADOPTION = new TransportCapabilities(true, true, false,
            Optional.empty(), ReplicationSupport.ADOPTION);
    private static final TransportCapabilities RDMA = TransportCapabilities.NONE;

    @Test
    void theTableIsUsedWhenReplicationKeepsTheSystemSegment() {
        NameTableSettings auto = NameTableSettings.defaults();
        assertTrue(auto.useTable(1, FORWARDING), "tcp/local with backups");
        assertTrue(auto.useTable(2, ADOPTION), "shm with backups");
        assertFalse(auto.useTable(0, FORWARDING), "backups = 0: the arbiter");
        assertFalse(auto.useTable(1, RDMA), "rdma does not replicate: the arbiter");
        NameTableSettings on = NameTableSettings.from(ConfigFactory.parseString("membus.names.table = on"));
        assertTrue(on.useTable(0, RDMA));
        NameTableSettings off = NameTableSettings.from(ConfigFactory.parseString("membus.names.table = off"));
        assertFalse(off.useTable(3, FORWARDING));
    }

    @Test
    void theSegmentIsFittedToTheCapacityAndBadValuesNameTheirKey() {
        NameTableSettings d = NameTableSettings.from(ConfigFactory.empty());
        assertEquals(NameTable.DEFAULT_CAPACITY, d.capacity());
        assertEquals(516 * 1024, d.segmentSize(), "64 B + 8 B x 65,536 slots, rounded up to 4 KiB");
        assertEquals(NameTableSettings.Mode.AUTO, d.mode());
        NameTableSettings small = NameTableSettings.from(ConfigFactory.parseString(
                "membus.names { capacity = 100, segment-size = 1MiB }"));
        assertEquals(100, small.capacity());
        assertEquals(1 << 20, small.segmentSize());
        DsmConfigException mode = assertThrows(DsmConfigException.class, () -> NameTableSettings.from(
                ConfigFactory.parseString("membus.names.table = maybe")));
        assertTrue(mode.getMessage().contains("membus.names.table"), mode.getMessage());
        DsmConfigException cap = assertThrows(DsmConfigException.class, () -> NameTableSettings.from(
                ConfigFactory.parseString("membus.names.capacity = 0")));
        assertTrue(cap.getMessage().contains("membus.names.capacity"), cap.getMessage());
        DsmConfigException size = assertThrows(DsmConfigException.class, () -> NameTableSettings.from(
                ConfigFactory.parseString("membus.names { capacity = 1024, segment-size = 4KiB }")));
        assertTrue(size.getMessage().contains("membus.names.segment-size"), size.getMessage());
    }
}
