package io.membus.alloc;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LayoutTest {

    @Test
    void chunkStateWordFieldsRoundTrip() {
        long w = HeapLayout.state(HeapLayout.LARGE_TAIL, 0xAB, 0xFFFF, 0xFFFF_FFFFL);
        assertEquals(HeapLayout.LARGE_TAIL, HeapLayout.stateOf(w));
        assertEquals(0xAB, HeapLayout.classOf(w));
        assertEquals(0xFFFF, HeapLayout.ownerOf(w));
        assertEquals(0xFFFF_FFFFL, HeapLayout.epochOf(w));
        long v = HeapLayout.state(HeapLayout.SMALL, 3, 7, 5);
        assertEquals(HeapLayout.SMALL, HeapLayout.stateOf(v));
        assertEquals(3, HeapLayout.classOf(v));
        assertEquals(7, HeapLayout.ownerOf(v));
        assertEquals(5, HeapLayout.epochOf(v));
        assertEquals(0, HeapLayout.state(HeapLayout.FREE, 0, 0, 0), "a zeroed table is all FREE chunks");
    }

    @Test
    void freeListHeadCarriesATagThatWraps() {
        long h = HeapLayout.head(0xFF_FFFFL, 123);
        assertEquals(0xFF_FFFFL, HeapLayout.headTag(h));
        assertEquals(123, HeapLayout.headIndex(h));
        long next = HeapLayout.head(HeapLayout.headTag(h) + 1, 9);
        assertEquals(0, HeapLayout.headTag(next));
        assertEquals(9, HeapLayout.headIndex(next));
    }

    @Test
    void blockHeaderGenerationGrowsAndIsMonotonicAcrossEpochs() {
        long h = HeapLayout.blockHeader(HeapLayout.firstGeneration(3), 17, HeapLayout.KIND_SMALL);
        assertEquals(3L << HeapLayout.GENERATION_COUNT_BITS, HeapLayout.generationOf(h));
        assertEquals(17, HeapLayout.blockClassOf(h));
        assertEquals(HeapLayout.KIND_SMALL, HeapLayout.kindOf(h));
        long n = HeapLayout.nextHeader(h);
        assertEquals(HeapLayout.generationOf(h) + 1, HeapLayout.generationOf(n));
        assertEquals(17, HeapLayout.blockClassOf(n));
        long last = HeapLayout.blockHeader(HeapLayout.firstGeneration(3) + HeapLayout.GENERATION_COUNT_MASK - 1, 17,
                HeapLayout.KIND_SMALL);
        long exhausted = HeapLayout.nextHeader(last);
        assertTrue(HeapLayout.generationExhausted(exhausted), "the last count of an epoch retires the block");
        assertTrue(HeapLayout.generationOf(exhausted) < HeapLayout.firstGeneration(4),
                "a generation never reaches the next epoch's first one");
        assertTrue(!HeapLayout.generationExhausted(n));
    }

    @Test
    void chunkGeometryFitsTheSegment() {
        for (long size : new long[]{4096 + 64 + 32, 1 << 20, (1 << 20) + 12345, 64L << 20}) {
            for (int shift = 12; shift <= 16; shift++) {
                int n = HeapLayout.chunkCount(size, shift);
                long start = HeapLayout.dataStart(n);
                assertTrue(start + ((long) n << shift) <= size, "size=" + size + " shift=" + shift);
                assertTrue(HeapLayout.dataStart(n + 1) + ((long) (n + 1) << shift) > size, "one more would not fit");
                assertEquals(0, start % 64);
            }
        }
    }

    @Test
    void sizeClassesCoverEverySizeWithBoundedWaste() {
        int prev = 0;
        for (int c = 0; c < SizeClasses.count(); c++) {
            int s = SizeClasses.blockSize(c);
            assertTrue(s > prev && s % 16 == 0, "class " + c + " size " + s);
            prev = s;
        }
        assertTrue(SizeClasses.count() < 256, "a class fits the 8 bits of a chunk entry");
        for (long b = 1; b <= (1 << 20); b += (b < 4096 ? 1 : 977)) {
            int c = SizeClasses.classFor(b);
            assertTrue(SizeClasses.blockSize(c) >= b, "bytes=" + b);
            assertTrue(c == 0 || SizeClasses.blockSize(c - 1) < b, "smallest class: bytes=" + b);
            assertTrue(b <= 128 || SizeClasses.blockSize(c) <= b * 1.25 + 16, "waste bounded: bytes=" + b);
        }
        assertEquals(-1, SizeClasses.classFor((1 << 20) + 1));
    }
}
