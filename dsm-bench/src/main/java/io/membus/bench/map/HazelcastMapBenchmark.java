package io.membus.bench.map;

import com.hazelcast.config.InMemoryFormat;
import com.hazelcast.config.NearCacheConfig;
import com.hazelcast.map.IMap;
import io.membus.bench.hazelcast.HazelcastPair;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.util.concurrent.TimeUnit;

/**
 * The Hazelcast 5.7 peer of {@link MapBenchmark}: two members and a client on this
 * machine (loopback, {@link HazelcastPair}), as Hazelcast recommends for a client-server comparison; the
 * client's {@code IMap<Long, Long>} holds the same {@value MapBenchmark#KEYS} entries.
 * {@code nearCachedGet} reads through a client near cache (Hazelcast's cached read,
 * invalidated by the members). Phone-home is off.
 *
 * <p><b>Note:</b> JMH state shared by the benchmark threads.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(1) // the peers' JVM flags come from BenchMain.forkFlags()
public class HazelcastMapBenchmark {
    private HazelcastPair hazelcast;
    private IMap<Long, Long> map;
    private IMap<Long, Long> near;

    @Setup(Level.Trial)
    public void setUp() {
        hazelcast = HazelcastPair.start(cc -> cc.addNearCacheConfig(new NearCacheConfig("near")
                .setInMemoryFormat(InMemoryFormat.OBJECT).setInvalidateOnChange(true)));
        map = hazelcast.client.getMap("plain");
        near = hazelcast.client.getMap("near");
        for (long k = 0; k < MapBenchmark.KEYS; k++) {
            map.put(k, k);
            near.put(k, k);
        }
        for (long k = 0; k < MapBenchmark.KEYS; k++) {
            near.get(k); // fill the near cache
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        hazelcast.close();
    }

    @Benchmark
    public Long get(MapBenchmark.Keys keys) {
        return map.get(keys.next());
    }

    @Benchmark
    public Long put(MapBenchmark.Keys keys) {
        long k = keys.next();
        return map.put(k, k + 1);
    }

    @Benchmark
    public Long putIfAbsent(MapBenchmark.Keys keys) {
        long k = keys.next();
        return map.putIfAbsent(k, k);
    }

    @Benchmark
    public Long nearCachedGet(MapBenchmark.Keys keys) {
        return near.get(keys.next());
    }
}
