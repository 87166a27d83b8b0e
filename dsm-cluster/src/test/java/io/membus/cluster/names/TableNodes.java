package io.membus.cluster.names;

import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
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
 * Nodes of one JVM over the {@code local} transport sharing a {@link StaticDirectory},
 * without Pekko: each exports a heap segment 0 and runs a {@link GlobalAllocator}; node 1
 * also exports the system segment 255 holding a formatted {@link NameTable}. Closed by
 * the test (every allocator and transport it made).
 *
 * <p><b>Note:</b> not thread-safe to build; the tables it hands out are.
 */
final class TableNodes implements AutoCloseable {
    static final int SYSTEM_SEGMENT = 255;
    static final Duration TIMEOUT = Duration.ofSeconds(5);
    /** Tags of the test cluster's secret (a keyed mix, pure like a MAC). */
    static final NameTags TAGS = tags(0x5eed_0001L);

    final StaticDirectory directory = new StaticDirectory();
    final String fabric = "names-" + System.nanoTime();
    final Map<Integer, Transport> transports = new TreeMap<>();
    final Map<Integer, RemoteMemory> memories = new TreeMap<>();
    final Map<Integer, GlobalAllocator> allocators = new TreeMap<>();
    final long table;
    final int capacity;
    private final List<AutoCloseable> closeables = new ArrayList<>();

    TableNodes(int nodes, int capacity) {
        this(nodes, capacity, Map.of());
    }

    /** {@code placements}: node id -> where that node's allocator places records (default: its own heap). */
    TableNodes(int nodes, int capacity, Map<Integer, Placement> placements) {
        this.capacity = capacity;
        for (int id = 1; id <= nodes; id++) {
            Transport t = Transports.create("local", TransportConfig.builder(id).property("local.fabric", fabric)
                    .operationTimeout(TIMEOUT).build());
            closeables.add(t);
            transports.put(id, t);
            directory.addMember(t.self());
        }
        for (int id = 1; id <= nodes; id++) {
            Transport t = transports.get(id);
            Segment heap = t.export(SegmentSpec.of(0, 4 << 20));
            RemoteMemory memory = new RemoteMemory(t, directory, TIMEOUT);
            memories.put(id, memory);
            GlobalAllocator a = new GlobalAllocator(memory, AllocatorConfig.builder().heapSegments(0)
                    .chunkSize(64 << 10).defaultPlacement(placements.getOrDefault(id, Placement.local())).build());
            closeables.add(0, a);
            a.formatLocalSegments();
            directory.addSegment(heap.descriptor());
            allocators.put(id, a);
        }
        Segment system = transports.get(1).export(SegmentSpec.of(SYSTEM_SEGMENT,
                (NameTable.bytesFor(capacity) + 4095) & ~4095L));
        directory.addSegment(system.descriptor());
        table = RemotePtr.pack(1, SYSTEM_SEGMENT, 0);
        NameTable.format(memories.get(1), table, capacity);
    }

    /** Node {@code id}'s view of the table, with the cluster's tags. */
    NameTable table(int id) {
        return table(id, TAGS);
    }

    NameTable table(int id, NameTags tags) {
        GlobalAllocator a = allocators.get(id);
        return NameTable.open(memories.get(id), () -> a, table, tags, TIMEOUT);
    }

    /** The raw slot words of the table, read through node 1. */
    long[] slots() {
        long[] out = new long[capacity];
        for (int i = 0; i < capacity; i++) {
            out[i] = memories.get(1).readLong(RemotePtr.plus(table, NameTable.HEADER + 8L * i));
        }
        return out;
    }

    /** Tags keyed by {@code key}: another key is another cluster secret. */
    static NameTags tags(long key) {
        return (name, root) -> {
            long h = key;
            for (int i = 0; i < name.length(); i++) {
                h = (h ^ name.charAt(i)) * 0x9e3779b97f4a7c15L;
            }
            long hi = (h ^ root) * 0xbf58476d1ce4e5b9L;
            return new long[]{hi, Long.rotateLeft(hi ^ key, 29) * 0x94d049bb133111ebL};
        };
    }

    @Override
    public void close() {
        RuntimeException first = null;
        for (AutoCloseable c : closeables) {
            try {
                c.close();
            } catch (Exception e) {
                if (first == null) {
                    first = new RuntimeException("closing the test nodes", e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
