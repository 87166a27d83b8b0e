package io.membus.coherence;

import io.membus.core.test.TestFiles;
import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.message.Messaging;
import io.membus.core.time.SkewableClock;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.IntFunction;

/**
 * Nodes of one JVM over {@code local}, {@code shm} or {@code tcp} (loopback), sharing a {@link StaticDirectory},
 * each with a heap segment, an allocator, messages, a skewable clock and a
 * {@link CoherentHeap}. Closes everything it made.
 */
final class CoherenceCluster implements AutoCloseable {
    final StaticDirectory directory = new StaticDirectory();
    final Map<Integer, Transport> transports = new TreeMap<>();
    final Map<Integer, SkewableClock> clocks = new TreeMap<>();
    final Map<Integer, CoherentHeap> heaps = new TreeMap<>();
    final Map<Integer, Messaging> messagings = new TreeMap<>();
    private final List<AutoCloseable> closeables = new ArrayList<>();
    private final Path shmDir;

    CoherenceCluster(String transport, int nodes, IntFunction<CoherenceConfig> config, boolean messages) {
        String fabric = "coh-" + System.nanoTime();
        shmDir = transport.equals("shm") ? Path.of(Files.isDirectory(Path.of("/dev/shm")) ? "/dev/shm"
                : System.getProperty("java.io.tmpdir")).resolve("membus-coh-test-" + System.nanoTime()) : null;
        AllocatorConfig alloc = AllocatorConfig.builder().heapSegments(1).chunkSize(64 << 10).build();
        for (int id = 1; id <= nodes; id++) {
            TransportConfig.Builder b = TransportConfig.builder(id).property("local.fabric", fabric)
                    .operationTimeout(Duration.ofSeconds(5));
            if (shmDir != null) {
                b.property("shm.dir", shmDir.toString());
            }
            if (transport.equals("tcp")) {
                b.property("tcp.secret", "coherence-test-secret-0123456789").property("tcp.host", "127.0.0.1")
                        .property("tcp.port", "0").connectTimeout(Duration.ofSeconds(10));
            }
            Transport t = Transports.create(transport, b.build());
            closeables.add(0, t);
            transports.put(id, t);
            directory.addMember(t.self());
            Segment heap = t.export(SegmentSpec.of(1, 4 << 20));
            RemoteMemory memory = new RemoteMemory(t, directory, Duration.ofSeconds(5));
            GlobalAllocator a = new GlobalAllocator(memory, alloc);
            closeables.add(0, a);
            a.formatLocalSegments();
            directory.addSegment(heap.descriptor());
            SkewableClock clock = new SkewableClock();
            clocks.put(id, clock);
            Messaging m = messages ? new Messaging(memory) : null;
            if (m != null) {
                messagings.put(id, m);
            }
            CoherentHeap h = new CoherentHeap(a, m, clock, config.apply(id));
            closeables.add(0, h);
            heaps.put(id, h);
        }
    }

    CoherentHeap heap(int id) {
        return heaps.get(id);
    }

    @Override
    public void close() {
        for (AutoCloseable c : closeables) {
            try {
                c.close();
            } catch (Exception e) {
                System.err.println("closing " + c + ": " + e);
            }
        }
        TestFiles.deleteTree(shmDir);
    }
}
