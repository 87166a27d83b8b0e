package io.membus.alloc;

import org.junit.jupiter.api.AfterEach;

/**
 * The fixture of the allocator tests: the {@link AllocCluster} a test starts (into
 * {@link #cluster}), closed after each test, after the subclass's own {@code @AfterEach}
 * methods (which stop the test's threads first).
 *
 * <p><b>Note:</b> not thread-safe: the field is set and closed on JUnit's test thread.
 */
abstract class WithAllocCluster {
    /** The usual cluster of these tests: 1 MiB heaps in 16 KiB chunks. */
    static final long HEAP_BYTES = 1 << 20;
    static final int CHUNK_BYTES = 16 << 10;

    AllocCluster cluster;

    /** Starts {@code nodes} nodes with {@link #HEAP_BYTES} heaps of {@link #CHUNK_BYTES} chunks as {@link #cluster}. */
    AllocCluster start(int nodes) {
        cluster = new AllocCluster(nodes, HEAP_BYTES, CHUNK_BYTES);
        return cluster;
    }

    /** Allocates blocks of {@code size} bytes where {@code placement} says until that heap is full; returns them. */
    static java.util.List<BlockRef> fill(GlobalAllocator a, int size, Placement placement) {
        java.util.List<BlockRef> refs = new java.util.ArrayList<>();
        while (true) {
            try {
                refs.add(a.allocate(size, placement));
            } catch (OutOfRemoteMemoryException e) {
                return refs;
            }
        }
    }

    /**
     * Allocates as many blocks as {@code freed} holds where {@code placement} says: they must be
     * exactly those blocks, none twice, and the heap must then be full again.
     */
    static void assertExactlyTheFreedComeBack(GlobalAllocator a, java.util.Set<Long> freed, int size,
                                              Placement placement) {
        java.util.Set<Long> again = new java.util.HashSet<>();
        for (int i = 0; i < freed.size(); i++) {
            org.junit.jupiter.api.Assertions.assertTrue(again.add(a.allocate(size, placement).ptr()), "no block twice");
        }
        org.junit.jupiter.api.Assertions.assertEquals(freed, again, "exactly the freed blocks come back");
        org.junit.jupiter.api.Assertions.assertThrows(OutOfRemoteMemoryException.class, () -> a.allocate(size, placement));
    }

    @AfterEach
    void closeCluster() {
        if (cluster != null) {
            cluster.close();
            cluster = null;
        }
    }
}
