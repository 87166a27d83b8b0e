package io.membus.samples.demo;

import com.typesafe.config.ConfigFactory;
import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.cluster.DsmNode;
import io.membus.cluster.NodeConfig;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import org.HdrHistogram.Histogram;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One node of the demo: a {@link DsmNode} (Pekko cluster member, replicated
 * directory, transport, global allocator) that exports two segments; on {@link #work}
 * it increments a counter word on the next node of the ring and a shared counter on
 * node 1 with fetch-and-add, allocates blocks in the next node's heap with the
 * global allocator, writes them and reads them back. It finds every other node's
 * segments in the replicated directory; nothing is passed to it by hand.
 *
 * <pre>
 * segment 0 of every demo node (raw words):
 *   0     ring counter     (fetch-and-add by the previous node of the ring)
 *   8     shared counter   (node 1 only: fetch-and-add by every node)
 * segment 1 of every demo node: a heap of the global allocator (membus.heap.segments = [1])
 * </pre>
 *
 * <p><b>Note:</b> not thread-safe; one driver thread calls its methods in order.
 */
public final class DemoNode implements AutoCloseable {
    static final long RING_COUNTER = 0;
    static final long SHARED_COUNTER = 8;
    static final int HEAP_SEGMENT = 1;
    static final int HEAP_CHUNK = 64 << 10;
    static final String CLUSTER_NAME = "membus-demo";

    private final DsmNode node;
    private final List<BlockRef> blocks = new ArrayList<>();

    /**
     * What a node did.
     *
     * @param nodeId         the node
     * @param pid            its process
     * @param ringTarget     the node whose ring counter it incremented
     * @param adds           fetch-and-adds issued (ring + shared)
     * @param blocksWritten  blocks allocated in the ring target's heap and written
     * @param blocksVerified blocks read back and found equal
     * @param p50Micros      median fetch-and-add latency
     * @param p99Micros      99th percentile fetch-and-add latency
     * @param millis         time of the work
     */
    public record Result(int nodeId, long pid, int ringTarget, long adds, long blocksWritten, long blocksVerified,
                         double p50Micros, double p99Micros, long millis) {
        String encode() {
            return String.join("|", Integer.toString(nodeId), Long.toString(pid), Integer.toString(ringTarget),
                    Long.toString(adds), Long.toString(blocksWritten), Long.toString(blocksVerified),
                    Double.toString(p50Micros), Double.toString(p99Micros), Long.toString(millis));
        }

        static Result decode(String s) {
            String[] f = s.split("\\|");
            return new Result(Integer.parseInt(f[0]), Long.parseLong(f[1]), Integer.parseInt(f[2]),
                    Long.parseLong(f[3]), Long.parseLong(f[4]), Long.parseLong(f[5]), Double.parseDouble(f[6]),
                    Double.parseDouble(f[7]), Long.parseLong(f[8]));
        }
    }

    /**
     * Starts the node and joins the demo cluster.
     *
     * @param port       this node's Pekko port (0: ephemeral)
     * @param seedPort   node 1's Pekko port, the seed every node joins
     * @param segmentSize bytes of each of the node's two segments (the second is its heap)
     * @param properties  transport properties (shm.dir, local.fabric, tcp.*)
     */
    public DemoNode(String transport, int nodeId, int port, int seedPort, long segmentSize,
                    Map<String, String> properties) {
        Map<String, Object> m = new HashMap<>();
        m.put("membus.node-id", nodeId);
        m.put("membus.cluster-name", CLUSTER_NAME);
        m.put("membus.host", "127.0.0.1");
        m.put("membus.port", port);
        m.put("membus.seed-nodes", List.of("127.0.0.1:" + seedPort));
        m.put("membus.transport", transport);
        m.put("membus.transport-properties", properties);
        m.put("membus.operation-timeout", "10s");
        m.put("membus.segments.count", 2);
        m.put("membus.segments.size", segmentSize);
        m.put("membus.heap.segments", List.of(HEAP_SEGMENT));
        m.put("membus.heap.chunk-size", HEAP_CHUNK);
        // a demo on one machine: form and converge quickly
        m.put("membus.failure-detection.gossip-interval", "200ms");
        m.put("pekko.cluster.seed-node-timeout", "1s");
        m.put("pekko.cluster.retry-unsuccessful-join-after", "1s");
        m.put("pekko.loglevel", "WARNING");
        this.node = DsmNode.start(NodeConfig.from(ConfigFactory.parseMap(m)));
    }

    /** Waits until the directory shows {@code nodes} members with their segments. */
    public void awaitCluster(int nodes, Duration timeout) {
        node.awaitMembers(nodes, timeout);
    }

    public String statusLine() {
        return node.statusLine();
    }

    /** The ring and shared counters in this node's own segment. */
    public long[] counters() {
        Segment s = node.localSegment(0);
        return new long[]{s.readLong(RING_COUNTER), s.readLong(SHARED_COUNTER)};
    }

    private SegmentDescriptor segmentOf(int nodeId) {
        return node.directory().segment(nodeId, 0).orElseThrow(() -> new NodeUnavailableException(nodeId,
                "no segment 0 of node " + nodeId + " in the directory; is it running?"));
    }

    /**
     * Bytes a demo node's segments need so that its heap holds the {@code blocks}
     * blocks of {@code blockSize} its ring predecessor allocates there, with room for
     * the chunk table and for size-class batches cached by the allocating node.
     */
    public static long segmentSizeFor(int blocks, int blockSize) {
        long perBlock = blockSize <= HEAP_CHUNK / 4
                ? Long.highestOneBit(blockSize + 63L) << 1
                : (blockSize + 63L + HEAP_CHUNK - 1) / HEAP_CHUNK * HEAP_CHUNK;
        long bytes = 2 * blocks * perBlock + 16L * HEAP_CHUNK;
        return (bytes + HEAP_CHUNK - 1) / HEAP_CHUNK * HEAP_CHUNK;
    }

    /** Does the demo's work against the cluster of {@code nodes} nodes (1..nodes). */
    public Result work(int nodes, int ops, int blocks, int blockSize) {
        int me = node.nodeId();
        int nextId = me % nodes + 1;
        SegmentDescriptor next = segmentOf(nextId);
        SegmentDescriptor first = segmentOf(1);
        RemoteMemory mem = node.remoteMemory();
        Histogram latency = new Histogram(60_000_000_000L, 3);
        long start = System.nanoTime();
        long adds = 0;
        long ring = next.pointer(RING_COUNTER);
        long shared = first.pointer(SHARED_COUNTER);
        for (int i = 0; i < ops; i++) {
            long t0 = System.nanoTime();
            mem.fetchAndAdd(ring, 1);
            latency.recordValue(Math.max(1, System.nanoTime() - t0));
            mem.fetchAndAdd(shared, 1);
            adds += 2;
        }
        GlobalAllocator alloc = node.allocator();
        Placement onNext = Placement.node(nextId);
        for (int b = 0; b < blocks; b++) {
            BlockRef ref = alloc.allocate(blockSize, onNext);
            this.blocks.add(ref);
            alloc.write(ref, 0, pattern(me, b, blockSize));
        }
        long verified = 0;
        for (int b = 0; b < blocks; b++) {
            byte[] back = alloc.read(this.blocks.get(b), 0, blockSize);
            if (Arrays.equals(back, pattern(me, b, blockSize))) {
                verified++;
            }
        }
        long millis = (System.nanoTime() - start) / 1_000_000;
        return new Result(me, ProcessHandle.current().pid(), nextId, adds, blocks, verified,
                latency.getValueAtPercentile(50) / 1000.0, latency.getValueAtPercentile(99) / 1000.0, millis);
    }

    /** The bytes writer {@code writer} puts in its block {@code block}: recognisable, never all zero. */
    static byte[] pattern(int writer, int block, int size) {
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) {
            b[i] = (byte) (writer * 31 + block * 7 + i + 1);
        }
        return b;
    }

    public int nodeId() {
        return node.nodeId();
    }

    /** The heap usage of the whole cluster, as this node reads it from every chunk table. */
    public String heapUsage() {
        return node.allocator().usage().format();
    }

    /**
     * Frees this node's blocks (they live in the next node's heap). The demo asks every
     * node to do this before any node leaves, so no block outlives the heap it is in.
     *
     * @return the number of blocks freed
     */
    public int freeBlocks() {
        int freed = 0;
        try {
            for (BlockRef ref : blocks) {
                node.allocator().free(ref);
                freed++;
            }
        } finally {
            blocks.clear();
        }
        return freed;
    }

    /** Frees the blocks still held (after a failed run), then leaves the cluster. */
    @Override
    public void close() {
        try {
            freeBlocks();
        } catch (DsmException e) {
            System.err.println("demo node " + node.nodeId() + ": freeing its blocks failed: " + e.getMessage());
        } finally {
            node.close();
        }
    }
}
