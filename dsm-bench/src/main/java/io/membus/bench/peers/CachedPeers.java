package io.membus.bench.peers;

import com.hazelcast.config.InMemoryFormat;
import com.hazelcast.config.NearCacheConfig;
import com.hazelcast.instance.BuildInfoProvider;
import com.hazelcast.map.IMap;
import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.bench.hazelcast.HazelcastPair;
import io.membus.bench.replication.ReplCluster;
import io.membus.codec.Codecs;
import io.membus.coherence.CoherenceConfig;
import io.membus.coherence.CoherentHeap;
import io.membus.collections.DsmCollections;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmMapOptions;
import io.membus.core.error.DsmConfigException;
import io.membus.core.message.Messaging;
import io.membus.core.replication.ReplicationConfig;
import io.membus.core.time.Clock;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The peers of {@link PeersCachedBenchmark}: a map read through the client's own cache. Redis has
 * none here (its client-side caching is not what Jedis 5 offers by default), so it is not one of
 * them.
 *
 * <p><b>Note:</b> each peer is started and closed by one thread (JMH's trial setup and teardown);
 * its {@link #get} and {@link #put} are called by any number of benchmark threads at once (the
 * handles are thread-safe).
 */
abstract class CachedPeers implements AutoCloseable {
    static final String MAP = "peers-cached";

    /** The peer named by {@link PeersCachedBenchmark#peer}. */
    static CachedPeers start(String name) {
        return switch (name) {
            case "membus0" -> new Membus(0);
            case "membus1" -> new Membus(1);
            case "hazelcast" -> new Hazelcast();
            default -> throw new DsmConfigException("peer", name, "membus0, membus1 or hazelcast (Redis has no client"
                    + " cache in this benchmark)");
        };
    }

    abstract String describe();

    abstract byte[] get(long key);

    abstract void put(long key, byte[] value);

    @Override
    public abstract void close();

    /**
     * Membus as in {@link Peers.MembusPeer} (two memory nodes and a client node over tcp, this
     * JVM), each node with a {@link CoherentHeap}; the map is named, with leased reads
     * ({@code DsmMapOptions.leasedReads(true)}) and a read cache holding every key on the client:
     * a get is served under the client's lease on the key's stripe, with no verb.
     */
    static final class Membus extends CachedPeers {
        private static final long HEAP = 64L << 20;
        private final int backups;
        private final ReplCluster cluster;
        private final List<GlobalAllocator> allocators = new ArrayList<>();
        private final List<CoherentHeap> heaps = new ArrayList<>();
        private DsmMap<Long, byte[]> map;

        Membus(int backups) {
            this.backups = backups;
            cluster = new ReplCluster(ReplicationConfig.OFF.withBackups(backups));
            try {
                ReplCluster.Node two = cluster.start(2, 1, HEAP);
                ReplCluster.Node three = cluster.start(3, 1, HEAP);
                ReplCluster.Node client = cluster.start(1, 0, 0);
                cluster.awaitSettled(two.group(), 2, backups);
                cluster.awaitSettled(three.group(), 3, backups);
                CoherenceConfig cc = CoherenceConfig.defaults().withLeases(Duration.ofSeconds(1), Duration.ofSeconds(5))
                        .withSkewCheck(false, Duration.ofSeconds(5)); // as MapBenchmark's leased map: one clock here
                for (ReplCluster.Node memoryNode : List.of(two, three)) {
                    GlobalAllocator a = new GlobalAllocator(memoryNode.memory,
                            AllocatorConfig.builder().heapSegments(1).build());
                    a.formatLocalSegments();
                    allocators.add(a);
                    heaps.add(new CoherentHeap(a, new Messaging(memoryNode.memory), Clock.system(), cc));
                }
                GlobalAllocator onClient = new GlobalAllocator(client.memory, AllocatorConfig.builder().heapSegments(1)
                        .defaultPlacement(Placement.roundRobin()).build());
                allocators.add(onClient);
                CoherentHeap clientHeap = new CoherentHeap(onClient, new Messaging(client.memory), Clock.system(), cc);
                heaps.add(clientHeap);
                DsmCollections collections = new DsmCollections(client.memory, onClient, cluster.directory, clientHeap);
                // sized for the keys: no growth while it is filled (this benchmark measures reads; the fill of a
                // growing leased map with one backup once timed out in the table's migration, under load 20)
                map = collections.map(MAP, Codecs.longs(), Codecs.bytes(), DsmMapOptions.defaults().leasedReads(true)
                        .readCacheEntries(2 * PeersBenchmark.KEYS).initialSlots(1 << 15));
            } catch (RuntimeException e) {
                close();
                throw e;
            }
        }

        @Override
        String describe() {
            return "Membus over tcp: 2 memory nodes + a client node (no memory) in this JVM, replication.backups="
                    + backups + ", a map with leased reads and a read cache of every key on the client";
        }

        @Override
        byte[] get(long key) {
            return map.get(key);
        }

        @Override
        void put(long key, byte[] value) {
            map.put(key, value);
        }

        @Override
        public void close() {
            if (map != null) {
                map.close();
            }
            heaps.forEach(CoherentHeap::close);
            heaps.clear();
            allocators.forEach(GlobalAllocator::close);
            allocators.clear();
            cluster.close();
        }
    }

    /**
     * Hazelcast as in {@link Peers.HazelcastPeer} (two members, a client, one backup), the map read
     * through a client near cache ({@code OBJECT} format, invalidated on change): its cached read.
     */
    static final class Hazelcast extends CachedPeers {
        private final HazelcastPair pair;
        private final IMap<Long, byte[]> map;

        Hazelcast() {
            pair = HazelcastPair.start(cc -> cc.addNearCacheConfig(new NearCacheConfig(MAP)
                    .setInMemoryFormat(InMemoryFormat.OBJECT).setInvalidateOnChange(true)));
            map = pair.client.getMap(MAP);
        }

        @Override
        String describe() {
            return "Hazelcast " + BuildInfoProvider.getBuildInfo().getVersion()
                    + ": 2 members + a client in this JVM, 1 synchronous backup, a client near cache";
        }

        @Override
        byte[] get(long key) {
            return map.get(key);
        }

        @Override
        void put(long key, byte[] value) {
            map.put(key, value);
        }

        @Override
        public void close() {
            pair.close();
        }
    }
}
