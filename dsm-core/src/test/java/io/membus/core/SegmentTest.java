package io.membus.core;

import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SegmentTest {

    @Test
    void aBinderIssuesTheRemoteKeyWithTheZeroedMemorysAddress() {
        long[] seen = new long[2];
        try (Segment s = Segment.allocate(1, 7, 3, 4096, Access.READ_WRITE, (address, size) -> {
            seen[0] = address;
            seen[1] = size;
            return 0x1234_5678_0000_abcdL;
        })) {
            assertEquals(0x1234_5678_0000_abcdL, s.remoteKey());
            assertEquals(s.address(), seen[0], "the binder sees the data area's address");
            assertEquals(4096, seen[1]);
            assertEquals(3, s.index());
            assertEquals(0, s.readLong(4088));
        }
        IllegalStateException refused = assertThrows(IllegalStateException.class,
                () -> Segment.allocate(1, 7, 0, 4096, Access.ALL, (address, size) -> {
                    throw new IllegalStateException("registration failed: test");
                }));
        assertEquals("registration failed: test", refused.getMessage());
        assertThrows(IllegalStateException.class, () -> Segment.allocate(1, 7, 0, 64, Access.ALL, (a, n) -> 0L));
    }

    @Test
    void nativeSegmentsStartZeroedAndDoWordAtomics() {
        try (Segment s = Segment.allocate(1, 7, 0, 4096, Access.ALL)) {
            byte[] all = new byte[4096];
            s.read(0, all, 0, all.length);
            assertArrayEquals(new byte[4096], all);
            assertEquals(0, s.compareAndSwap(8, 0, 5));
            assertEquals(5, s.compareAndSwap(8, 0, 6), "failed CAS returns the current value");
            assertEquals(5, s.fetchAndAdd(8, 10));
            assertEquals(15, s.readLong(8));
            s.writeLong(16, -2);
            assertEquals(-2, s.readLong(16));
            s.zero(8, 16);
            assertEquals(0, s.readLong(8));
            assertThrows(IllegalArgumentException.class, () -> s.readLong(4090));
            assertThrows(IllegalArgumentException.class, () -> s.read(-1, new byte[1], 0, 1));
        }
    }

    @Test
    void remoteKeysAreRandomAndNeverZero() {
        Set<Long> keys = new HashSet<>();
        for (int i = 0; i < 1000; i++) {
            long k = Segment.newRemoteKey();
            assertNotEquals(0L, k);
            keys.add(k);
        }
        assertEquals(1000, keys.size());
    }

    @Test
    void aClosedSegmentRefusesOperations() {
        Segment s = Segment.allocate(1, 7, 0, 4096, Access.ALL);
        s.close();
        s.close(); // idempotent
        assertFalse(s.isOpen());
        DsmException e = assertThrows(DsmException.class, () -> s.readLong(0));
        assertEquals(ErrorCode.UNKNOWN_SEGMENT, e.code());
    }

    @Test
    void aFileBackedSegmentKeepsItsDataAcrossReopenWithANewIncarnationAndKey(@TempDir Path dir) {
        Path file = dir.resolve("seg-0.seg");
        long key1;
        try (Segment s = Segment.createOrOpenFile(file, 3, 100, 0, 8192, Access.ALL, false)) {
            key1 = s.remoteKey();
            s.writeLong(0, 0xCAFEL);
            s.write(100, new byte[]{9, 8, 7}, 0, 3);
        }
        SegmentDescriptor header = Segment.readHeader(file);
        assertEquals(3, header.nodeId());
        assertEquals(100, header.incarnation());
        try (Segment s = Segment.createOrOpenFile(file, 3, 101, 0, 8192, Access.ALL, false)) {
            assertEquals(0xCAFEL, s.readLong(0), "data is back");
            byte[] b = new byte[3];
            s.read(100, b, 0, 3);
            assertArrayEquals(new byte[]{9, 8, 7}, b);
            assertEquals(101, s.incarnation());
            assertNotEquals(key1, s.remoteKey(), "a new incarnation gets a new remote key");
            assertEquals(s.descriptor(), Segment.readHeader(file));
        }
    }

    @Test
    void aFileOfAnotherSegmentIsNotSilentlyReused(@TempDir Path dir) {
        Path file = dir.resolve("seg.seg");
        Segment.createOrOpenFile(file, 3, 1, 0, 8192, Access.ALL, false).close();
        DsmConfigException e = assertThrows(DsmConfigException.class,
                () -> Segment.createOrOpenFile(file, 4, 1, 0, 8192, Access.ALL, false));
        assertTrue(e.getMessage().contains("key=segment file"), e.getMessage());
        try (Segment replaced = Segment.createOrOpenFile(file, 4, 1, 0, 8192, Access.ALL, true)) {
            assertEquals(4, replaced.nodeId());
            assertEquals(0, replaced.readLong(0));
        }
    }

    @Test
    void aPeerMapsTheFileAndSeesTheOwnersWrites(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("seg.seg");
        try (Segment owner = Segment.createOrOpenFile(file, 5, 9, 2, 4096, Access.READ_WRITE, false);
             Segment peer = Segment.mapPeer(1, file)) {
            assertEquals(owner.descriptor(), peer.descriptor(), "the header carries the descriptor and key");
            owner.writeLong(64, 77);
            assertEquals(77, peer.readLong(64));
            assertEquals(77, peer.fetchAndAdd(64, 1));
            assertEquals(78, owner.readLong(64));
        }
        Path junk = dir.resolve("junk");
        Files.write(junk, new byte[8192]);
        assertNull(Segment.readHeader(junk));
        DsmException e = assertThrows(DsmException.class, () -> Segment.mapPeer(1, junk));
        assertEquals(ErrorCode.NODE_UNAVAILABLE, e.code());
        assertThrows(DsmException.class, () -> Segment.mapPeer(1, dir.resolve("missing")));
    }
}
