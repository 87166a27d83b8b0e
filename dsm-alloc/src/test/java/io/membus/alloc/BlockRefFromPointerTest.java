package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@link GlobalAllocator#ref(long)}: a stored pointer becomes a checked {@link BlockRef} again. */
class BlockRefFromPointerTest extends WithAllocCluster {
    @Test
    void aStoredPointerBecomesTheSameReferenceOnAnyNode() {
        start(3);
        GlobalAllocator one = cluster.node(1);
        GlobalAllocator two = cluster.node(2);
        BlockRef small = one.allocate(100, Placement.node(3));
        byte[] hello = "bound under a name".getBytes(StandardCharsets.UTF_8);
        one.write(small, 0, hello);

        BlockRef found = two.ref(small.ptr()); // what a node does with a pointer it looked up
        assertEquals(small, found, "the same pointer and header word");
        assertEquals(small.capacity(), found.capacity(), "the capacity of the block's size class");
        assertArrayEquals(hello, two.read(found, 0, hello.length));

        BlockRef large = one.allocate(40_000, Placement.node(2));
        assertTrue(large.isLarge());
        BlockRef foundLarge = cluster.node(3).ref(large.ptr());
        assertEquals(large, foundLarge);
        assertEquals(large.capacity(), foundLarge.capacity(), "the capacity of the chunks the object spans");
        two.free(found);
        assertFalse(one.isLive(small), "a reference from ref() frees the block like the original");
    }

    @Test
    void aPointerToAFreedLargeObjectIsRefusedAsFreed() {
        start(2);
        GlobalAllocator a = cluster.node(1);
        BlockRef big = a.allocate(50_000);
        a.free(big);
        FreedBlockException e = assertThrows(FreedBlockException.class, () -> cluster.node(2).ref(big.ptr()));
        assertEquals(big.ptr(), e.ptr());
        assertTrue(e.getMessage().contains("freed"), e.getMessage());
        assertTrue(e instanceof StaleBlockReferenceException, "one catch handles every stale use");
    }

    @Test
    void aPointerIntoAChunkGivenBackIsRefusedAsFreed() {
        start(2);
        GlobalAllocator a = cluster.node(1);
        BlockRef r = a.allocate(40);
        a.free(r);
        a.trim(); // the chunk has no live block left: it goes back to FREE
        assertThrows(FreedBlockException.class, () -> cluster.node(2).ref(r.ptr()));
        BlockRef other = a.allocate(2000); // the chunk may be claimed again, for another size class
        // a raw pointer carries no generation: it now names whatever block is there, never r's
        try {
            BlockRef now = a.ref(r.ptr());
            assertTrue(now.header() != r.header(), "ref() never passes a new block off as the freed one: " + now);
            assertEquals(other, now, "the only block handed out since is the new one");
        } catch (FreedBlockException | InvalidBlockException expected) {
            // the chunk was not reused at that address
        }
        assertTrue(a.isLive(other));
    }

    @Test
    void pointersThatNameNoBlockGetTypedErrors() {
        start(2);
        GlobalAllocator a = cluster.node(1);
        BlockRef r = a.allocate(40);
        BlockRef big = a.allocate(40_000);
        assertThrows(InvalidBlockException.class, () -> a.ref(RemotePtr.NULL), "null");
        assertThrows(InvalidBlockException.class, () -> a.ref(r.payload()), "the payload, not the header");
        assertThrows(InvalidBlockException.class, () -> a.ref(RemotePtr.pack(1, 0, 64)), "segment 0 is not a heap");
        assertThrows(InvalidBlockException.class, () -> a.ref(RemotePtr.pack(1, AllocCluster.HEAP, 64)),
                "in the chunk table");
        assertThrows(InvalidBlockException.class, () -> a.ref(big.ptr() + (16 << 10)), "inside a large object");
        int blockSize = SizeClasses.blockSize(HeapLayout.blockClassOf(r.header()));
        long uncarved = r.ptr() + ((16L << 10) / blockSize - 1) * blockSize; // the chunk's last block: past the first batch
        InvalidBlockException never = assertThrows(InvalidBlockException.class, () -> a.ref(uncarved),
                "a block of the chunk that was never handed out");
        assertTrue(never.getMessage().contains("no block was ever handed out there"), never.getMessage());
        long freeChunk = RemotePtr.pack(1, AllocCluster.HEAP, RemotePtr.offset(r.ptr()) + 40L * (16 << 10));
        assertThrows(InvalidBlockException.class, () -> a.ref(freeChunk), "a chunk never claimed");
        assertThrows(DsmException.class, () -> a.ref(RemotePtr.pack(9, AllocCluster.HEAP, 4096)), "no node 9");
        assertTrue(a.isLive(r) && a.isLive(big), "refused pointers changed nothing");
    }
}
