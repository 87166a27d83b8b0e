package io.membus.collections;

import io.membus.core.test.TestFiles;
import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
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

/**
 * Nodes of one JVM over {@code local}, {@code shm} or {@code tcp} (127.0.0.1, ephemeral ports) sharing one
 * {@link StaticDirectory} (members, segments and names), each with a heap segment
 * 1, a {@link GlobalAllocator} and a {@link DsmCollections}. Closed by the test.
 *
 * <p><b>Note:</b> not thread-safe to build or change; the collections it hands out are.
 */
final class CollCluster implements AutoCloseable {
    static final int HEAP = 1;
    static final long HEAP_SIZE = 8L << 20;
    /** The cluster secret of the {@code tcp} transport (this JVM's nodes and the child processes). */
    static final String TCP_SECRET = "coll-test-secret-0123456789abcdef";

    final StaticDirectory directory = new StaticDirectory();
    final String transport;
    final String fabric = "coll-" + System.nanoTime();
    final Path shmDir;
    final Map<Integer, Transport> transports = new TreeMap<>();
    final Map<Integer, GlobalAllocator> allocators = new TreeMap<>();
    final Map<Integer, DsmCollections> nodes = new TreeMap<>();
    final Map<Integer, io.membus.core.SegmentDescriptor> heaps = new TreeMap<>();
    private final List<AutoCloseable> closeables = new ArrayList<>();

    CollCluster(String transport, int count) {
        this(transport, count, Duration.ofSeconds(10));
    }

    /** The nodes' operation timeout (transport and {@link RemoteMemory}). */
    final Duration operationTimeout;

    CollCluster(String transport, int count, Duration operationTimeout) {
        this.transport = transport;
        this.operationTimeout = operationTimeout;
        if (transport.equals("shm")) {
            Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm")
                    : Path.of(System.getProperty("java.io.tmpdir"));
            shmDir = root.resolve("membus-coll-test-" + System.nanoTime());
        } else {
            shmDir = null;
        }
        try {
            for (int id = 1; id <= count; id++) {
                addNode(id);
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    DsmCollections addNode(int id) {
        TransportConfig.Builder b = TransportConfig.builder(id).property("local.fabric", fabric)
                .operationTimeout(operationTimeout);
        if (shmDir != null) {
            b.property("shm.dir", shmDir.toString());
        }
        if (transport.equals("tcp")) {
            b.property("tcp.secret", TCP_SECRET).property("tcp.host", "127.0.0.1").property("tcp.port", "0")
                    // generous: on a loaded 2-core machine a child JVM's first handshake can take seconds
                    .property("tcp.handshake-timeout", "30s").connectTimeout(Duration.ofSeconds(30));
        }
        Transport t = Transports.create(transport, b.build());
        closeables.add(t);
        transports.put(id, t);
        directory.addMember(t.self());
        directory.addSegment(t.export(SegmentSpec.of(0, 4096)).descriptor());
        Segment heap = t.export(SegmentSpec.of(HEAP, HEAP_SIZE));
        RemoteMemory memory = new RemoteMemory(t, directory, operationTimeout);
        GlobalAllocator a = new GlobalAllocator(memory, AllocatorConfig.builder().heapSegments(HEAP)
                .chunkSize(64 << 10).build());
        closeables.add(0, a);
        a.formatLocalSegments();
        directory.addSegment(heap.descriptor());
        heaps.put(id, heap.descriptor());
        allocators.put(id, a);
        DsmCollections c = new DsmCollections(memory, a, directory);
        nodes.put(id, c);
        return c;
    }

    DsmCollections node(int id) {
        return nodes.get(id);
    }

    /**
     * The node is downed: removed from the directory (so other nodes see it is not a
     * live member) and its transport closed; its segments stay mapped nowhere.
     * Structures whose roots live on it become unreachable.
     */
    void down(int id) {
        directory.removeMember(id, "test: node downed");
        nodes.remove(id);
        GlobalAllocator a = allocators.remove(id);
        Transport t = transports.remove(id);
        closeables.remove(a);
        closeables.remove(t);
        a.close();
        t.close();
    }

    /** Nodes {@code a} and {@code b} drop each other's verbs and messages (a partition between them) until {@link #heal}. */
    void partition(int a, int b) {
        transports.get(a).faults().drop(b);
        transports.get(b).faults().drop(a);
    }

    /** Ends {@link #partition}{@code (a, b)}. */
    void heal(int a, int b) {
        transports.get(a).faults().heal(b);
        transports.get(b).faults().heal(a);
    }

    /** The node is removed from the directory only: its memory stays reachable (a process that died; memory that did not). */
    void forget(int id) {
        directory.removeMember(id, "test: node declared dead");
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
        closeables.clear();
        TestFiles.deleteTree(shmDir);
        if (first != null) {
            throw first;
        }
    }
}
