package io.membus.alloc;

import org.junit.jupiter.api.Test;

import java.util.Set;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A node that exports no heap (a client) never holds a block: its spreading placements
 * go to the nodes with heaps, and a placement that names it — {@code local()} on it,
 * {@code node(client)} anywhere — is refused with what to do instead.
 */
class ClientPlacementTest {
    private static final int CLIENT = 5;

    @Test
    void aClientsBlocksGoToTheNodesWithHeapsAndNamingTheClientIsRefused() {
        AllocatorConfig memoryNodes = AllocatorConfig.builder().heapSegments(AllocCluster.HEAP).chunkSize(4096).build();
        try (AllocCluster cluster = new AllocCluster(2, 1 << 20, memoryNodes)) {
            GlobalAllocator client = cluster.addClient(CLIENT, AllocatorConfig.builder().heapSegments(AllocCluster.HEAP)
                    .defaultPlacement(Placement.roundRobin()).build());
            Set<Integer> placed = new TreeSet<>();
            for (int i = 0; i < 10; i++) {
                BlockRef r = client.allocate(64);
                placed.add(r.nodeId());
                client.write(r, 0, new byte[] {(byte) i});
                assertEquals((byte) i, cluster.node(1).read(r, 0, 1)[0]);
                cluster.node(2).free(r);
            }
            assertEquals(Set.of(1, 2), placed, "round robin over the memory nodes");
            for (long key = 0; key < 16; key++) {
                int byKey = client.allocate(32, Placement.byKey(key)).nodeId();
                assertTrue(byKey == 1 || byKey == 2);
                assertEquals(byKey, client.allocate(32, Placement.localFirst(key)).nodeId(),
                        "local-first on a node without a heap is by key");
                assertEquals(byKey, cluster.node(1).allocate(32, Placement.byKey(key)).nodeId(), "every node agrees");
            }
            assertEquals(2, client.allocate(32, Placement.node(2)).nodeId());

            PlacementException local = assertThrows(PlacementException.class, () -> client.allocate(32, Placement.local()));
            assertEquals(CLIENT, local.nodeId());
            assertTrue(local.getMessage().contains("node 5 is a client: it exports no memory")
                    && local.getMessage().contains("one of [1, 2]")
                    && local.getMessage().contains("Placement.roundRobin()"), local.getMessage());
            PlacementException named = assertThrows(PlacementException.class,
                    () -> cluster.node(1).allocate(32, Placement.node(CLIENT)));
            assertEquals(CLIENT, named.nodeId());
            assertTrue(named.getMessage().contains("node 5 is a client") && named.getMessage().contains("one of [1, 2]"),
                    named.getMessage());
            assertTrue(cluster.node(1).usage().segments().stream().noneMatch(row -> row.nodeId() == CLIENT));
        }
    }
}
