package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.codec.Codecs;
import io.membus.coherence.CoherentHeap;
import io.membus.coherence.RemoteRef;
import io.membus.core.RemotePtr;
import io.membus.core.Words;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The lease stripes of a {@link DsmMap} with leased reads: {@value #STRIPES} coherent
 * objects (a {@code Long} each, whose value never matters: their versions do), named
 * by a table block of {@code (ptr, generation header)} pairs that the map's root
 * points to ({@link MapLayout#ROOT_LEASES}). A key belongs to the stripe its hash
 * picks. Every change of a key runs inside {@link CoherentHeap#exclusive} on its stripe;
 * a get caches the key's value together with the stripe's version it holds under a
 * lease, and serves it, with no verb, while {@link CoherentHeap#cachedVersion} still
 * returns that version.
 *
 * <p><b>Note:</b> thread-safe; a stripe's handle is opened on first use and published
 * through an {@link AtomicReferenceArray}.
 */
final class MapLeases {
    static final int STRIPES = 64;
    private static final int PAIR = 16;

    final CoherentHeap heap;
    private final long table;
    private final AtomicReferenceArray<RemoteRef<Long>> stripes = new AtomicReferenceArray<>(STRIPES);

    MapLeases(CoherentHeap heap, long table) {
        this.heap = heap;
        this.table = table;
    }

    /**
     * Creates the stripes and their table on the node of {@code near} (the map's root):
     * returns the table's payload pointer, what the root keeps.
     */
    static long create(CoherentHeap heap, long near) {
        GlobalAllocator allocator = heap.allocator();
        Placement placement = Placement.node(RemotePtr.nodeId(near));
        List<RemoteRef<Long>> made = new ArrayList<>(STRIPES);
        BlockRef block = null;
        try {
            byte[] pairs = new byte[STRIPES * PAIR];
            for (int i = 0; i < STRIPES; i++) {
                RemoteRef<Long> r = heap.create(Codecs.longs(), 0L, placement);
                made.add(r);
                Words.putLong(pairs, i * PAIR, r.ptr());
                Words.putLong(pairs, i * PAIR + 8, r.generationHeader());
            }
            block = allocator.allocate(pairs.length, placement);
            allocator.write(block, 0, pairs);
            return block.payload();
        } catch (RuntimeException e) {
            for (RemoteRef<Long> r : made) {
                try {
                    r.free();
                } catch (RuntimeException f) {
                    e.addSuppressed(f);
                }
            }
            if (block != null) {
                try {
                    allocator.free(block);
                } catch (RuntimeException f) {
                    e.addSuppressed(f);
                }
            }
            throw e;
        }
    }

    /** Frees the stripes and the table of a root that lost its creation race (nobody used them). */
    static void discard(GlobalAllocator allocator, long table) {
        byte[] pairs = allocator.memory().read(table, STRIPES * PAIR);
        for (int i = 0; i < STRIPES; i++) {
            allocator.free(BlockRef.of(Words.getLong(pairs, i * PAIR), Words.getLong(pairs, i * PAIR + 8), 0));
        }
        long block = table - io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH;
        long header = io.membus.alloc.HeapLayout.unseal(allocator.memory().readLong(block), block);
        allocator.free(BlockRef.of(block, header, 0));
    }

    /** The index of a key's stripe, from the key's hash. */
    static int stripeIndex(long hash) {
        return (int) (MapLayout.mix(hash ^ 0x6c65617365L) >>> 58) & (STRIPES - 1);
    }

    /** The stripe of a key's hash. */
    RemoteRef<Long> stripe(long hash) {
        int i = stripeIndex(hash);
        RemoteRef<Long> r = stripes.get(i);
        if (r == null) {
            byte[] pair = heap.allocator().memory().read(table + (long) i * PAIR, PAIR);
            r = heap.open(Words.getLong(pair, 0), Words.getLong(pair, 8), Codecs.longs());
            if (!stripes.compareAndSet(i, null, r)) {
                r = stripes.get(i);
            }
        }
        return r;
    }
}
