package io.membus.bench.collections;

import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.codec.Codecs;
import io.membus.collections.DsmCollections;
import io.membus.collections.DsmQueue;
import io.membus.collections.QueueOptions;
import io.membus.core.RemoteMemory;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A {@link DsmQueue} offer then poll of a {@code byte[]} element (issue 28), by slot
 * size: {@code slotBytes=64} is the default before issue 28 (56 inline bytes: a 64-byte
 * element goes to an allocator block, allocated by the offer and freed by the poll),
 * {@code 264} the default since (256 inline: two round trips each, no allocation). Two
 * nodes in the JMH fork over {@code tcp} (loopback) or {@code local}; the queue's root is
 * on node 1, the operations run on node 2, so every verb crosses the transport, and node 2
 * places its blocks on node 1 (as a client places them on the memory nodes), so a large
 * element's block is remote too.
 *
 * <pre>
 * java -jar dsm-bench/target/benchmarks.jar QueueSlotBenchmark -f 1 -wi 2 -w 1s -i 3 -r 1s -t 1
 * java -jar dsm-bench/target/benchmarks.jar QueueSlotBenchmark -f 1 -wi 2 -w 1s -i 3 -r 1s -t 8
 * </pre>
 *
 * <p><b>Note:</b> JMH state shared by the benchmark threads (the queue is thread-safe).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class QueueSlotBenchmark {
    @Param({"tcp"})
    public String transport;

    @Param({"64", "264"})
    public int slotBytes;

    @Param({"64"})
    public int elementBytes;

    private final List<Transport> transports = new ArrayList<>();
    private final List<GlobalAllocator> allocators = new ArrayList<>();
    private DsmQueue<byte[]> queue;
    private byte[] element;

    @Setup(Level.Trial)
    public void setUp() {
        element = new byte[elementBytes];
        StaticDirectory directory = new StaticDirectory();
        String fabric = "queue-slot-bench-" + System.nanoTime();
        for (int id = 1; id <= 2; id++) {
            Transport t = Transports.create(transport, TransportConfig.builder(id).property("local.fabric", fabric)
                    .property("tcp.secret", "queue-slot-bench-secret-0123456789")
                    .property("tcp.host", "127.0.0.1").property("tcp.port", "0").build());
            transports.add(t);
            directory.addMember(t.self());
            directory.addSegment(t.export(SegmentSpec.of(1, 32L << 20)).descriptor());
        }
        DsmCollections node2 = null;
        for (Transport t : transports) {
            RemoteMemory memory = new RemoteMemory(t, directory, Duration.ofSeconds(5));
            // node 2 places its blocks on node 1, as a Membus client (no memory of its own) places them on the
            // memory nodes: a large element's block is then remote, as in issue 28's measurement
            AllocatorConfig.Builder config = AllocatorConfig.builder().heapSegments(1);
            if (t.nodeId() == 2) {
                config.defaultPlacement(Placement.node(1));
            }
            GlobalAllocator a = new GlobalAllocator(memory, config.build());
            a.formatLocalSegments();
            allocators.add(a);
            node2 = new DsmCollections(memory, a, directory);
        }
        for (int i = 0; i < 64 && queue == null; i++) {
            DsmQueue<byte[]> q = node2.queue("bench-slot-queue-" + i, Codecs.bytes(),
                    QueueOptions.capacity(1024).slotBytes(slotBytes));
            if (q.root().block().nodeId() == 1) {
                queue = q;
            }
        }
        if (queue == null) {
            throw new IllegalStateException("none of 64 names placed on node 1");
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        allocators.forEach(GlobalAllocator::close);
        transports.forEach(Transport::close);
    }

    @Benchmark
    public byte[] offerPoll() {
        queue.offer(element);
        return queue.poll();
    }
}
