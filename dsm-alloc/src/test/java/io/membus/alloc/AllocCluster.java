package io.membus.alloc;

import io.membus.core.test.TestFiles;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.directory.StaticDirectory;
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
import java.util.function.Function;

/**
 * Nodes of one JVM over the {@code local} (or {@code shm}) transport sharing one
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
    final String transport;
    final Path shmDir;
    final Map<Integer, Transport> transports = new TreeMap<>();
    final Map<Integer, GlobalAllocator> allocators = new TreeMap<>();
    private final List<AutoCloseable> closeables = new ArrayList<>();

    AllocCluster(int nodes, long heapSize, int chunkSize) {
        this(nodes, heapSize, AllocatorConfig.builder().heapSegments(HEAP).chunkSize(chunkSize).build());
    }

    AllocCluster(int nodes, long heapSize, AllocatorConfig config) {
        this("local", nodes, heapSize, config);
    }

    /** Nodes over {@code transport} ({@code local} or {@code shm}; shm files go to a fresh directory under /dev/shm). */
    AllocCluster(String transport, int nodes, long heapSize, AllocatorConfig config) {
        this.transport = transport;
        if (transport.equals("shm")) {
            Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm")
                    : Path.of(System.getProperty("java.io.tmpdir"));
            shmDir = root.resolve("membus-alloc-test-" + System.nanoTime());
        } else {
            shmDir = null;
        }
        for (int id = 1; id <= nodes; id++) {
            addNode(id, heapSize, config);
        }
    }

    GlobalAllocator addNode(int id, long heapSize, AllocatorConfig config) {
        return addNode(id, heapSize, config, Remote::new);
    }

    /** A node whose allocator issues its verbs through {@code remotes} (a fault-injecting {@link Remote}). */
    GlobalAllocator addNode(int id, long heapSize, AllocatorConfig config, Function<RemoteMemory, Remote> remotes) {
        TransportConfig.Builder b = TransportConfig.builder(id).property("local.fabric", fabric)
                .operationTimeout(Duration.ofSeconds(5));
        if (shmDir != null) {
            b.property("shm.dir", shmDir.toString());
        }
        Transport t = Transports.create(transport, b.build());
        closeables.add(t);
        transports.put(id, t);
        directory.addMember(t.self());
        directory.addSegment(t.export(SegmentSpec.of(0, 4096)).descriptor());
        Segment heap = t.export(SegmentSpec.of(HEAP, heapSize));
        RemoteMemory memory = new RemoteMemory(t, directory, Duration.ofSeconds(5));
        GlobalAllocator a = new GlobalAllocator(memory, config, remotes.apply(memory));
        closeables.add(0, a);
        a.formatLocalSegments();
        directory.addSegment(heap.descriptor());
        allocators.put(id, a);
        return a;
    }

    /**
     * A client node: a member that exports no segment, with an allocator that places its
     * blocks on the other nodes (it formats nothing).
     */
    GlobalAllocator addClient(int id, AllocatorConfig config) {
        TransportConfig.Builder b = TransportConfig.builder(id).property("local.fabric", fabric)
                .operationTimeout(Duration.ofSeconds(5));
        if (shmDir != null) {
            b.property("shm.dir", shmDir.toString());
        }
        Transport t = Transports.create(transport, b.build());
        closeables.add(t);
        transports.put(id, t);
        directory.addMember(t.self());
        GlobalAllocator a = new GlobalAllocator(new RemoteMemory(t, directory, Duration.ofSeconds(5)), config);
        closeables.add(0, a);
        allocators.put(id, a);
        return a;
    }

    /**
     * The node's allocator is closed and a new one opened on the same transport, as a
     * restarted process that reuses its (file-backed) heap would: it knows nothing of
     * the chunks the old one claimed. {@code close} returns the old one's cached blocks.
     */
    GlobalAllocator reopen(int id, AllocatorConfig config) {
        GlobalAllocator old = allocators.get(id);
        old.close();
        closeables.remove(old);
        GlobalAllocator a = new GlobalAllocator(old.memory(), config);
        closeables.add(0, a);
        a.formatLocalSegments();
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
        TestFiles.deleteTree(shmDir);
        if (first != null) {
            throw first;
        }
    }
}
