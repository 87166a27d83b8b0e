package io.membus.bench;

import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.core.RemoteMemory;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Nodes 1..n of a benchmark in this JVM over {@code local}, {@code shm} or {@code tcp}
 * (loopback, ephemeral ports), each with a heap segment (index 1) and a
 * {@link GlobalAllocator} (whose {@link GlobalAllocator#memory()} is the node's
 * {@link RemoteMemory}), sharing a {@link StaticDirectory}; {@link #close()} closes them
 * and removes the shm directory.
 *
 * <p><b>Note:</b> built and closed by one thread (JMH's setup and teardown); the
 * allocators and memories it hands out are thread-safe.
 */
public final class BenchCluster implements AutoCloseable {
    public final List<Transport> transports = new ArrayList<>();
    public final List<GlobalAllocator> allocators = new ArrayList<>();
    public final StaticDirectory directory = new StaticDirectory();
    private final Path shmDir;

    /** {@code nodes} nodes of heaps of {@code heapSize} bytes; {@code name} names the fabric and the shm directory. */
    public BenchCluster(String transport, int nodes, long heapSize, String name) {
        String fabric = name + "-" + System.nanoTime();
        shmDir = Path.of("/dev/shm", "membus-" + name + "-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        AllocatorConfig cfg = AllocatorConfig.builder().heapSegments(1).build();
        for (int id = 1; id <= nodes; id++) {
            Transport t = Transports.create(transport, TransportConfig.builder(id).property("local.fabric", fabric)
                    .property("shm.dir", shmDir.toString()).property("tcp.secret", name + "-secret-0123456789abcdef")
                    .property("tcp.host", "127.0.0.1").property("tcp.port", "0").build());
            transports.add(t);
            directory.addMember(t.self());
            directory.addSegment(t.export(SegmentSpec.of(1, heapSize)).descriptor());
        }
        for (Transport t : transports) {
            GlobalAllocator a = new GlobalAllocator(new RemoteMemory(t, directory, Duration.ofSeconds(5)), cfg);
            a.formatLocalSegments();
            allocators.add(a);
        }
    }

    /** Node {@code id}'s allocator (1-based). */
    public GlobalAllocator node(int id) {
        return allocators.get(id - 1);
    }

    @Override
    public void close() {
        allocators.forEach(GlobalAllocator::close);
        transports.forEach(Transport::close);
        BenchFiles.deleteTree(shmDir);
    }
}
