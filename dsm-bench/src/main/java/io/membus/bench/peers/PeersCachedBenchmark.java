package io.membus.bench.peers;

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
import org.openjdk.jmh.infra.BenchmarkParams;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The cached read beside its peer (issue 28: "counter and cached reads keep their lead"): a get
 * of a present {@code Long} key (of {@value PeersBenchmark#KEYS}, each holding a
 * {@value PeersBenchmark#VALUE_BYTES}-byte value) served from the client's cache: Membus'
 * leased read ({@code membus0}, {@code membus1}: {@code replication.backups} 0 or 1), Hazelcast's
 * near cache ({@code hazelcast}, one backup). See {@link CachedPeers}. Every key is read once
 * before the measurement (filling both caches); every get is checked (its value's first 8 bytes
 * are its key). Run at 1 and 8 threads ({@code -t}); {@code io.membus.bench.PeersTable} runs it
 * beside {@link PeersBenchmark}.
 *
 * <p><b>Note:</b> JMH state: the peer is shared by the benchmark threads; each has its own keys.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 2)
@Fork(1) // the peers' JVM flags come from BenchMain.forkFlags()
public class PeersCachedBenchmark {
    @Param({"membus0", "membus1", "hazelcast"})
    public String peer;

    private CachedPeers system;
    private final AtomicInteger threads = new AtomicInteger();

    @Setup(Level.Trial)
    public void setUp(BenchmarkParams params) {
        system = CachedPeers.start(peer);
        System.out.println("\n[peers] cachedGet on " + system.describe() + ", " + params.getThreads() + " thread(s)");
        for (long k = 0; k < PeersBenchmark.KEYS; k++) {
            system.put(k, PeersBenchmark.value(k, (byte) 1));
        }
        for (long k = 0; k < PeersBenchmark.KEYS; k++) {
            system.get(k); // fills the cache
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        system.close();
    }

    /** One benchmark thread's keys, seeded by its index (replayable). */
    @State(Scope.Thread)
    public static class Keys {
        SplittableRandom rnd;

        @Setup(Level.Trial)
        public void setUp(PeersCachedBenchmark b) {
            rnd = new SplittableRandom(28L * 1000 + 500 + b.threads.getAndIncrement());
        }
    }

    @Benchmark
    public byte[] cachedGet(Keys keys) {
        long k = keys.rnd.nextInt(PeersBenchmark.KEYS);
        byte[] v = system.get(k);
        if (v == null || v.length != PeersBenchmark.VALUE_BYTES || ByteBuffer.wrap(v).getLong(0) != k) {
            throw new IllegalStateException(peer + ": cached get(" + k + ") returned " + Arrays.toString(v));
        }
        return v;
    }
}
