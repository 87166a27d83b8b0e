package io.membus.core;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RemotePtrTest {

    @Test
    void packAndUnpackRoundTripAtTheEdgesAndRandomly() {
        long[][] cases = {{1, 0, 0}, {RemotePtr.MAX_NODE_ID, RemotePtr.MAX_SEGMENT_INDEX, RemotePtr.MAX_OFFSET},
                {3, 0, 0x1f40}, {65535, 0, 1}, {1, 255, 0}};
        for (long[] c : cases) {
            long p = RemotePtr.pack((int) c[0], (int) c[1], c[2]);
            assertEquals(c[0], RemotePtr.nodeId(p));
            assertEquals(c[1], RemotePtr.segmentIndex(p));
            assertEquals(c[2], RemotePtr.offset(p));
        }
        SplittableRandom r = new SplittableRandom(42);
        for (int i = 0; i < 10_000; i++) {
            int node = r.nextInt(1, RemotePtr.MAX_NODE_ID + 1);
            int seg = r.nextInt(RemotePtr.MAX_SEGMENT_INDEX + 1);
            long off = r.nextLong(RemotePtr.MAX_OFFSET + 1);
            long p = RemotePtr.pack(node, seg, off);
            assertEquals(node, RemotePtr.nodeId(p));
            assertEquals(seg, RemotePtr.segmentIndex(p));
            assertEquals(off, RemotePtr.offset(p));
            assertTrue(p != RemotePtr.NULL);
        }
    }

    @Test
    void theLayoutIsNodeSegmentOffsetFromTheTopBit() {
        assertEquals(0x0003_05_0000001f40L, RemotePtr.pack(3, 5, 0x1f40));
        assertEquals("3:5+0x1f40", RemotePtr.toString(RemotePtr.pack(3, 5, 0x1f40)));
        assertEquals("null", RemotePtr.toString(RemotePtr.NULL));
    }

    @Test
    void fieldsThatDoNotFitAreRefusedWithTheirRange() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RemotePtr.pack(0, 0, 0));
        assertEquals("node id out of range: nodeId=0, allowed=1..65535", e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> RemotePtr.pack(65536, 0, 0));
        assertThrows(IllegalArgumentException.class, () -> RemotePtr.pack(1, 256, 0));
        assertThrows(IllegalArgumentException.class, () -> RemotePtr.pack(1, -1, 0));
        assertThrows(IllegalArgumentException.class, () -> RemotePtr.pack(1, 0, RemotePtr.MAX_OFFSET + 1));
        assertThrows(IllegalArgumentException.class, () -> RemotePtr.pack(1, 0, -1));
    }

    @Test
    void arithmeticStaysInTheSegment() {
        long p = RemotePtr.pack(2, 1, 100);
        assertEquals(RemotePtr.pack(2, 1, 164), RemotePtr.plus(p, 64));
        assertEquals(RemotePtr.pack(2, 1, 0), RemotePtr.plus(p, -100));
        assertThrows(IllegalArgumentException.class, () -> RemotePtr.plus(p, -101));
        assertThrows(IllegalArgumentException.class, () -> RemotePtr.plus(RemotePtr.pack(2, 1, RemotePtr.MAX_OFFSET), 1));
    }
}
