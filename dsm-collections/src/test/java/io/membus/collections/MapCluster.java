package io.membus.collections;

import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * Nodes of one JVM over {@code local}, {@code shm} or {@code tcp} (loopback, ephemeral ports) sharing one {@link StaticDirectory},
 * each exporting a heap segment 1 with a {@link GlobalAllocator}: the cluster the map
 * tests run on. Closes everything it made, and removes its /dev/shm directory.
 *
 * <p><b>Note:</b> not thread-safe to build; the allocators it hands out are.
 */
final class MapCluster implements AutoCloseable {
    static final int HEAP = 1;
    static final String TCP_SECRET = "map-test-secret-0123456789abcdef";

    final StaticDirectory directory = new StaticDirectory();
    final String fabric = "map-" + System.nanoTime();
    final Path shmDir;
    final String transport;
    final Map<Integer, GlobalAllocator> allocators = new TreeMap<>();
    final Map<Integer, Transport> transports = new TreeMap<>();
    final Map<Integer, io.membus.core.SegmentDescriptor> heaps = new TreeMap<>();
    private final List<AutoCloseable> closeables = new ArrayList<>();
    /** Removes the /dev/shm directory if the JVM ends (e.g. a build timeout) before {@link #close()} did. */
    private final Thread cleanup;

    MapCluster(String transport, int nodes, long heapSize) {
        this(transport, nodes, heapSize, Duration.ofSeconds(10));
    }

    /** Nodes whose verbs time out after {@code operationTimeout}. */
    MapCluster(String transport, int nodes, long heapSize, Duration operationTimeout) {
        this(transport, nodes, heapSize, operationTimeout, (id, t) -> t);
    }

    /** Nodes whose transports are wrapped by {@code wrap} (node id, transport): tests that count verbs. */
    MapCluster(String transport, int nodes, long heapSize, Duration operationTimeout,
               java.util.function.BiFunction<Integer, Transport, Transport> wrap) {
        this(transport, nodes, heapSize, operationTimeout, wrap, id -> false);
    }

    /**
     * Nodes whose transports are wrapped by {@code wrap}; the nodes {@code client} picks export
     * no heap segment (clients: their map entries go to the other nodes).
     */
    MapCluster(String transport, int nodes, long heapSize, Duration operationTimeout,
               java.util.function.BiFunction<Integer, Transport, Transport> wrap, java.util.function.IntPredicate client) {
        this.transport = transport;
        if (transport.equals("shm")) {
            Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm")
                    : Path.of(System.getProperty("java.io.tmpdir"));
            shmDir = root.resolve("membus-map-test-" + System.nanoTime());
        } else {
            shmDir = null;
        }
        cleanup = shmDir == null ? null : new Thread(this::removeShmDir, "map-test-shm-cleanup");
        if (cleanup != null) {
            Runtime.getRuntime().addShutdownHook(cleanup);
        }
        AllocatorConfig config = AllocatorConfig.builder().heapSegments(HEAP).chunkSize(64 << 10).build();
        for (int id = 1; id <= nodes; id++) {
            TransportConfig.Builder b = TransportConfig.builder(id).property("local.fabric", fabric)
                    .operationTimeout(operationTimeout);
            if (shmDir != null) {
                b.property("shm.dir", shmDir.toString());
            }
            if (transport.equals("tcp")) {
                b.property("tcp.secret", TCP_SECRET).property("tcp.host", "127.0.0.1")
                        .property("tcp.port", "0").connectTimeout(Duration.ofSeconds(10));
            }
            Transport t = wrap.apply(id, Transports.create(transport, b.build()));
            closeables.add(t);
            transports.put(id, t);
            directory.addMember(t.self());
            Segment heap = client.test(id) ? null : t.export(SegmentSpec.of(HEAP, heapSize));
            RemoteMemory memory = new RemoteMemory(t, directory, operationTimeout);
            GlobalAllocator a = new GlobalAllocator(memory, config);
            closeables.add(0, a);
            if (heap != null) {
                a.formatLocalSegments();
                directory.addSegment(heap.descriptor());
                heaps.put(id, heap.descriptor());
            }
            allocators.put(id, a);
        }
    }

    private void removeShmDir() {
        if (!Files.exists(shmDir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(shmDir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            System.err.println("could not remove " + shmDir + ": " + e);
        }
    }

    GlobalAllocator node(int id) {
        return allocators.get(id);
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
        if (cleanup != null) {
            removeShmDir();
            try {
                Runtime.getRuntime().removeShutdownHook(cleanup);
            } catch (IllegalStateException e) {
                // the JVM is already shutting down: the hook runs (and finds nothing left)
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
