package io.membus.samples.demo;

import io.membus.core.Access;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.transport.Connection;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import io.membus.core.RemoteMemory;
import org.HdrHistogram.Histogram;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * One node of the demo: exports a segment, then (on {@link #work}) increments a
 * counter word on the next node of the ring and a shared counter on node 1 with
 * fetch-and-add, writes blocks into the next node's segment and reads them back.
 *
 * <pre>
 * segment layout of every demo node:
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

    private final Transport transport;
    private final Segment segment;

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

    /** A peer as the coordinator passes it on: where it is and its segment. */
    public record Peer(PeerInfo info, SegmentDescriptor segment) {
        String encode() {
            return info.nodeId() + "|" + info.incarnation() + "|" + info.address() + "|" + segment.size() + "|"
                    + segment.flags() + "|" + segment.remoteKey();
        }

        static Peer decode(String s) {
            String[] f = s.split("\\|");
            int id = Integer.parseInt(f[0]);
            long inc = Long.parseLong(f[1]);
            return new Peer(new PeerInfo(id, inc, f[2]), new SegmentDescriptor(id, inc, 0, Long.parseLong(f[3]),
                    Integer.parseInt(f[4]), Long.parseLong(f[5])));
        }
    }

    public DemoNode(String transportName, int nodeId, long segmentSize, Map<String, String> properties) {
        TransportConfig config = TransportConfig.builder(nodeId).operationTimeout(Duration.ofSeconds(10))
                .properties(properties).build();
        this.transport = Transports.create(transportName, config);
        try {
            this.segment = transport.export(new SegmentSpec(0, segmentSize, Access.ALL, null));
        } catch (RuntimeException e) {
            transport.close();
            throw e;
        }
    }

    /** This node as the coordinator tells the others about it. */
    public Peer self() {
        return new Peer(transport.self(), segment.descriptor());
    }

    /** The ring and shared counters in this node's own segment. */
    public long[] counters() {
        return new long[]{segment.readLong(RING_COUNTER), segment.readLong(SHARED_COUNTER)};
    }

    /** Does the demo's work against the peers (all nodes, this one included). */
    public Result work(List<Peer> peers, int ops, int blocks, int blockSize) {
        int n = peers.size();
        int me = transport.nodeId();
        Peer next = peers.get(me % n); // nodes are 1..n, in order
        Peer first = peers.get(0);
        Connection toNext = connect(next.info());
        Connection toFirst = connect(first.info());
        Histogram latency = new Histogram(60_000_000_000L, 3);
        long start = System.nanoTime();
        long adds = 0;
        for (int i = 0; i < ops; i++) {
            long t0 = System.nanoTime();
            RemoteMemory.await(toNext.fetchAndAdd(next.segment().pointer(RING_COUNTER), next.segment().remoteKey(), 1),
                    Duration.ofSeconds(15));
            latency.recordValue(Math.max(1, System.nanoTime() - t0));
            RemoteMemory.await(toFirst.fetchAndAdd(first.segment().pointer(SHARED_COUNTER),
                    first.segment().remoteKey(), 1), Duration.ofSeconds(15));
            adds += 2;
        }
        long base = BLOCK_AREA + (long) (me - 1) * blocks * blockSize;
        if (base + (long) blocks * blockSize > next.segment().size()) {
            throw new DsmException(ErrorCode.OUT_OF_BOUNDS, "demo blocks do not fit: node=" + next.info().nodeId()
                    + ", segmentSize=" + next.segment().size() + ", needed=" + (base + (long) blocks * blockSize)
                    + "; give the demo a larger --segment-size or fewer --blocks");
        }
        List<CompletableFuture<Void>> writes = new ArrayList<>();
        for (int b = 0; b < blocks; b++) {
            writes.add(toNext.write(next.segment().pointer(base + (long) b * blockSize), next.segment().remoteKey(),
                    pattern(me, b, blockSize)));
        }
        writes.forEach(w -> RemoteMemory.await(w, Duration.ofSeconds(15)));
        long verified = 0;
        for (int b = 0; b < blocks; b++) {
            byte[] back = RemoteMemory.await(toNext.read(next.segment().pointer(base + (long) b * blockSize),
                    next.segment().remoteKey(), blockSize), Duration.ofSeconds(15));
            if (Arrays.equals(back, pattern(me, b, blockSize))) {
                verified++;
            }
        }
        long millis = (System.nanoTime() - start) / 1_000_000;
        return new Result(me, ProcessHandle.current().pid(), next.info().nodeId(), adds, blocks, verified,
                latency.getValueAtPercentile(50) / 1000.0, latency.getValueAtPercentile(99) / 1000.0, millis);
    }

    private Connection connect(PeerInfo peer) {
        return RemoteMemory.await(transport.connect(peer), Duration.ofSeconds(15));
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
        return transport.nodeId();
    }

    /** Pointer to the ring counter of this node, for the table. */
    public long ringCounterPointer() {
        return RemotePtr.pack(nodeId(), 0, RING_COUNTER);
    }

    @Override
    public void close() {
        transport.close();
    }
}
