package io.membus.alloc;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Nodes of one JVM over the {@code local} transport sharing one
 * {@link StaticDirectory}, each exporting a non-heap segment 0 and a heap segment 1
 * and running a {@link GlobalAllocator}. Closed by the test (every transport and
 * allocator it made).
 *
 * <p><b>Note:</b> not thread-safe to build; the allocators it hands out are.
 */
final class AllocCluster implements AutoCloseable {
    static final int HEAP = 1;

    final StaticDirectory directory = new StaticDirectory();
    final String fabric = "alloc-" + System.nanoTime();
    final Map<Integer, Transport> transports = new TreeMap<>();
    final Map<Integer, GlobalAllocator> allocators = new TreeMap<>();
    private final List<AutoCloseable> closeables = new ArrayList<>();

    AllocCluster(int nodes, long heapSize, int chunkSize) {
        this(nodes, heapSize, AllocatorConfig.builder().heapSegments(HEAP).chunkSize(chunkSize).build());
    }

    AllocCluster(int nodes, long heapSize, AllocatorConfig config) {
        for (int id = 1; id <= nodes; id++) {
            addNode(id, heapSize, config);
        }
    }

    GlobalAllocator addNode(int id, long heapSize, AllocatorConfig config) {
        Transport t = Transports.create("local", TransportConfig.builder(id).property("local.fabric", fabric)
                .operationTimeout(Duration.ofSeconds(5)).build());
        closeables.add(t);
        transports.put(id, t);
        directory.addMember(t.self());
        directory.addSegment(t.export(SegmentSpec.of(0, 4096)).descriptor());
        Segment heap = t.export(SegmentSpec.of(HEAP, heapSize));
        GlobalAllocator a = new GlobalAllocator(new RemoteMemory(t, directory, Duration.ofSeconds(5)), config);
        closeables.add(0, a);
        a.formatLocalSegments();
        directory.addSegment(heap.descriptor());
        allocators.put(id, a);
        return a;
    }

    GlobalAllocator node(int id) {
        return allocators.get(id);
    }

    /** The node leaves: removed from the directory, its allocator dropped, its transport closed. */
    void leave(int id) {
        directory.removeMember(id, "test: node left");
        GlobalAllocator a = allocators.remove(id);
        Transport t = transports.remove(id);
        t.close();
        closeables.remove(t);
        closeables.remove(a);
        try {
            a.close(); // its own segments are gone: close is best effort and must not throw
        } catch (RuntimeException e) {
            throw new AssertionError("close after leaving threw", e);
        }
    }

    @Override
    public void close() {
        RuntimeException first = null;
        for (AutoCloseable c : closeables) {
            try {
                c.close();
            } catch (Exception e) {
                if (first == null) {
                    first = new RuntimeException("closing the test cluster", e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
