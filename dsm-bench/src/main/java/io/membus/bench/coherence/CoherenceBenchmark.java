package io.membus.bench.coherence;

import io.membus.bench.BenchCluster;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.codec.Codecs;
import io.membus.coherence.CoherenceConfig;
import io.membus.coherence.CoherentHeap;
import io.membus.coherence.RemoteRef;
import io.membus.core.RemoteMemory;
import io.membus.core.message.Messaging;
import io.membus.core.time.Clock;
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
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The coherence layer beside its floors, one thread, average time per operation; four
 * nodes in this JVM over {@code local} or {@code shm}, objects on node 1, used from node 2:
 * <ul>
 *   <li>{@code cachedGet}: a {@code RemoteRef<Long>} read served under a lease, beside
 *       {@code chmGet}, {@code ConcurrentHashMap.get};</li>
 *   <li>{@code validatedGet}: the uncached read (two verbs: object, headers), beside
 *       {@code rawRead}, one verb reading the same bytes;</li>
 *   <li>{@code set0}, {@code set1}, {@code set3}: a write to an object cached by 0, 1
 *       or 3 other nodes (which refill it between writes, so every write invalidates them).</li>
 * </ul>
 *
 * <p><b>Note:</b> JMH state, one benchmark thread.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class CoherenceBenchmark {
    @Param({"local", "shm", "tcp"})
    public String transport;

    private BenchCluster cluster;
    private final List<CoherentHeap> heaps = new ArrayList<>();
    private RemoteRef<Long> cached;
    private RemoteRef<Long> uncached;
    private RemoteMemory memory2;
    private final List<List<RemoteRef<Long>>> sharedBy = new ArrayList<>();
    private final ConcurrentHashMap<Long, Long> chm = new ConcurrentHashMap<>();
    /** One object on node 1, opened by nodes 2, 3 and 4: the {@code updateContended} threads' handles. */
    private final List<RemoteRef<Long>> contended = new ArrayList<>();
    private final java.util.concurrent.atomic.AtomicInteger nextUpdater = new java.util.concurrent.atomic.AtomicInteger();
    private long value;

    @Setup(Level.Trial)
    public void setUp() {
        cluster = new BenchCluster(transport, 4, 16L << 20, "coh-bench");
        CoherenceConfig config = CoherenceConfig.defaults().withLeases(Duration.ofSeconds(1), Duration.ofSeconds(5))
                .withSkewCheck(false, Duration.ofSeconds(5));
        for (GlobalAllocator a : cluster.allocators) {
            heaps.add(new CoherentHeap(a, new Messaging(a.memory()), Clock.system(), config));
        }
        memory2 = new RemoteMemory(cluster.transports.get(1), cluster.directory, Duration.ofSeconds(5));
        RemoteRef<Long> obj = heaps.get(0).create(Codecs.longs(), 1L, Placement.node(1));
        cached = heaps.get(1).open(obj.ptr(), obj.generationHeader(), Codecs.longs());
        uncached = cached.cached(false);
        chm.put(1L, 1L);
        RemoteRef<Long> counter = heaps.get(0).create(Codecs.longs(), 0L, Placement.node(1));
        for (int n = 1; n <= 3; n++) {
            contended.add(heaps.get(n).open(counter.ptr(), counter.generationHeader(), Codecs.longs()));
        }
        for (int sharers = 0; sharers <= 3; sharers++) {
            RemoteRef<Long> o = heaps.get(0).create(Codecs.longs(), 0L, Placement.node(1));
            List<RemoteRef<Long>> refs = new ArrayList<>();
            refs.add(heaps.get(1).open(o.ptr(), o.generationHeader(), Codecs.longs()).cached(false)); // the writer
            for (int s = 0; s < sharers; s++) {
                refs.add(heaps.get(s == 0 ? 0 : s + 1).open(o.ptr(), o.generationHeader(), Codecs.longs()));
            }
            sharedBy.add(refs);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        heaps.forEach(CoherentHeap::close);
        cluster.close();
    }

    @Benchmark
    public Long cachedGet() {
        return cached.get();
    }

    @Benchmark
    public Long chmGet() {
        return chm.get(1L);
    }

    @Benchmark
    public Long validatedGet() {
        return uncached.get();
    }

    @Benchmark
    public byte[] rawRead() {
        return memory2.read(cached.ptr(), 8 + 40 + 2 * (8 + 32));
    }

    private long write(int sharers) {
        List<RemoteRef<Long>> refs = sharedBy.get(sharers);
        for (int s = 1; s < refs.size(); s++) {
            refs.get(s).get(); // the sharers cache it again (a fill each)
        }
        refs.get(0).set(++value);
        return value;
    }

    @Benchmark
    public long set0() {
        return write(0);
    }

    @Benchmark
    public long set1() {
        return write(1);
    }

    @Benchmark
    public long set3() {
        return write(3);
    }

    /** Which node's handle a thread of {@code updateContended} uses: threads take nodes 2, 3, 4 in turn. */
    @State(Scope.Thread)
    public static class Updater {
        int index = -1;
    }

    /**
     * {@code update(x -> x + 1)} on one object from three nodes at once (run with
     * {@code -t 3}: one thread per node): each update is a validated read, then the
     * write's lock CAS, which fails and retries when another node wrote in between.
     */
    @Benchmark
    public long updateContended(Updater u) {
        if (u.index < 0) {
            u.index = nextUpdater.getAndIncrement() % contended.size();
        }
        return contended.get(u.index).update(x -> x + 1);
    }
}
