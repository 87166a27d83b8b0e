package io.membus.bench.alloc;

import io.membus.alloc.SizeClasses;
import net.openhft.chronicle.bytes.BytesStore;

/**
 * The floor: a purely local off-heap allocator of the same size classes, with
 * nothing remote and nothing shared. Blocks are bumped from one Chronicle Bytes
 * native store; a freed block goes on an on-heap stack per class; every block has
 * an 8-byte header whose generation grows on free (a plain store), as in Membus.
 *
 * <p><b>Note:</b> not thread-safe: one benchmark thread.
 */
final class BumpAllocator implements AutoCloseable {
    private final BytesStore<?, ?> store;
    private final long capacity;
    private final long[][] free = new long[SizeClasses.count()][];
    private final int[] freeCount = new int[SizeClasses.count()];
    private long bump;

    BumpAllocator(long capacity) {
        this.capacity = capacity;
        this.store = BytesStore.nativeStoreWithFixedCapacity(capacity);
        for (int i = 0; i < free.length; i++) {
            free[i] = new long[64];
        }
    }

    /** Returns the block offset; -1 when the store is full. */
    long allocate(int size) {
        int cls = SizeClasses.classFor(size + 8L);
        long at;
        if (freeCount[cls] > 0) {
            at = free[cls][--freeCount[cls]];
        } else {
            int bs = SizeClasses.blockSize(cls);
            if (bump + bs > capacity) {
                return -1;
            }
            at = bump;
            bump += bs;
            store.writeLong(at, ((long) cls << 8) | 0xA5);
        }
        return at;
    }

    void free(long at, int size) {
        int cls = SizeClasses.classFor(size + 8L);
        store.writeLong(at, store.readLong(at) + (1L << 24));
        if (freeCount[cls] == free[cls].length) {
            free[cls] = java.util.Arrays.copyOf(free[cls], freeCount[cls] * 2);
        }
        free[cls][freeCount[cls]++] = at;
    }

    @Override
    public void close() {
        store.releaseLast();
    }
}
