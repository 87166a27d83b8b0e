package io.membus.alloc;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Usage of the heap segments of the cluster, one row per node and segment, read
 * from the chunk tables at one moment. Data only: the {@code membus} command line
 * (module samples) lays it out as a table (each row is one read of one table; rows
 * are not a consistent snapshot of the whole cluster).
 *
 * <p><b>Note:</b> immutable value; thread-safe: every field is final, so any
 * publication makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class HeapUsage {
    /**
     * One heap segment.
     *
     * @param nodeId        node that exports it
     * @param segment       segment index
     * @param chunkSize     bytes per chunk (0 when the segment could not be read)
     * @param chunks        chunks in the segment
     * @param freeChunks    chunks no node has claimed
     * @param smallChunks   chunks carved into size-class blocks
     * @param largeChunks   chunks held by large objects
     * @param blocksInUse   small blocks carved and not on a free list (live, or cached by their chunk's owner)
     * @param blocksFree    small blocks on the chunks' free lists
     * @param largeObjects  large objects
     * @param chunksByOwner claimed chunks per owner node
     * @param problem       why the segment could not be read (not formatted, unreachable), else {@code null}
     */
    public record SegmentUsage(int nodeId, int segment, int chunkSize, int chunks, int freeChunks, int smallChunks,
                               int largeChunks, long blocksInUse, long blocksFree, int largeObjects,
                               Map<Integer, Integer> chunksByOwner, String problem) {
        public long capacityBytes() {
            return (long) chunks * chunkSize;
        }

        public long usedBytes() {
            return (long) (chunks - freeChunks) * chunkSize;
        }

        public double usedPercent() {
            return chunks == 0 ? 0 : 100.0 * (chunks - freeChunks) / chunks;
        }
    }

    private final List<SegmentUsage> segments;

    public HeapUsage(List<SegmentUsage> segments) {
        this.segments = List.copyOf(segments);
    }

    public List<SegmentUsage> segments() {
        return segments;
    }

    public long capacityBytes() {
        return segments.stream().mapToLong(SegmentUsage::capacityBytes).sum();
    }

    public long usedBytes() {
        return segments.stream().mapToLong(SegmentUsage::usedBytes).sum();
    }

    public int freeChunks() {
        return segments.stream().mapToInt(SegmentUsage::freeChunks).sum();
    }

    /** Claimed chunks per node (the node that exports them), in node order. */
    public Map<Integer, long[]> perNode() {
        Map<Integer, long[]> m = new TreeMap<>();
        for (SegmentUsage s : segments) {
            long[] a = m.computeIfAbsent(s.nodeId(), k -> new long[2]);
            a[0] += s.usedBytes();
            a[1] += s.capacityBytes();
        }
        return m;
    }

    /** {@code used=…, capacity=…, per node: 1=…/…} on one line. */
    public String summary() {
        StringBuilder b = new StringBuilder("used=").append(usedBytes()).append(", capacity=").append(capacityBytes())
                .append(", freeChunks=").append(freeChunks()).append(", perNode=[");
        String sep = "";
        for (Map.Entry<Integer, long[]> e : perNode().entrySet()) {
            b.append(sep).append("node=").append(e.getKey()).append(" used=").append(e.getValue()[0]).append('/')
                    .append(e.getValue()[1]);
            sep = ", ";
        }
        return b.append(']').toString();
    }

    @Override
    public String toString() {
        return "HeapUsage{" + summary() + "}";
    }
}
