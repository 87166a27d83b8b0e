package io.membus.bench.map;

import com.hazelcast.client.HazelcastClient;
import com.hazelcast.client.config.ClientConfig;
import com.hazelcast.config.Config;
import com.hazelcast.config.InMemoryFormat;
import com.hazelcast.config.JoinConfig;
import com.hazelcast.config.NearCacheConfig;
import com.hazelcast.core.Hazelcast;
import com.hazelcast.core.HazelcastInstance;
import com.hazelcast.map.IMap;
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

import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The Hazelcast 5.7 peer of {@link MapBenchmark}: two members and a client on this
 * machine (loopback), as Hazelcast recommends for a client-server comparison; the
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
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "java.se",
        "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
        "--add-opens", "java.base/java.lang=ALL-UNNAMED",
        "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
        "--add-opens", "java.management/sun.management=ALL-UNNAMED",
        "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
        "-Dhazelcast.phone.home.enabled=false", "-Dhazelcast.logging.type=none"})
public class HazelcastMapBenchmark {
    private HazelcastInstance member1;
    private HazelcastInstance member2;
    private HazelcastInstance client;
    private IMap<Long, Long> map;
    private IMap<Long, Long> near;

    @Setup(Level.Trial)
    public void setUp() {
        String cluster = "membus-bench-" + ProcessHandle.current().pid();
        member1 = Hazelcast.newHazelcastInstance(memberConfig(cluster));
        member2 = Hazelcast.newHazelcastInstance(memberConfig(cluster));
        ClientConfig cc = new ClientConfig();
        cc.setClusterName(cluster);
        cc.getNetworkConfig().setAddresses(List.of(address(member1), address(member2)));
        cc.addNearCacheConfig(new NearCacheConfig("near").setInMemoryFormat(InMemoryFormat.OBJECT)
                .setInvalidateOnChange(true));
        client = HazelcastClient.newHazelcastClient(cc);
        map = client.getMap("plain");
        near = client.getMap("near");
        for (long k = 0; k < MapBenchmark.KEYS; k++) {
            map.put(k, k);
            near.put(k, k);
        }
        for (long k = 0; k < MapBenchmark.KEYS; k++) {
            near.get(k); // fill the near cache
        }
    }

    private static String address(HazelcastInstance member) {
        return "127.0.0.1:" + member.getCluster().getLocalMember().getAddress().getPort();
    }

    private static Config memberConfig(String cluster) {
        Config c = new Config();
        c.setClusterName(cluster);
        c.setProperty("hazelcast.phone.home.enabled", "false");
        c.getNetworkConfig().setPort(5701).setPortAutoIncrement(true).setPortCount(100);
        c.getNetworkConfig().getInterfaces().setEnabled(true).addInterface("127.0.0.1");
        JoinConfig join = c.getNetworkConfig().getJoin();
        join.getMulticastConfig().setEnabled(false);
        join.getAutoDetectionConfig().setEnabled(false);
        join.getTcpIpConfig().setEnabled(true).addMember("127.0.0.1");
        return c;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        client.shutdown();
        member2.shutdown();
        member1.shutdown();
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
