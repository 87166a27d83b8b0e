package io.membus.samples.demo;

import com.typesafe.config.ConfigFactory;
import io.membus.cluster.DsmNode;
import io.membus.cluster.NodeConfig;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeUnavailableException;
import org.HdrHistogram.Histogram;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * One node of the demo: a {@link DsmNode} (Pekko cluster member, replicated
 * directory, transport) that exports one segment; on {@link #work} it increments a
 * counter word on the next node of the ring and a shared counter on node 1 with
 * fetch-and-add, writes blocks into the next node's segment and reads them back. It
 * finds every other node's segment in the replicated directory, nothing is passed to
 * it by hand.
 *
 * <pre>
 * segment 0 of every demo node:
 *   0     ring counter     (fetch-and-add by the previous node of the ring)
 *   8     shared counter   (node 1 only: fetch-and-add by every node)
 *   4096  block area       (writer w owns blocks [w-1]*blocks .. w*blocks-1)
 * </pre>
 *
 * <p><b>Note:</b> not thread-safe; one driver thread calls its methods in order.
 */
public final class DemoNode implements AutoCloseable {
    static final long RING_COUNTER = 0;
    static final long SHARED_COUNTER = 8;
    static final long BLOCK_AREA = 4096;
    static final String CLUSTER_NAME = "membus-demo";

    private final DsmNode node;

    /**
     * What a node did.
     *
     * @param nodeId         the node
     * @param pid            its process
     * @param ringTarget     the node whose ring counter it incremented
     * @param adds           fetch-and-adds issued (ring + shared)
     * @param blocksWritten  blocks written into the ring target
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
     * @param properties transport properties (shm.dir, local.fabric, tcp.*)
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
        m.put("membus.segments.count", 1);
        m.put("membus.segments.size", segmentSize);
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
     * Where writer {@code me}'s block {@code b} lives in the target's segment.
     *
     * <p>ALLOCATOR: this fixed layout is where the global allocator (dsm-alloc) plugs
     * in: allocate each block with the allocator's placement "explicit node" on the
     * ring target, keep the returned pointers, and free them after the check.
     */
    private static long blockPointer(SegmentDescriptor target, int me, int blocks, int blockSize, int b) {
        long base = BLOCK_AREA + (long) (me - 1) * blocks * blockSize;
        if (base + (long) blocks * blockSize > target.size()) {
            throw new DsmException(ErrorCode.OUT_OF_BOUNDS, "demo blocks do not fit: node=" + target.nodeId()
                    + ", segmentSize=" + target.size() + ", needed=" + (base + (long) blocks * blockSize)
                    + "; give the demo fewer --blocks or a smaller --block-size");
        }
        return target.pointer(base + (long) b * blockSize);
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
            mem.fetchAndAddSync(ring, 1);
            latency.recordValue(Math.max(1, System.nanoTime() - t0));
            mem.fetchAndAddSync(shared, 1);
            adds += 2;
        }
        List<CompletableFuture<Void>> writes = new ArrayList<>();
        for (int b = 0; b < blocks; b++) {
            writes.add(mem.write(blockPointer(next, me, blocks, blockSize, b), pattern(me, b, blockSize)));
        }
        writes.forEach(mem::await);
        long verified = 0;
        for (int b = 0; b < blocks; b++) {
            byte[] back = mem.readSync(blockPointer(next, me, blocks, blockSize, b), blockSize);
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

    @Override
    public void close() {
        node.close();
    }
}
