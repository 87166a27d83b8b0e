package io.membus.bench.peers;

import com.hazelcast.collection.IQueue;
import com.hazelcast.instance.BuildInfoProvider;
import com.hazelcast.map.EntryProcessor;
import com.hazelcast.map.IMap;
import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.AllocatorCounts;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.bench.hazelcast.HazelcastPair;
import io.membus.bench.replication.ReplCluster;
import io.membus.bench.tcp.BlockingFloor;
import io.membus.codec.Codecs;
import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmCollections;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmMapOptions;
import io.membus.collections.DsmQueue;
import io.membus.collections.QueueCounts;
import io.membus.collections.ReclaimCounts;
import io.membus.core.error.DsmConfigException;
import io.membus.core.replication.ReplicationConfig;
import redis.clients.jedis.Jedis;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The systems {@link PeersBenchmark} measures, each behind {@link Peer}.
 *
 * <p><b>Note:</b> see {@link Peer} for threading; each class says what it shares.
 */
final class Peers {
    static final String COUNTER = "peers-counter";
    static final String QUEUE = "peers-queue";
    static final String MAP = "peers-map";
    static final int QUEUE_CAPACITY = 1024;

    private Peers() {
    }

    /**
     * {@code handles} (thread-safe, shared by every thread) as one thread's connection: its
     * {@code close} closes nothing (the peer's own close does).
     */
    static Peer.Conn shared(Peer.Conn handles) {
        return new Peer.Conn() {
            @Override
            public byte[] get(long key) {
                return handles.get(key);
            }

            @Override
            public Object set(long key, byte[] value) {
                return handles.set(key, value);
            }

            @Override
            public long increment() {
                return handles.increment();
            }

            @Override
            public void offer(byte[] element) {
                handles.offer(element);
            }

            @Override
            public byte[] poll() {
                return handles.poll();
            }

            @Override
            public long counter() {
                return handles.counter();
            }

            @Override
            public void close() {
                // shared handles: closed with the peer
            }
        };
    }

    /** The peer named by {@link PeersBenchmark#peer}. */
    static Peer start(String name) {
        return switch (name) {
            case "membus0" -> new MembusPeer(0);
            case "membus1" -> new MembusPeer(1);
            case "hazelcast" -> new HazelcastPeer();
            case "redis" -> new RedisPeer();
            case "floor" -> new FloorPeer();
            default -> throw new DsmConfigException("peer", name, "membus0, membus1, hazelcast, redis or floor");
        };
    }

    /**
     * Membus over {@code tcp} on loopback: two memory nodes (2 and 3, each exporting heap
     * segment 1 of 64 MiB) and a client node (1, no memory of its own; the benchmark threads
     * use its {@link DsmCollections}), all three in this JVM ({@link ReplCluster}); with
     * {@code backups = 1} each memory node holds the copy of the other's heap (as Hazelcast's
     * two members each hold the other's backups). The map is a named {@link DsmMap} with the
     * default options and no read cache on the client (every get is uncached), the counter a
     * {@link DsmAtomicLong}, the queue a {@link DsmQueue} of capacity {@value #QUEUE_CAPACITY}
     * with the default slot size. The handles are thread-safe: every thread shares them.
     */
    static final class MembusPeer implements Peer, Peer.Conn {
        private static final long HEAP = 64L << 20;
        private final int backups;
        private final ReplCluster cluster;
        private final List<GlobalAllocator> allocators = new ArrayList<>();
        private final DsmMap<Long, byte[]> map;
        private final DsmAtomicLong counter;
        private final DsmQueue<byte[]> queue;
        private volatile long[] countsMark = AllocatorCounts.snapshot();
        private volatile long[] queueMark = QueueCounts.snapshot();
        private volatile long[] reclaimMark = ReclaimCounts.snapshot();

        MembusPeer(int backups) {
            this.backups = backups;
            cluster = new ReplCluster(ReplicationConfig.OFF.withBackups(backups));
            try {
                ReplCluster.Node two = cluster.start(2, 1, HEAP);
                ReplCluster.Node three = cluster.start(3, 1, HEAP);
                ReplCluster.Node client = cluster.start(1, 0, 0);
                cluster.awaitSettled(two.group(), 2, backups);
                cluster.awaitSettled(three.group(), 3, backups);
                for (ReplCluster.Node memoryNode : List.of(two, three)) {
                    GlobalAllocator a = new GlobalAllocator(memoryNode.memory,
                            AllocatorConfig.builder().heapSegments(1).build());
                    a.formatLocalSegments();
                    allocators.add(a);
                }
                // as a client node's allocator is built (DsmNode): blocks placed round-robin on the memory nodes
                GlobalAllocator onClient = new GlobalAllocator(client.memory, AllocatorConfig.builder().heapSegments(1)
                        .defaultPlacement(Placement.roundRobin()).build());
                allocators.add(onClient);
                DsmCollections collections = new DsmCollections(client.memory, onClient, cluster.directory);
                map = collections.map(MAP, Codecs.longs(), Codecs.bytes(), DsmMapOptions.defaults().readCacheEntries(0));
                counter = collections.atomicLong(COUNTER);
                queue = collections.queue(QUEUE, Codecs.bytes(), QUEUE_CAPACITY);
            } catch (RuntimeException e) {
                close();
                throw e;
            }
        }

        @Override
        public String describe() {
            return "Membus over tcp: 2 memory nodes + a client node (no memory) in this JVM, replication.backups="
                    + backups + ", map with default options and no read cache, queue with the default slot size";
        }

        @Override
        public Conn connect() {
            return shared(this);
        }

        @Override
        public void markCounts() {
            countsMark = AllocatorCounts.snapshot();
            queueMark = QueueCounts.snapshot();
            reclaimMark = ReclaimCounts.snapshot();
        }

        @Override
        public String counts() {
            return "allocator (every node of this JVM): " + AllocatorCounts.since(countsMark)
                    + "; map entries this client retired and has not freed yet: " + map.pendingReclamation()
                    + "; reclaimer (every map of this JVM): " + ReclaimCounts.since(reclaimMark)
                    + "; queue claims (every queue handle of this JVM): " + QueueCounts.since(queueMark);
        }

        @Override
        public byte[] get(long key) {
            return map.get(key);
        }

        @Override
        public Object set(long key, byte[] value) {
            return map.put(key, value);
        }

        @Override
        public long increment() {
            return counter.incrementAndGet();
        }

        @Override
        public void offer(byte[] element) {
            if (!queue.offer(element)) {
                throw new IllegalStateException("the Membus queue refused an offer: full at " + QUEUE_CAPACITY
                        + " elements, which the benchmark's offer-then-poll pairs never reach");
            }
        }

        @Override
        public byte[] poll() {
            return queue.poll();
        }

        @Override
        public long counter() {
            return counter.get();
        }

        @Override
        public void close() {
            if (map != null) {
                map.close();
            }
            allocators.forEach(GlobalAllocator::close);
            allocators.clear();
            cluster.close();
        }
    }

    /**
     * Hazelcast (the version on the class path, 5.7): two members and a client in this JVM
     * ({@link HazelcastPair}), the defaults' one synchronous backup for the map and the queue.
     * The map is an {@code IMap<Long, byte[]>} without a near cache, the counter an entry
     * processor adding one to a {@code Long} entry (open-source Hazelcast's counter: the CP
     * {@code IAtomicLong} is Enterprise-only in 5.7), the queue an {@code IQueue<byte[]>}. The
     * client's proxies are thread-safe: every thread shares them.
     */
    static final class HazelcastPeer implements Peer, Peer.Conn {
        private final HazelcastPair pair;
        private final IMap<Long, byte[]> map;
        private final IMap<String, Long> counters;
        private final IQueue<byte[]> queue;

        /** Adds one to a {@code Long} entry on the member that owns it; returns the new value. */
        static final class Increment implements EntryProcessor<String, Long, Long> {
            private static final long serialVersionUID = 1L;

            @Override
            public Long process(Map.Entry<String, Long> entry) {
                long v = (entry.getValue() == null ? 0L : entry.getValue()) + 1;
                entry.setValue(v);
                return v;
            }
        }

        private static final Increment INCREMENT = new Increment();

        HazelcastPeer() {
            pair = HazelcastPair.start(cc -> { });
            map = pair.client.getMap(MAP);
            counters = pair.client.getMap(COUNTER);
            counters.put(COUNTER, 0L);
            queue = pair.client.getQueue(QUEUE);
            int mapBackups = pair.member1.getConfig().getMapConfig(MAP).getBackupCount();
            int queueBackups = pair.member1.getConfig().getQueueConfig(QUEUE).getBackupCount();
            if (mapBackups != 1 || queueBackups != 1) {
                close();
                throw new IllegalStateException("Hazelcast's map and queue were to run with its default one backup, not "
                        + mapBackups + " and " + queueBackups);
            }
        }

        @Override
        public String describe() {
            return "Hazelcast " + BuildInfoProvider.getBuildInfo().getVersion()
                    + ": 2 members + a client in this JVM, 1 synchronous backup (its default)";
        }

        @Override
        public Conn connect() {
            return shared(this);
        }

        @Override
        public byte[] get(long key) {
            return map.get(key);
        }

        @Override
        public Object set(long key, byte[] value) {
            return map.put(key, value);
        }

        @Override
        public long increment() {
            return counters.executeOnKey(COUNTER, INCREMENT);
        }

        @Override
        public void offer(byte[] element) {
            if (!queue.offer(element)) {
                throw new IllegalStateException("the Hazelcast queue refused an offer (it is unbounded by default)");
            }
        }

        @Override
        public byte[] poll() {
            return queue.poll();
        }

        @Override
        public long counter() {
            return counters.get(COUNTER);
        }

        @Override
        public void close() {
            pair.close();
        }
    }

    /**
     * Redis: a {@code redis-server} of its own ({@link RedisServer}: no persistence, loopback),
     * a Jedis connection per benchmark thread (Redis serves each command on its one thread; a
     * connection per thread is how Jedis is used without a pool). Keys of the map are the 8
     * bytes of the {@code Long} (big-endian); SET and GET, INCR, LPUSH then RPOP.
     */
    static final class RedisPeer implements Peer {
        private static final byte[] COUNTER_KEY = COUNTER.getBytes(StandardCharsets.UTF_8);
        private static final byte[] QUEUE_KEY = QUEUE.getBytes(StandardCharsets.UTF_8);
        private final RedisServer server;

        RedisPeer() {
            server = RedisServer.start();
        }

        @Override
        public String describe() {
            return "Redis " + server.version + ": redis-server on 127.0.0.1:" + server.port
                    + " (--save \"\" --appendonly no), Jedis, a connection per thread";
        }

        @Override
        public Conn connect() {
            Jedis jedis = server.connect();
            return new Conn() {
                private final byte[] key = new byte[8];

                private byte[] key(long k) {
                    ByteBuffer.wrap(key).putLong(0, k);
                    return key;
                }

                @Override
                public byte[] get(long k) {
                    return jedis.get(key(k));
                }

                @Override
                public Object set(long k, byte[] value) {
                    return jedis.set(key(k), value);
                }

                @Override
                public long increment() {
                    return jedis.incr(COUNTER_KEY);
                }

                @Override
                public void offer(byte[] element) {
                    jedis.lpush(QUEUE_KEY, element);
                }

                @Override
                public byte[] poll() {
                    return jedis.rpop(QUEUE_KEY);
                }

                @Override
                public long counter() {
                    byte[] v = jedis.get(COUNTER_KEY);
                    return v == null ? 0 : Long.parseLong(new String(v, StandardCharsets.US_ASCII));
                }

                @Override
                public void close() {
                    jedis.close();
                }
            };
        }

        @Override
        public void close() {
            server.close();
        }
    }

    /**
     * The floor: plain Java blocking sockets ({@link BlockingFloor}, its server in this JVM, a
     * thread per connection), a connection per operation kind per benchmark thread; each
     * operation is the round trip(s) its cheapest remote form needs, with the frame sizes of
     * Membus' verbs carrying the same bytes: get = one round trip (36 B out, 80 B back: a
     * 64-byte value), set = one (108 B out, 16 B back), increment = one (40 B out, 24 B back),
     * offer + poll = two (an offer as a set, a poll as a get: what LPUSH then RPOP costs).
     * It stores nothing: its results are not checked.
     */
    static final class FloorPeer implements Peer {
        private final ServerSocket server;

        FloorPeer() {
            try {
                server = BlockingFloor.serve("127.0.0.1");
            } catch (IOException e) {
                throw new UncheckedIOException("cannot start the blocking-socket floor on 127.0.0.1", e);
            }
        }

        @Override
        public String describe() {
            return "floor: blocking Java sockets, a round trip per remote step, server in this JVM on 127.0.0.1:"
                    + server.getLocalPort();
        }

        @Override
        public boolean stores() {
            return false;
        }

        @Override
        public Conn connect() {
            try {
                return new FloorConn(server.getLocalPort());
            } catch (IOException e) {
                throw new UncheckedIOException("cannot connect to the floor on 127.0.0.1:" + server.getLocalPort(), e);
            }
        }

        @Override
        public void close() {
            try {
                server.close();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot close the floor's server socket", e);
            }
        }

        private static final class FloorConn implements Conn {
            private final BlockingFloor.Client read;
            private final BlockingFloor.Client write;
            private final BlockingFloor.Client atomic;

            FloorConn(int port) throws IOException {
                read = new BlockingFloor.Client("127.0.0.1", port, 16 + 20, 16 + 64, 1);
                write = new BlockingFloor.Client("127.0.0.1", port, 16 + 28 + 64, 16, 1);
                atomic = new BlockingFloor.Client("127.0.0.1", port, 16 + 24, 16 + 8, 1);
            }

            private static void trip(BlockingFloor.Client c) {
                try {
                    c.roundTrips(1);
                } catch (IOException e) {
                    throw new UncheckedIOException("the floor's round trip failed", e);
                }
            }

            @Override
            public byte[] get(long key) {
                trip(read);
                return null;
            }

            @Override
            public Object set(long key, byte[] value) {
                trip(write);
                return null;
            }

            @Override
            public long increment() {
                trip(atomic);
                return 0;
            }

            @Override
            public void offer(byte[] element) {
                trip(write);
            }

            @Override
            public byte[] poll() {
                trip(read);
                return null;
            }

            @Override
            public long counter() {
                return 0;
            }

            @Override
            public void close() {
                for (BlockingFloor.Client c : List.of(read, write, atomic)) {
                    try {
                        c.close();
                    } catch (IOException e) {
                        // closing: the server may be gone already
                    }
                }
            }
        }
    }
}
