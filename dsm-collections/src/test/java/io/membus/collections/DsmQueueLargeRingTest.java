package io.membus.collections;

import io.membus.codec.Codecs;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.Arrays;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A queue whose ring with the default slots would be larger than the heap's largest object
 * (8 MiB here: 100,000 slots of 272 bytes are 26 MiB) is made with the largest slots that
 * fit instead of being refused; a slot size the caller names is kept or refused, never
 * shrunk.
 */
class DsmQueueLargeRingTest {

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aLargeQueueWithDefaultSlotsGetsTheLargestSlotsThatFit() {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmQueue<byte[]> q = c.node(1).queue("large", Codecs.bytes(), 100_000);
            assertTrue(q.slotBytes() >= QueueDescriptor.MIN_SLOT_BYTES
                    && q.slotBytes() < QueueDescriptor.DEFAULT_SLOT_BYTES && q.slotBytes() % 8 == 0,
                    "slots of " + q.slotBytes() + " bytes");
            DsmQueue<byte[]> other = c.node(2).queue("large", Codecs.bytes(), 100_000);
            assertEquals(q.slotBytes(), other.slotBytes(), "another node opens it with the size it was made with");
            byte[] small = new byte[16];
            byte[] large = new byte[300]; // above the slot: a block of its own
            Arrays.fill(small, (byte) 1);
            Arrays.fill(large, (byte) 2);
            assertTrue(q.offer(small));
            assertTrue(q.offer(large));
            assertArrayEquals(small, other.poll());
            assertArrayEquals(large, other.poll());
            assertNull(other.poll());
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aNamedSlotSizeTooLargeForTheHeapIsRefusedNotShrunk() {
        try (CollCluster c = new CollCluster("local", 1)) {
            assertThrows(io.membus.alloc.AllocationSizeException.class, () -> c.node(1).queue("named",
                    Codecs.bytes(), QueueOptions.capacity(100_000).slotBytes(QueueDescriptor.DEFAULT_SLOT_BYTES)));
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aQueueWithDefaultSlotsInAHeapWithoutRoomForThemGetsSmallerSlots() {
        try (CollCluster c = new CollCluster("local", 1)) {
            // half the 8 MiB heap taken: 25,000 default slots (6.8 MB) no longer fit, smaller ones do
            io.membus.alloc.BlockRef taken = c.allocators.get(1).allocate(4 << 20);
            DsmQueue<byte[]> q = c.node(1).queue("roomless", Codecs.bytes(), 25_000);
            assertTrue(q.slotBytes() >= QueueDescriptor.MIN_SLOT_BYTES
                    && q.slotBytes() < QueueDescriptor.DEFAULT_SLOT_BYTES, "slots of " + q.slotBytes() + " bytes");
            byte[] e = new byte[100];
            e[0] = 7;
            assertTrue(q.offer(e));
            assertArrayEquals(e, q.poll());
            c.allocators.get(1).free(taken);
        }
    }
}
