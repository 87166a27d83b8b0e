package io.membus.alloc;

import io.membus.core.error.DsmException;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The usage rows of one {@link GlobalAllocator}'s heaps ({@link HeapUsage}): each row one
 * read of one heap's chunk table, through the heaps its {@link HeapFinder} knows; a heap
 * that is not formatted, or cannot be read, is a row that says so instead of an error.
 *
 * <p><b>Note:</b> thread-safe: it keeps no state of its own (the finder is thread-safe);
 * rows read at once by several threads are independent reads.
 */
final class UsageReader {
    private final HeapFinder heaps;
    private final AllocatorConfig config;

    UsageReader(HeapFinder heaps, AllocatorConfig config) {
        this.heaps = heaps;
        this.config = config;
    }

    /** Every heap segment of every live member (one table read per segment). */
    HeapUsage all() {
        List<HeapUsage.SegmentUsage> rows = new ArrayList<>();
        for (int node : heaps.heapNodes()) {
            for (int seg : config.heapSegments()) {
                if (heaps.descriptor(node, seg) != null) {
                    rows.add(of(node, seg));
                }
            }
        }
        return new HeapUsage(rows);
    }

    /** The rows of {@code targets} (what an out-of-memory error reports). */
    HeapUsage of(List<HeapSegment> targets) {
        List<HeapUsage.SegmentUsage> rows = new ArrayList<>();
        for (HeapSegment h : targets) {
            rows.add(of(h.node, h.segment));
        }
        return new HeapUsage(rows);
    }

    /** The row of segment {@code seg} of node {@code node}. */
    HeapUsage.SegmentUsage of(int node, int seg) {
        try {
            HeapSegment h = heaps.heap(node, seg);
            if (h == null) {
                return new HeapUsage.SegmentUsage(node, seg, 0, 0, 0, 0, 0, 0, 0, 0, Map.of(), "not formatted");
            }
            return h.usage();
        } catch (DsmException e) {
            return new HeapUsage.SegmentUsage(node, seg, 0, 0, 0, 0, 0, 0, 0, 0, Map.of(),
                    "unreadable: " + e.code() + " " + e.getMessage());
        }
    }
}
