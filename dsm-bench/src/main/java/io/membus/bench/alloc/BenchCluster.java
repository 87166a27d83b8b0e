package io.membus.bench.alloc;

import io.membus.bench.BenchFiles;
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
 * Two nodes in this JVM over {@code local} or {@code shm}, each with a heap segment
 * (index 1) and a {@link GlobalAllocator}, sharing a {@link StaticDirectory}.
 *
 * <p><b>Note:</b> built and closed by one thread; the allocators are thread-safe.
 */
final class BenchCluster implements AutoCloseable {
    final List<Transport> transports = new ArrayList<>();
    final List<GlobalAllocator> allocators = new ArrayList<>();
    private final Path shmDir;

    BenchCluster(String transport, int nodes, long heapSize) {
        StaticDirectory directory = new StaticDirectory();
        String fabric = "alloc-bench-" + System.nanoTime();
        shmDir = Path.of("/dev/shm", "membus-alloc-bench-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        AllocatorConfig cfg = AllocatorConfig.builder().heapSegments(1).build();
        for (int id = 1; id <= nodes; id++) {
            Transport t = Transports.create(transport, TransportConfig.builder(id).property("local.fabric", fabric)
                    .property("shm.dir", shmDir.toString()).build());
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

    GlobalAllocator node(int id) {
        return allocators.get(id - 1);
    }

    @Override
    public void close() {
        allocators.forEach(GlobalAllocator::close);
        transports.forEach(Transport::close);
        BenchFiles.deleteTree(shmDir);
    }
}
