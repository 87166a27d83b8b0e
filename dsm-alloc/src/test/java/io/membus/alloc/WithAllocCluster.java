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

    @AfterEach
    void closeCluster() {
        if (cluster != null) {
            cluster.close();
            cluster = null;
        }
    }
}
