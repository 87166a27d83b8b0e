package io.membus.alloc;

import io.membus.core.error.DsmException;
import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link GlobalAllocator#freeAll}: the batched free frees exactly what {@link GlobalAllocator#free}
 * would, one by one — each block at its own generation CAS, never twice, never one that is not
 * the reference's — and the blocks it pushes on their chunks' free lists as chains are all handed
 * out again, each once.
 */
class FreeAllTest extends WithAllocCluster {
    @Test
    void remoteFreesOfManyChunksComeBackExactlyOnceAndFillTheHeapAgain() {
        cluster = new AllocCluster(2, 128 << 10, 8 << 10);
        GlobalAllocator a = cluster.node(1);
        List<BlockRef> refs = fill(a, 100, Placement.node(2));
        Set<Long> first = new HashSet<>();
        refs.forEach(r -> first.add(r.ptr()));
        assertTrue(refs.size() > 500, "blocks of many chunks: " + refs.size());
        // freed by node 2, not their owner (node 1 claimed their chunks): every block goes on its chunk's free list, in chains of
        // 37 (so a chain spans chunks and a chunk gets several chains, onto a list already non-empty)
        long pushesBefore = AllocatorCounts.pushes.sum();
        for (int from = 0; from < refs.size(); from += 37) {
            List<BlockRef> part = refs.subList(from, Math.min(refs.size(), from + 37));
            DsmException[] errors = cluster.node(2).freeAll(part.toArray(new BlockRef[0]));
            for (DsmException e : errors) {
                assertNull(e);
            }
        }
        assertEquals(refs.size(), AllocatorCounts.pushes.sum() - pushesBefore, "every block pushed");
        for (BlockRef r : refs) {
            assertFalse(a.isLive(r));
        }
        assertExactlyTheFreedComeBack(a, first, 100, Placement.node(2));
    }

    @Test
    void eachBlockGetsItsOwnOutcomeAndNoneIsFreedTwice() {
        start(2);
        GlobalAllocator one = cluster.node(1);
        GlobalAllocator two = cluster.node(2);
        BlockRef a = one.allocate(64, Placement.node(2));
        BlockRef b = one.allocate(64, Placement.node(1));
        BlockRef gone = one.allocate(64, Placement.node(2));
        BlockRef big = one.allocate(50_000, Placement.node(2));
        two.free(gone);
        BlockRef notABlock = BlockRef.of(a.ptr() + 8, a.header(), a.capacity());
        DsmException[] errors = two.freeAll(new BlockRef[]{a, null, gone, b, a, notABlock, big});
        assertNull(errors[0], "freed");
        assertNull(errors[1], "a null is skipped");
        assertInstanceOf(DoubleFreeException.class, errors[2], "freed before the call");
        assertNull(errors[3], "freed (its owner's cache or list: another node)");
        assertInstanceOf(DoubleFreeException.class, errors[4], "the same block twice in one call: freed once");
        assertInstanceOf(InvalidBlockException.class, errors[5], "no block there");
        assertNull(errors[6], "a large object");
        for (BlockRef r : new BlockRef[]{a, b, gone, big}) {
            assertFalse(one.isLive(r));
        }
        assertThrows(DoubleFreeException.class, () -> one.free(a), "the batched free is the free: a's generation moved on");
        assertThrows(DoubleFreeException.class, () -> one.free(big));
        assertEquals(0, one.freeAll(new BlockRef[0]).length);
    }
}
