package io.membus.cluster;

import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapUsage;
import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.core.RemoteMemory;
import io.membus.core.error.DsmConfigException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * A {@link DsmNode}'s global allocator: a memory node formats its heap segments at start,
 * before its directory entry is published, so no peer ever sees an unformatted heap; a
 * client (no memory of its own) makes its allocator on first use, placing every block on the
 * memory nodes in the heap segments their entries name, and formats nothing.
 *
 * <p><b>Note:</b> thread-safe. The allocator is published by a volatile field; a client's is
 * made under the node's monitor ({@code lock}), which the node's shutdown also takes to read
 * it after it set closing, so an allocator is never made once a close began without that
 * close seeing it.
 */
final class NodeAllocator {
    private static final Logger LOG = LoggerFactory.getLogger(DsmNode.class); // the node's lines, as before
    private final NodeConfig config;
    private final ClusterDirectory directory;
    /** The node: a client's allocator is made under its monitor. */
    private final Object lock;
    /** Whether the node began closing, and why it was downed: no client allocator is made then. */
    private final BooleanSupplier closing;
    private final Supplier<String> downReason;
    private volatile GlobalAllocator allocator;

    NodeAllocator(NodeConfig config, ClusterDirectory directory, Object lock, BooleanSupplier closing,
                  Supplier<String> downReason) {
        this.config = config;
        this.directory = directory;
        this.lock = lock;
        this.closing = closing;
        this.downReason = downReason;
    }

    /** The allocator made so far, or null (read under the node's monitor at a shutdown). */
    GlobalAllocator current() {
        return allocator;
    }

    /** The heap usage for {@code membus status}, or {@code null} without an allocator. */
    HeapUsage usage() {
        GlobalAllocator a = allocator;
        return a == null ? null : a.usage();
    }

    /**
     * A memory node's allocator over {@code membus.heap.segments}, formatting those of
     * {@code heapsHere} (every heap index may be a group another node serves now: a restart);
     * its meters in {@code metrics}. Nothing without heap segments.
     */
    void startMemoryNode(RemoteMemory memory, List<Integer> heapsHere, NodeMetrics metrics) {
        if (!config.heapSegments().isEmpty()) {
            // formatted before the entry is published: no peer ever sees an unformatted heap
            GlobalAllocator a = new GlobalAllocator(memory, AllocatorConfig.builder()
                    .heapSegments(config.heapSegments().stream().mapToInt(Integer::intValue).toArray())
                    .chunkSize(config.heapChunkSize()).build());
            if (!heapsHere.isEmpty()) { // every heap index may be a group another node serves now (a restart)
                a.formatLocalSegments();
            }
            this.allocator = a;
            NodeMeters.bindHeap(metrics.registry(), a, heapsHere);
        }
    }

    /**
     * {@link DsmNode#allocator()}: this memory node's, or a client's made on first use.
     *
     * @throws DsmConfigException when this memory node has no heap segments configured
     * @throws io.membus.alloc.PlacementException when this is a client and no live memory
     *                            node exports a heap yet
     */
    GlobalAllocator get(RemoteMemory memory) {
        GlobalAllocator a = allocator;
        if (a == null) {
            if (config.isClient()) {
                synchronized (lock) {
                    return makeClient(memory);
                }
            }
            throw new DsmConfigException("membus.heap.segments", "[]", "the indexes of the segments to format as"
                    + " allocator heaps, e.g. [0] (the same on every node): node " + config.nodeId()
                    + " runs no allocator");
        }
        return a;
    }

    /** A client's allocator, made once the directory shows a memory node with a heap; it formats nothing. */
    private GlobalAllocator makeClient(RemoteMemory memory) {
        GlobalAllocator a = allocator;
        if (a != null) {
            return a;
        }
        java.util.TreeSet<Integer> heaps = new java.util.TreeSet<>();
        java.util.TreeSet<Integer> heapNodes = new java.util.TreeSet<>();
        for (NodeEntry e : directory.entries().values()) {
            if (!e.heapSegments().isEmpty()) {
                if (!heaps.isEmpty() && !heaps.equals(new java.util.TreeSet<>(e.heapSegments()))) {
                    LOG.warn("client {}: memory nodes name different heap segments ({} and node {}: {}); membus.heap"
                            + ".segments must be the same on every memory node", config.nodeId(), heaps, e.nodeId(),
                            e.heapSegments());
                }
                heaps.addAll(e.heapSegments());
                heapNodes.add(e.nodeId());
            }
        }
        if (heaps.isEmpty()) {
            throw new io.membus.alloc.PlacementException("round-robin", config.nodeId(), "node " + config.nodeId()
                    + " is a client (it exports no memory) and no live member exports an allocator heap yet (members: "
                    + directory.entries().keySet() + "); start a memory node with membus.heap.segments, or wait for"
                    + " one (awaitMembers) and try again");
        }
        boolean closing = this.closing.getAsBoolean();
        String downReason = this.downReason.get();
        if (closing || downReason != null) { // shutdown reads the allocator under this lock after setting closing
            throw new io.membus.core.error.NodeUnavailableException(config.nodeId(), closing ? "this node is closed"
                    : "this node is down: " + downReason);
        }
        a = new GlobalAllocator(memory, AllocatorConfig.builder()
                .heapSegments(heaps.stream().mapToInt(Integer::intValue).toArray())
                .defaultPlacement(io.membus.alloc.Placement.roundRobin()).build());
        LOG.info("client {}: allocator places blocks on the memory nodes {} (heap segments {})", config.nodeId(),
                heapNodes, heaps);
        allocator = a;
        return a;
    }
}
