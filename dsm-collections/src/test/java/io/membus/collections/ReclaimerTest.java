package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The reclaimer's timing rules, on a clock the test steps: nothing is freed before its
 * grace; a change's {@code drain} wakes the freeing thread only for a whole batch, or for
 * what waited twice its grace; {@code drainHere} frees whatever is due.
 */
class ReclaimerTest {
    private static final long GRACE = 1_000;
    private MapCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    /** A block written as an entry's (its header copied in its first payload word), as the reclaimer frees it. */
    private static long entryBlock(GlobalAllocator heap) {
        BlockRef ref = heap.allocate(64);
        byte[] b = new byte[64];
        MapLayout.putLong(b, MapLayout.ENTRY_HEADER_COPY, ref.header());
        heap.memory().write(ref.payload(), b);
        return ref.ptr();
    }

    private static void eventually(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "not within 10 s: " + what);
            Thread.sleep(1);
        }
    }

    @Test
    void aChangeHandsOverOnlyWholeBatchesOrWhatWaitedTwiceItsGrace() throws InterruptedException {
        cluster = new MapCluster("local", 1, 8 << 20);
        GlobalAllocator heap = cluster.node(1);
        AtomicLong now = new AtomicLong();
        Reclaimer r = new Reclaimer(heap, GRACE, now::get);
        long[] blocks = new long[50];
        for (int i = 0; i < 10; i++) {
            blocks[i] = entryBlock(heap);
            r.retire(blocks[i]);
        }
        now.set(GRACE - 1);
        r.drain();
        assertEquals(10, r.pending(), "nothing before its grace");
        now.set(GRACE);
        r.drain();
        assertEquals(10, r.pending(), "ten due, not a whole batch: kept for the next change");
        now.set(2 * GRACE - 1);
        r.drain();
        assertEquals(10, r.pending());
        now.set(2 * GRACE);
        r.drain();
        assertEquals(0, r.pending(), "waited twice its grace: handed over");
        eventually(() -> r.freed() == 10, "the freeing thread freed the ten");

        for (int i = 10; i < 50; i++) { // forty retired at once: a whole batch due after the grace
            blocks[i] = entryBlock(heap);
            r.retire(blocks[i]);
        }
        now.set(3 * GRACE);
        r.drain();
        assertEquals(40 - 32, r.pending(), "one whole batch handed over");
        eventually(() -> r.freed() == 42, "the freeing thread freed the batch");
        r.drainHere();
        assertEquals(0, r.pending(), "drainHere frees whatever is due");
        assertEquals(50, r.freed());
        for (long p : blocks) {
            assertFalse(heap.isLive(BlockRef.of(p, MapLayout.getLong(heap.memory().read(p + io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH, 8), 0), 0)),
                    "block freed");
        }
    }
}
