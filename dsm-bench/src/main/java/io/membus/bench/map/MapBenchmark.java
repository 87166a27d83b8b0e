package io.membus.bench.map;

import io.membus.bench.BenchFiles;
import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.codec.Codecs;
import io.membus.collections.DsmCollections;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmMapOptions;
import io.membus.coherence.CoherenceConfig;
import io.membus.coherence.CoherentHeap;
import io.membus.core.message.Messaging;
import io.membus.core.time.Clock;
import io.membus.core.RemoteMemory;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * {@link DsmMap} operations per second beside {@code ConcurrentHashMap.get}: two nodes
 * in this JVM over {@code shm} or {@code tcp} (loopback; a third, a client without a heap,
 * runs the {@code bytes*} benchmarks), a map of {@value #KEYS}
 * {@code Long -> Long} entries created on node 1 and used from node 2, its table on
 * node 1 (so every lookup's window read crosses the transport); the entries node 2
 * writes go where {@code entries} says: {@code WRITER} (the default placement: node 2's
 * own heap) or {@code KEY} (spread over both nodes by key hash). Run with {@code -t 1} and
 * {@code -t 8} for the thread counts.
 *
 * <ul>
 *   <li>{@code get}: uncached get of a present key: over tcp its window's slot words and inline areas, two reads
 *       in one lane call (one round trip; a {@code Long -> Long} entry sits beside its slot); over shm the window's
 *       words and then the candidate's own inline area;</li>
 *   <li>{@code cachedGet}: get through a handle whose read cache holds every key (one 8-byte read of the slot word);</li>
 *   <li>{@code namedLeasedGet}: {@code leasedGet} on a named map opened through {@code DsmCollections} (as
 *       {@code Membus.map} opens it): the handle's destroyed-or-closed check comes on top (one volatile read,
 *       no clock; it read the clock before);</li>
 *   <li>{@code put}: overwrite of a present key through a handle without a read cache (window read, entry write,
 *       the slot's inline copy and the CAS linked to it);</li>
 *   <li>{@code cachedPut}: the same through a handle whose read cache holds the key's slot word (as the default
 *       options' cache does for the keys a node works on): the install alone, on the cached word;</li>
 *   <li>{@code putIfAbsent}: on a present key (the no-change path: a lookup);</li>
 *   <li>{@code bytesGet}, {@code bytesPut}: uncached get and overwrite on a {@code Long -> byte[valueBytes]}
 *       map (64-byte values by default: 72 bytes of key and value) made with the default options, from node 3,
 *       a client without a heap (issue 28's setting: its entries, and the table, are on the memory nodes);</li>
 *   <li>{@code chmGet}: {@code ConcurrentHashMap.get} on the same keys, the floor.</li>
 * </ul>
 *
 * <p><b>Note:</b> JMH state: the cluster and map are shared by the benchmark threads;
 * each thread has its own random keys.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(1)
public class MapBenchmark {
    static final int KEYS = 10_000;

    @Param({"shm", "tcp"})
    public String transport;

    /** Bytes of each value of the {@code bytes*} benchmarks' map ({@code Long -> byte[]}). */
    @Param({"64"})
    public int valueBytes;

    /**
     * {@code tcp.blocking-lanes} of every node (tcp only): blocking verbs to one peer that may
     * run on lanes at once; a verb that finds them all busy is posted on the pipelined channel.
     */
    @Param({"8"})
    public int lanes;

    /** {@link DsmMapOptions.EntryPlacement} of node 2's handles. */
    @Param({"WRITER"})
    public String entries;

    private final List<Transport> transports = new ArrayList<>();
    private final List<GlobalAllocator> allocators = new ArrayList<>();
    private Path shmDir;
    private DsmMap<Long, Long> map;
    private DsmMap<Long, Long> cached;
    private DsmMap<Long, Long> leased;
    private DsmMap<Long, Long> named;
    private DsmMap<Long, byte[]> bytes;
    private byte[] bytesValue;
    private final List<CoherentHeap> heaps = new ArrayList<>();
    private final ConcurrentHashMap<Long, Long> chm = new ConcurrentHashMap<>();

    /** Per-thread random keys. */
    @State(Scope.Thread)
    public static class Keys {
        private final SplittableRandom rnd = new SplittableRandom(Thread.currentThread().getId());

        long next() {
            return rnd.nextInt(KEYS);
        }
    }

    @Setup(Level.Trial)
    public void setUp() {
        StaticDirectory directory = new StaticDirectory();
        String fabric = "map-bench-" + System.nanoTime();
        shmDir = Path.of("/dev/shm", "membus-map-bench-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        AllocatorConfig cfg = AllocatorConfig.builder().heapSegments(1).build();
        for (int id = 1; id <= 3; id++) { // node 3: a client (no heap), for the bytes* benchmarks
            TransportConfig.Builder b = TransportConfig.builder(id).property("local.fabric", fabric)
                    .property("shm.dir", shmDir.toString()).operationTimeout(Duration.ofSeconds(10));
            if (transport.equals("tcp")) {
                b.property("tcp.secret", "map-bench-secret-0123456789abcdef").property("tcp.host", "127.0.0.1")
                        .property("tcp.port", "0").property("tcp.blocking-lanes", String.valueOf(lanes));
            }
            Transport t = Transports.create(transport, b.build());
            transports.add(t);
            directory.addMember(t.self());
            if (id <= 2) {
                directory.addSegment(t.export(SegmentSpec.of(1, 256L << 20)).descriptor());
            }
        }
        for (Transport t : transports) {
            GlobalAllocator a = new GlobalAllocator(new RemoteMemory(t, directory, Duration.ofSeconds(10)), cfg);
            if (t.self().nodeId() <= 2) {
                a.formatLocalSegments();
            }
            allocators.add(a);
        }
        // the table goes where placement puts it, which may be node 2 (then its gets run on a memory path):
        // make maps until one's table is on node 1, so node 2's lookups cross the transport in every run.
        // Sized for the keys, the table does not grow (and move) while it is filled.
        // (the maps passed over are destroyed only afterwards, so no new map reuses their blocks and placement)
        DsmMap<Long, Long> created = null;
        List<DsmMap<Long, Long>> passedOver = new ArrayList<>();
        for (int attempt = 0; created == null; attempt++) {
            DsmMap<Long, Long> m = DsmMap.create(allocators.get(0), Codecs.longs(), Codecs.longs(),
                    DsmMapOptions.defaults().initialSlots(1 << 16));
            if (m.tableNode() == 1) {
                created = m;
            } else if (attempt == 50) {
                throw new IllegalStateException("no map of 50 had its table on node 1");
            } else {
                passedOver.add(m);
            }
        }
        passedOver.forEach(DsmMap::destroy);
        DsmMapOptions.EntryPlacement placement = DsmMapOptions.EntryPlacement.valueOf(entries);
        map = DsmMap.open(allocators.get(1), created.rootPtr(), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().readCacheEntries(0).entryPlacement(placement));
        cached = DsmMap.open(allocators.get(1), created.rootPtr(), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().readCacheEntries(2 * KEYS).entryPlacement(placement));
        for (long k = 0; k < KEYS; k++) {
            map.put(k, k);
            chm.put(k, k);
        }
        if (map.tableNode() != 1) {
            throw new IllegalStateException("the table moved to node " + map.tableNode() + " while it was filled");
        }
        // a Long -> byte[valueBytes] map with the default options (what a user gets), its table on node 1 too
        DsmMap<Long, byte[]> bytesRoot = null;
        List<DsmMap<Long, byte[]>> bytesPassedOver = new ArrayList<>();
        for (int attempt = 0; bytesRoot == null; attempt++) {
            DsmMap<Long, byte[]> m = DsmMap.create(allocators.get(0), Codecs.longs(), Codecs.bytes(),
                    DsmMapOptions.defaults().initialSlots(1 << 16));
            if (m.tableNode() == 1) {
                bytesRoot = m;
            } else if (attempt == 50) {
                throw new IllegalStateException("no map of 50 had its table on node 1");
            } else {
                bytesPassedOver.add(m);
            }
        }
        bytesPassedOver.forEach(DsmMap::destroy);
        // used from node 3, a client: no heap of its own, so the entries are on the memory nodes (as a client's of
        // Membus are) and every get reads its window, and its entry when that is not beside its slot, remotely
        bytes = DsmMap.open(allocators.get(2), bytesRoot.rootPtr(), Codecs.longs(), Codecs.bytes(),
                DsmMapOptions.defaults().readCacheEntries(0).entryPlacement(placement));
        bytesValue = new byte[valueBytes];
        new SplittableRandom(valueBytes).nextBytes(bytesValue);
        for (long k = 0; k < KEYS; k++) {
            bytesRoot.put(k, bytesValue);
        }
        if (bytes.tableNode() != 1) {
            throw new IllegalStateException("the bytes map's table moved to node " + bytes.tableNode());
        }
        // a second map with leased reads: node 2's gets are served under its leases on the key stripes
        CoherenceConfig cc = CoherenceConfig.defaults().withLeases(Duration.ofSeconds(1), Duration.ofSeconds(5))
                .withSkewCheck(false, Duration.ofSeconds(5));
        for (GlobalAllocator a : allocators.subList(0, 2)) {
            heaps.add(new CoherentHeap(a, new Messaging(a.memory()), Clock.system(), cc));
        }
        DsmMap<Long, Long> leasedRoot = DsmMap.create(allocators.get(0), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().leasedReads(true).coherentHeap(heaps.get(0)));
        leased = DsmMap.open(allocators.get(1), leasedRoot.rootPtr(), Codecs.longs(), Codecs.longs(),
                DsmMapOptions.defaults().readCacheEntries(2 * KEYS).coherentHeap(heaps.get(1)));
        for (long k = 0; k < KEYS; k++) {
            leasedRoot.put(k, k);
        }
        // the same through named maps (DsmCollections, as Membus opens them): their handles check their life
        DsmCollections one = new DsmCollections(allocators.get(0).memory(), allocators.get(0), directory, heaps.get(0));
        DsmCollections two = new DsmCollections(allocators.get(1).memory(), allocators.get(1), directory, heaps.get(1));
        DsmMapOptions leasedNamed = DsmMapOptions.defaults().leasedReads(true).readCacheEntries(2 * KEYS);
        DsmMap<Long, Long> namedRoot = one.map("bench-leased", Codecs.longs(), Codecs.longs(), leasedNamed);
        for (long k = 0; k < KEYS; k++) {
            namedRoot.put(k, k);
        }
        named = two.map("bench-leased", Codecs.longs(), Codecs.longs(), leasedNamed);
    }

    /**
     * {@link #leasedGet} on a named map (opened through {@link DsmCollections}, as
     * {@code Membus.map} does): its handle checks that the map was not destroyed or closed
     * on every get.
     */
    @Benchmark
    public Long namedLeasedGet(Keys keys) {
        return named.get(keys.next());
    }

    /** A get of a map with leased reads: no verb while node 2 holds the key's stripe under a lease. */
    @Benchmark
    public Long leasedGet(Keys keys) {
        return leased.get(keys.next());
    }

    /** A put into a map with leased reads: the stripe's lock and invalidations come on top of the put. */
    @Benchmark
    public Long leasedPut(Keys keys) {
        long k = keys.next();
        return leased.put(k, k + 1);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        map.close();
        bytes.close();
        heaps.forEach(CoherentHeap::close);
        allocators.forEach(GlobalAllocator::close);
        transports.forEach(Transport::close);
        BenchFiles.deleteTree(shmDir);
    }

    @Benchmark
    public Long get(Keys keys) {
        return map.get(keys.next());
    }

    @Benchmark
    public Long put(Keys keys) {
        long k = keys.next();
        return map.put(k, k + 1);
    }

    @Benchmark
    public Long cachedPut(Keys keys) {
        long k = keys.next();
        return cached.put(k, k + 1);
    }

    @Benchmark
    public Long putIfAbsent(Keys keys) {
        long k = keys.next();
        return map.putIfAbsent(k, k);
    }

    @Benchmark
    public Long cachedGet(Keys keys) {
        return cached.get(keys.next());
    }

    /**
     * Uncached get of a {@code Long} key and a {@code valueBytes}-byte value (default options,
     * a handle without a read cache): the issue-28 case, 72 bytes of key and value.
     */
    @Benchmark
    public int bytesGet(Keys keys) {
        byte[] v = bytes.get(keys.next());
        if (v == null || v.length != valueBytes) {
            throw new IllegalStateException("bytesGet read " + (v == null ? "null" : v.length + " bytes"));
        }
        return v.length;
    }

    /** Overwrite of a present key with a {@code valueBytes}-byte value (default options, no read cache). */
    @Benchmark
    public byte[] bytesPut(Keys keys) {
        return bytes.put(keys.next(), bytesValue);
    }

    @Benchmark
    public Long chmGet(Keys keys) {
        return chm.get(keys.next());
    }
}
