package io.membus.alloc;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.Words;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.DsmException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Finds the heap segments of one {@link GlobalAllocator}: the formatted heap in a segment
 * of any node (its geometry read once from its header and kept, an unformatted one checked
 * again after {@value #UNFORMATTED_RECHECK_NANOS} ns), the heap a pointer is in, the nodes
 * that hold heap segments, and the heaps a {@link Placement} may use, in the order to try
 * them (with the reason when there is none). What it knows is dropped when the directory
 * says a member or segment changed ({@link #changed()}, {@link #forgetNode},
 * {@link #forgetSegment}).
 *
 * <p><b>Note:</b> thread-safe: the heaps found are kept in a concurrent map (two threads
 * may read one header at once; the first to publish wins, and a newer incarnation or a
 * formatted heap replaces an older one), the node list in a volatile field rebuilt after
 * any change, the round-robin position in an atomic counter.
 */
final class HeapFinder {
    private static final Logger LOG = LoggerFactory.getLogger(GlobalAllocator.class);
    private static final long UNFORMATTED_RECHECK_NANOS = 200_000_000L;

    private final RemoteMemory memory;
    private final Remote remote;
    private final SegmentDirectory directory;
    private final AllocatorConfig config;
    private final HeapFormat format;
    private final int self;
    private final Map<Long, HeapSegment> heaps = new ConcurrentHashMap<>();
    private final AtomicInteger roundRobin = new AtomicInteger();
    private volatile int[] heapNodes;

    HeapFinder(RemoteMemory memory, Remote remote, AllocatorConfig config, HeapFormat format) {
        this.memory = memory;
        this.remote = remote;
        this.directory = memory.directory();
        this.config = config;
        this.format = format;
        this.self = memory.localNodeId();
    }

    /** The heaps found so far (a live view: trim and close walk it). */
    Collection<HeapSegment> values() {
        return heaps.values();
    }

    /** A member or segment came or went: the node list is rebuilt on next use. */
    void changed() {
        heapNodes = null;
    }

    /** {@code node} left: its heaps are forgotten (and the node list rebuilt). */
    void forgetNode(int node) {
        heapNodes = null;
        heaps.keySet().removeIf(k -> (int) (k >>> 8) == node);
    }

    /** That segment was removed or formatted: found again, with its geometry, on next use. */
    void forgetSegment(int node, int segment) {
        heaps.remove(key(node, segment));
    }

    private static long key(int node, int segment) {
        return ((long) node << 8) | segment;
    }

    SegmentDescriptor descriptor(int node, int segment) {
        if (node == self) {
            Segment s = memory.localSegment(segment);
            return s == null ? null : s.descriptor();
        }
        return directory.segment(node, segment).orElse(null);
    }

    /** The formatted heap in that segment, or {@code null} when it is not exported or not formatted. */
    HeapSegment heap(int node, int segment) {
        SegmentDescriptor d = descriptor(node, segment);
        if (d == null) {
            return null;
        }
        long k = key(node, segment);
        HeapSegment h = heaps.get(k);
        if (h != null && h.incarnation == d.incarnation()
                && (h.formatted || System.nanoTime() - h.checkedAt < UNFORMATTED_RECHECK_NANOS)) {
            return h.formatted ? h : null;
        }
        // the header is read without a lock; two threads may both read it, and the first to publish wins
        byte[] hdr = remote.read(d.pointer(0), HeapLayout.HEADER_LENGTH);
        HeapSegment fresh = Words.getLong(hdr, HeapLayout.MAGIC_OFFSET) == 0 ? new HeapSegment(remote, self, config, d)
                : format.geometry(d, hdr);
        HeapSegment known = h;
        h = heaps.compute(k, (key, now) -> now == null || now == known || now.incarnation != d.incarnation()
                || (!now.formatted && fresh.formatted) ? fresh : now);
        return h.formatted ? h : null;
    }

    HeapSegment heapOfPointer(long ptr) {
        int node = RemotePtr.nodeId(ptr);
        int seg = RemotePtr.segmentIndex(ptr);
        if (ptr == RemotePtr.NULL || !config.isHeapSegment(seg)) {
            throw new InvalidBlockException(ptr, "not in a heap segment (heap segments: "
                    + Arrays.toString(config.heapSegments()) + ")");
        }
        HeapSegment h = heap(node, seg);
        if (h == null) {
            memory.segmentOf(ptr); // throws the typed error of a missing node or segment
            throw new InvalidBlockException(ptr, "the segment is not a formatted heap");
        }
        return h;
    }

    /** Nodes with at least one heap segment, ascending. */
    int[] heapNodes() {
        int[] nodes = heapNodes;
        if (nodes == null) {
            TreeSet<Integer> set = new TreeSet<>();
            for (int seg : config.heapSegments()) {
                if (memory.localSegment(seg) != null) {
                    set.add(self);
                }
            }
            for (SegmentDescriptor d : directory.segments()) {
                if (config.isHeapSegment(d.index()) && d.nodeId() != self) {
                    set.add(d.nodeId());
                }
            }
            nodes = set.stream().mapToInt(Integer::intValue).toArray();
            heapNodes = nodes;
        }
        return nodes;
    }

    private void addHeapsOf(int node, List<HeapSegment> out) {
        for (int seg : config.heapSegments()) {
            HeapSegment h = heap(node, seg);
            if (h != null) {
                out.add(h);
            }
        }
    }

    /** {@link #addHeapsOf}, skipping a node whose heap headers cannot be read (for spreading placements). */
    void addReachableHeapsOf(int node, List<HeapSegment> out) {
        try {
            addHeapsOf(node, out);
        } catch (HeapCorruptedException e) {
            throw e;
        } catch (DsmException e) {
            LOG.debug("placement skips node {}: {}", node, e.toString());
        }
    }

    /** The heaps a placement may use, in the order to try them. */
    List<HeapSegment> targets(Placement placement) {
        List<HeapSegment> out = new ArrayList<>(4);
        switch (placement.kind()) {
            case LOCAL -> addHeapsOf(self, out);
            case NODE -> {
                int n = placement.nodeId();
                if (n != self && directory.member(n).isEmpty()) {
                    throw new PlacementException(placement.toString(), n, "not a live member of the cluster");
                }
                addHeapsOf(n, out);
            }
            case ROUND_ROBIN -> {
                int[] nodes = heapNodes();
                int start = nodes.length == 0 ? 0 : Math.floorMod(roundRobin.getAndIncrement(), nodes.length);
                for (int i = 0; i < nodes.length; i++) {
                    addReachableHeapsOf(nodes[(start + i) % nodes.length], out);
                }
            }
            case KEY, LOCAL_FIRST -> {
                boolean selfFirst = placement.kind() == Placement.Kind.LOCAL_FIRST;
                if (selfFirst) {
                    addReachableHeapsOf(self, out);
                }
                int[] nodes = heapNodes();
                Integer[] order = new Integer[nodes.length];
                int n = 0;
                for (int node : nodes) {
                    if (!selfFirst || node != self) {
                        order[n++] = node;
                    }
                }
                long key = placement.keyHash();
                Arrays.sort(order, 0, n, (a, b) -> Long.compareUnsigned(Placement.score(key, b), Placement.score(key, a)));
                for (int i = 0; i < n; i++) {
                    addReachableHeapsOf(order[i], out);
                }
            }
            default -> throw new IllegalStateException("unknown placement " + placement);
        }
        if (out.isEmpty()) {
            int node = placement.kind() == Placement.Kind.NODE ? placement.nodeId() : self;
            boolean named = placement.kind() == Placement.Kind.LOCAL || placement.kind() == Placement.Kind.NODE;
            throw new PlacementException(placement.toString(), node, "no formatted heap segment "
                    + Arrays.toString(config.heapSegments()) + " is exported"
                    + (named ? " by that node" + withoutHeap(node) : " by any live member"));
        }
        return out;
    }

    /**
     * Why a named node has no heap, and where blocks may go instead: a node that exports
     * none of the heap segments (a client, or a member without {@code membus.heap.segments})
     * never holds a block.
     */
    private String withoutHeap(int node) {
        boolean exports = node == self ? !memory.localSegments().isEmpty()
                : directory.segments().stream().anyMatch(d -> d.nodeId() == node);
        if (exports && Arrays.stream(config.heapSegments()).anyMatch(seg -> descriptor(node, seg) != null)) {
            return " (its heap segments are not formatted yet)";
        }
        return " (node " + node + " is " + (exports ? "a member without heap segments" : "a client: it exports no"
                + " memory") + ", so no block is ever placed on it); place blocks on a node with a heap, one of "
                + Arrays.toString(heapNodes()) + ", with Placement.node(n), or spread them with Placement.roundRobin()"
                + " or Placement.byKey(key)";
    }
}
