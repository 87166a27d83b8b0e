package io.membus.core.transport;

import io.membus.core.RemoteMemory;
import io.membus.core.error.NodeUnavailableException;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Fencing a node id and lifting the fence when the id comes back as a new incarnation. */
class FenceTest {

    @Test
    void aFencedNodeIsRefusedUntilItsFenceIsLifted() {
        String fabric = "fence-test-" + System.nanoTime();
        try (Transport one = Transports.create("local", TransportConfig.builder(1).property("local.fabric", fabric).build());
             Transport two = Transports.create("local", TransportConfig.builder(2).property("local.fabric", fabric).build())) {
            two.export(SegmentSpec.of(0, 4096));
            long key = two.table().get(0).remoteKey();
            long ptr = two.table().get(0).pointer(0);
            Connection c = RemoteMemory.await(one.connect(two.self()), Duration.ofSeconds(5));
            assertEquals(0L, RemoteMemory.await(c.fetchAndAdd(ptr, key, 1), Duration.ofSeconds(5)));

            one.fence(2, "downed in a test");
            assertTrue(one.isFenced(2));
            NodeUnavailableException e = assertThrows(NodeUnavailableException.class,
                    () -> RemoteMemory.await(one.connect(two.self()), Duration.ofSeconds(5)));
            assertTrue(e.getMessage().contains("node=2") && e.getMessage().contains("downed in a test"), e.getMessage());
            assertThrows(NodeUnavailableException.class,
                    () -> RemoteMemory.await(c.fetchAndAdd(ptr, key, 1), Duration.ofSeconds(5)));

            one.unfence(2);
            one.unfence(2); // idempotent
            assertFalse(one.isFenced(2));
            Connection again = RemoteMemory.await(one.connect(two.self()), Duration.ofSeconds(5));
            assertEquals(1L, RemoteMemory.await(again.fetchAndAdd(ptr, key, 1), Duration.ofSeconds(5)));
        }
    }
}
