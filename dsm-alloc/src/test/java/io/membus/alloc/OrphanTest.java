package io.membus.alloc;

import io.membus.core.error.NodeUnavailableException;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class OrphanTest extends WithAllocCluster {
    @Test
    void chunksOfALeftNodeAreAdoptedAndItsBlocksStayValid() {
        start(3);
        GlobalAllocator three = cluster.node(3);
        List<BlockRef> blocks = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            BlockRef r = three.allocate(100, Placement.node(1));
            three.writeLong(r, 0, i);
            blocks.add(r);
        }
        BlockRef big = three.allocate(40_000, Placement.node(2));
        BlockRef onThree = three.allocate(100, Placement.local());
        assertEquals(Map.of(3, 1), cluster.node(1).usage().segments().get(0).chunksByOwner());

        cluster.leave(3);
        GlobalAllocator one = cluster.node(1);
        GlobalAllocator two = cluster.node(2);
        assertEquals(Set.of(3), two.orphanedNodes());
        for (int i = 0; i < blocks.size(); i++) {
            assertEquals(i, two.readLong(blocks.get(i), 0), "blocks of the node that left stay valid");
        }
        assertThrows(NodeUnavailableException.class, () -> two.read(onThree, 0, 8),
                "memory of the node that left is gone");
        assertThrows(PlacementException.class, () -> two.adoptOrphans(1), "a live member's chunks are not orphans");

        int adopted = two.adoptOrphans(3);
        assertEquals(1 + 3, adopted, "one small chunk on node 1, a three-chunk large object on node 2");
        assertEquals(0, one.adoptOrphans(3), "each chunk goes to one adopter");
        assertEquals(Set.of(), two.orphanedNodes());
        assertEquals(Map.of(2, 1), one.usage().segments().get(0).chunksByOwner());

        Set<Long> freed = new HashSet<>();
        for (BlockRef r : blocks) {
            one.free(r); // any node frees; the adopter (node 2) reuses them
            freed.add(r.ptr());
        }
        one.free(big);
        int reused = 0;
        for (int i = 0; i < 200; i++) {
            if (freed.contains(two.allocate(100, Placement.node(1)).ptr())) {
                reused++;
            }
        }
        assertEquals(freed.size(), reused, "the adopter hands out every block freed into the adopted chunk");
    }

    @Test
    void adoptionCanRunByItselfWhenAMemberLeaves() throws InterruptedException {
        AllocatorConfig cfg = AllocatorConfig.builder().heapSegments(AllocCluster.HEAP).chunkSize(16 << 10)
                .adoptOrphans(true).build();
        cluster = new AllocCluster(2, 1 << 20, cfg);
        cluster.addNode(3, 1 << 20, cfg);
        BlockRef r = cluster.node(3).allocate(64, Placement.node(1));
        cluster.leave(3);
        long deadline = System.nanoTime() + 10_000_000_000L;
        Map<Integer, Integer> owners;
        do {
            owners = cluster.node(1).usage().segments().get(0).chunksByOwner();
            if (!owners.containsKey(3)) {
                break;
            }
            Thread.sleep(5);
        } while (System.nanoTime() < deadline);
        assertTrue(!owners.containsKey(3) && owners.size() == 1, "adopted by one survivor: " + owners);
        cluster.node(2).free(r);
    }
}
