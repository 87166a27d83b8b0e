package io.membus.alloc;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link GlobalAllocator#largestObject()}: what callers size a structure by before they
 * allocate it (a map's table, a queue's ring), so it must be exactly the bound
 * {@link GlobalAllocator#allocate} enforces, seen alike from every node.
 */
class LargestObjectTest extends WithAllocCluster {
    @Test
    void theLargestObjectIsExactlyWhatOneAllocationMayAskFor() {
        start(2);
        GlobalAllocator one = cluster.node(1);
        GlobalAllocator two = cluster.node(2);
        long largest = one.largestObject();
        assertTrue(largest > (1 << 19) && largest < (1 << 20), "most of a 1 MiB heap: " + largest);
        assertEquals(largest, two.largestObject(), "every node sees the same heaps");
        AllocationSizeException tooLarge = assertThrows(AllocationSizeException.class,
                () -> one.allocate(largest + 1, Placement.roundRobin()));
        assertEquals(largest, tooLarge.max(), "the bound allocate reports");
        BlockRef block = two.allocate(largest, Placement.node(1));
        assertTrue(block.capacity() >= largest, "an allocation of exactly the largest object fits");
        two.free(block);
    }
}
