package io.membus;

import com.typesafe.config.ConfigFactory;
import io.membus.alloc.Placement;
import io.membus.coherence.CoherenceConfig;
import io.membus.coherence.CoherentHeap;
import io.membus.coherence.RemoteRef;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmConfigException;
import io.membus.core.time.Clock;

import com.typesafe.config.Config;
import io.membus.alloc.GlobalAllocator;
import io.membus.cluster.DsmNode;
import io.membus.cluster.NodeConfig;
import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmCollections;
import io.membus.collections.DsmDoubleArray;
import io.membus.collections.DsmLock;
import io.membus.collections.DsmLongArray;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmMapOptions;
import io.membus.collections.DsmQueue;
import io.membus.collections.QueueOptions;
import io.membus.codec.Codec;
import io.membus.codec.CodecRegistry;
import io.membus.core.RemoteMemory;

import java.nio.file.Path;
import java.time.Duration;

/**
 * A Membus node with its collections: the one object an application holds.
 * Starts (or wraps) a {@link DsmNode} and reaches the named shared structures
 * through it, Hazelcast-style:
 *
 * <pre>
 *   try (Membus membus = Membus.start(Path.of("node1.conf"))) {
 *       membus.awaitMembers(3, Duration.ofSeconds(30));
 *       DsmAtomicLong hits = membus.atomicLong("hits");   // the same counter on every node
 *       hits.incrementAndGet();
 *   }
 * </pre>
 *
 * On a memory node, collections need an allocator heap ({@code membus.heap.segments}).
 * A client ({@code membus.role = client}, or {@code membus.segments.count = 0}) exports
 * no memory and uses every structure the same way: its allocator places every block
 * (named roots, map entries, queue elements, coherent objects) on the memory nodes,
 * round robin unless a placement says otherwise, and never on the client.
 *
 * <p><b>Note:</b> thread-safe; the handles it returns are too, and are cached per
 * name (see {@link DsmCollections}). {@link #close()} closes the node it started
 * (not one it wrapped with {@link #wrap}).
 */
public final class Membus implements AutoCloseable {
    private final DsmNode node;
    private final boolean owned;
    private final Clock clock;
    private final CodecRegistry codecs;
    private volatile DsmCollections collections;
    private volatile CoherentHeap heap;
    private volatile boolean closed;
    private final FacadeMeters meters;

    private Membus(DsmNode node, boolean owned) {
        this(node, owned, Clock.system(), null);
    }

    private Membus(DsmNode node, boolean owned, Clock clock, CodecRegistry.Builder code) {
        this.node = node;
        this.owned = owned;
        this.clock = clock;
        this.meters = new FacadeMeters(node.meterRegistry());
        try {
            this.codecs = MembusCodecs.registry(node, code);
        } catch (RuntimeException | Error e) {
            if (owned) { // refused before serving: leave the cluster
                node.close();
            }
            throw e;
        }
    }

    /** Starts a node from {@code application.conf} and system properties. */
    public static Membus start() {
        return new Membus(DsmNode.start(), true);
    }

    /** Starts a node from the {@code membus} section of {@code config}. */
    public static Membus start(Config config) {
        return new Membus(DsmNode.start(config), true);
    }

    /**
     * {@link #start(Config)} with codec classes registered in code: {@code codecs}'
     * classes first, then those of {@code membus.codec.classes}. The resulting list must
     * be the same on every node that registers any class; a node whose list differs is
     * refused at start with a {@link io.membus.codec.RegistrationMismatchException}
     * naming the first difference (docs/codecs.md). {@code codecs} is used up by the call.
     */
    public static Membus start(Config config, CodecRegistry.Builder codecs) {
        java.util.Objects.requireNonNull(codecs, "codecs");
        return new Membus(DsmNode.start(config), true, Clock.system(), codecs);
    }

    /** Starts a node from a HOCON file. */
    public static Membus start(Path configFile) {
        return new Membus(DsmNode.start(configFile), true);
    }

    /** {@link #start(Path)} with codec classes registered in code, as {@link #start(Config, CodecRegistry.Builder)}. */
    public static Membus start(Path configFile, CodecRegistry.Builder codecs) {
        java.util.Objects.requireNonNull(codecs, "codecs");
        return new Membus(DsmNode.start(configFile), true, Clock.system(), codecs);
    }

    /** Starts a node from a parsed config. */
    public static Membus start(NodeConfig config) {
        return new Membus(DsmNode.start(config), true);
    }

    /** Collections over a node the caller started and keeps closing itself. */
    public static Membus wrap(DsmNode node) {
        return new Membus(node, false);
    }

    /** {@link #wrap(DsmNode)} with codec classes registered in code, as {@link #start(Config, CodecRegistry.Builder)}. */
    public static Membus wrap(DsmNode node, CodecRegistry.Builder codecs) {
        return new Membus(node, false, Clock.system(), java.util.Objects.requireNonNull(codecs, "codecs"));
    }

    /**
     * {@link #wrap(DsmNode)} whose coherent heap reads lease times from {@code clock}
     * (tests and the stress command's skew nemesis move a {@code SkewableClock}).
     */
    public static Membus wrap(DsmNode node, Clock clock) {
        return new Membus(node, false, java.util.Objects.requireNonNull(clock, "clock"), null);
    }

    /** Waits until the cluster has {@code count} members; see {@link DsmNode#awaitMembers}. */
    public int awaitMembers(int count, Duration timeout) {
        checkOpen();
        return node.awaitMembers(count, timeout);
    }

    public DsmNode node() {
        return node;
    }

    public GlobalAllocator allocator() {
        checkOpen();
        return node.allocator();
    }

    public RemoteMemory remoteMemory() {
        return node.remoteMemory();
    }

    /** The collections entry point (built on first use: it needs the allocator; maps get the coherent heap for leased reads). */
    public DsmCollections collections() {
        checkOpen();
        DsmCollections c = collections;
        if (c == null) {
            synchronized (this) {
                c = collections;
                if (c == null) {
                    c = new DsmCollections(node.remoteMemory(), node.allocator(), node.names(), heap());
                    c.maxValueSize(maxValueSize(node.config().raw()));
                    c.destroyGrace(destroyGrace(node.config().raw(), node.config().operationTimeout()));
                    collections = c;
                }
            }
        }
        return c;
    }

    /**
     * This node's coherent heap (built on first use from {@code membus.coherence}, see
     * {@code reference.conf}): objects every node may cache and never reads stale; see
     * {@link CoherentHeap} and {@link RemoteRef}.
     *
     * @throws DsmConfigException when a {@code membus.coherence} value is bad (naming the key)
     */
    public CoherentHeap heap() {
        checkOpen();
        CoherentHeap h = heap;
        if (h == null) {
            synchronized (this) {
                h = heap;
                if (h == null) {
                    h = new CoherentHeap(node.allocator(), node.messaging(), clock,
                            coherenceConfig(node.config().raw(), node.config().operationTimeout()));
                    h.maxValueSize(maxValueSize(node.config().raw()));
                    node.statusSection("coherence", h::status); // membus status shows caching and skew
                    meters.heap(h);
                    node.meterMessageChannels(); // the invalidation channel it registered
                    heap = h;
                }
            }
        }
        return h;
    }

    /**
     * Reads {@code membus.collections.max-value-size} over the defaults (a size in bytes,
     * e.g. {@code 8MiB}); a bad value is a typed error naming the key.
     */
    static long maxValueSize(Config raw) {
        Config c = raw.withFallback(ConfigFactory.defaultReference(Membus.class.getClassLoader()));
        String key = DsmCollections.MAX_VALUE_SIZE_SETTING;
        long bytes;
        try {
            bytes = c.getBytes(key);
        } catch (com.typesafe.config.ConfigException e) {
            throw new DsmConfigException(key, String.valueOf(c.hasPath(key) ? c.getValue(key).unwrapped() : null),
                    "a size such as 8MiB, 1 .. " + DsmCollections.MAX_VALUE_SIZE_LIMIT + " bytes: " + e.getMessage(), e);
        }
        if (bytes < 1 || bytes > DsmCollections.MAX_VALUE_SIZE_LIMIT) {
            throw new DsmConfigException(key, String.valueOf(c.getValue(key).unwrapped()),
                    "1 .. " + DsmCollections.MAX_VALUE_SIZE_LIMIT + " bytes (one verb carries a map entry or a queue element)");
        }
        return bytes;
    }

    /**
     * Reads {@code membus.collections.destroy-grace} over the defaults: how long a destroyed
     * structure's blocks stay allocated; it must exceed the operation timeout by at least
     * a second (see {@link DsmCollections#destroy}). A bad value is a typed error naming the key.
     */
    static Duration destroyGrace(Config raw, Duration operationTimeout) {
        Config c = raw.withFallback(ConfigFactory.defaultReference(Membus.class.getClassLoader()));
        String key = "membus.collections.destroy-grace";
        Duration grace;
        try {
            grace = c.getDuration(key);
        } catch (com.typesafe.config.ConfigException e) {
            throw new DsmConfigException(key, String.valueOf(c.hasPath(key) ? c.getValue(key).unwrapped() : null),
                    "a duration such as 30s: " + e.getMessage(), e);
        }
        Duration least = operationTimeout.plusSeconds(1);
        if (grace.compareTo(least) < 0 || grace.toHours() >= 1) {
            throw new DsmConfigException(key, String.valueOf(c.getValue(key).unwrapped()), "at least membus.operation-timeout"
                    + " + 1s (" + least.toMillis() + "ms) and under 1h: a destroyed structure's blocks are freed only"
                    + " when no operation of a handle can still reach them");
        }
        return grace;
    }

    /** Reads {@code membus.coherence} over the defaults; a bad value is a typed error naming its key. */
    static CoherenceConfig coherenceConfig(Config raw, Duration timeout) {
        Config c = raw.withFallback(ConfigFactory.defaultReference(Membus.class.getClassLoader()))
                .getConfig("membus.coherence");
        String key = "caching";
        try {
            boolean caching = c.getBoolean(key);
            key = "clock-bound";
            Duration bound = c.getDuration(key);
            key = "min-lease";
            Duration min = c.getDuration(key);
            key = "max-lease";
            Duration max = c.getDuration(key);
            key = "lock-timeout";
            Duration lock = c.getDuration(key);
            key = "check-skew";
            boolean check = c.getBoolean(key);
            key = "skew-interval";
            Duration every = c.getDuration(key);
            // the bound of the cache of copies (issue 24)
            key = "cache-max-entries";
            int maxEntries = c.getInt(key);
            key = "cache-max-bytes";
            long maxBytes = c.getBytes(key);
            key = "(the durations together)";
            return new CoherenceConfig(caching, bound, min, max, lock, timeout, check,
                    every, maxEntries, maxBytes);
        } catch (com.typesafe.config.ConfigException | IllegalArgumentException e) {
            throw new DsmConfigException("membus.coherence." + key, String.valueOf(c.root().get(key.startsWith("(")
                    ? "clock-bound" : key)), "see the membus artifact's reference.conf: " + e.getMessage(), e);
        }
    }

    /**
     * This node's codec registrations ({@code membus.codec.classes} and those given in
     * code), checked against the other members' at start; see docs/codecs.md.
     */
    public CodecRegistry codecs() {
        return codecs;
    }

    /**
     * The codec of {@code type} over {@link #codecs()}: a fixed codec for {@code Long},
     * {@code Integer}, {@code Double}, {@code String}, {@code byte[]}, else Kryo.
     *
     * @throws io.membus.codec.UnregisteredClassException when {@code type} is not registered (naming the line to add)
     */
    public <T> Codec<T> codec(Class<T> type) {
        return codecs.codec(type);
    }

    /** Creates a coherent object holding {@code initial}, cached by default; see {@link CoherentHeap#create}. */
    public <T> RemoteRef<T> create(Codec<T> codec, T initial, Placement placement) {
        return heap().create(codec, initial, placement);
    }

    /**
     * Creates a coherent object holding {@code initial} with the allocator's default
     * placement: this node on a memory node, round robin over the memory nodes on a client.
     */
    public <T> RemoteRef<T> create(Codec<T> codec, T initial) {
        return heap().create(codec, initial);
    }

    /** The counter named {@code name} (created at zero when absent); see {@link DsmAtomicLong}. */
    public DsmAtomicLong atomicLong(String name) {
        DsmAtomicLong c = collections().atomicLong(name);
        return meters.collection("atomicLong", name, c, c.operationStats());
    }

    /** The array of {@code length} longs named {@code name}; see {@link DsmLongArray}. */
    public DsmLongArray longArray(String name, int length) {
        DsmLongArray a = collections().longArray(name, length);
        return meters.collection("longArray", name, a, a.operationStats());
    }

    /** The array of {@code length} doubles named {@code name}; see {@link DsmDoubleArray}. */
    public DsmDoubleArray doubleArray(String name, int length) {
        DsmDoubleArray a = collections().doubleArray(name, length);
        return meters.collection("doubleArray", name, a, a.operationStats());
    }

    /** The lock named {@code name}; see {@link DsmLock}. */
    public DsmLock lock(String name) {
        DsmLock l = collections().lock(name);
        return meters.collection("lock", name, l, l.operationStats());
    }

    /** The bounded queue named {@code name} of {@code type} (codec {@link #codec(Class) codec(type)}); see {@link DsmQueue}. */
    public <E> DsmQueue<E> queue(String name, Class<E> type, int capacity) {
        return queue(name, codec(type), capacity);
    }

    /** The bounded queue named {@code name} with elements encoded by {@code codec}; see {@link DsmQueue}. */
    public <E> DsmQueue<E> queue(String name, Codec<E> codec, int capacity) {
        return queue(name, codec, QueueOptions.capacity(capacity));
    }

    /**
     * The bounded queue named {@code name} of {@code type} with {@code options}: capacity and
     * slot size, e.g. {@code QueueOptions.capacity(1024).slotBytes(520)} (elements up to 512
     * encoded bytes inline); see {@link QueueOptions} and {@link DsmQueue}.
     *
     * @throws io.membus.collections.QueueSlotSizeMismatchException when the options name a slot size and
     *                                                               the queue exists with another
     */
    public <E> DsmQueue<E> queue(String name, Class<E> type, QueueOptions options) {
        return queue(name, codec(type), options);
    }

    /** As {@link #queue(String, Class, QueueOptions)} with elements encoded by {@code codec}. */
    public <E> DsmQueue<E> queue(String name, Codec<E> codec, QueueOptions options) {
        DsmQueue<E> q = collections().queue(name, codec, options);
        return meters.collection("queue", name, q, q.operationStats());
    }

    /**
     * The map named {@code name} (created empty when absent), keys and values encoded
     * by {@link #codec(Class)}: the same {@code ConcurrentMap} on every node; see {@link DsmMap}.
     */
    public <K, V> DsmMap<K, V> map(String name, Class<K> keyType, Class<V> valueType) {
        return map(name, codec(keyType), codec(valueType));
    }

    /**
     * The map named {@code name}, keys and values encoded by {@link #codec(Class)}, with
     * {@code options} (e.g. {@code DsmMapOptions.defaults().leasedReads(true)}) when this
     * call creates it, and for this node's read cache; see {@link DsmMap}.
     */
    public <K, V> DsmMap<K, V> map(String name, Class<K> keyType, Class<V> valueType, DsmMapOptions options) {
        return metered(name, collections().map(name, codec(keyType), codec(valueType), options));
    }

    /** The map named {@code name} with keys and values encoded by these codecs; see {@link DsmMap}. */
    public <K, V> DsmMap<K, V> map(String name, Codec<K> keyCodec, Codec<V> valueCodec) {
        return metered(name, collections().map(name, keyCodec, valueCodec));
    }

    private <K, V> DsmMap<K, V> metered(String name, DsmMap<K, V> map) {
        return meters.collection("map", name, meters.map(name, map), map.operationStats());
    }

    /**
     * Destroys the structure (collection or named coherent object) bound to {@code name},
     * cluster-wide, and gives the name back: opening it again creates a new one. Handles
     * on it, on every node, fail from then on with a typed error; a name whose root is
     * gone (its node's memory lost) is only given back. See {@link DsmCollections#destroy}.
     *
     * @return whether this call destroyed it (false: not bound, or destroyed by another caller first)
     */
    public boolean destroy(String name) {
        boolean done = collections().destroy(name);
        meters.forget(name);
        return done;
    }

    /**
     * The coherent object named {@code name} holding {@code type} values (codec
     * {@link #codec(Class) codec(type)}), created with {@code initial.get()} when absent;
     * see {@link DsmCollections#ref(String, Codec, java.util.function.Supplier)}.
     */
    public <T> RemoteRef<T> ref(String name, Class<T> type, java.util.function.Supplier<T> initial) {
        return ref(name, codec(type), initial);
    }

    /** As {@link #ref(String, Class, java.util.function.Supplier)} with this codec. */
    public <T> RemoteRef<T> ref(String name, Codec<T> codec, java.util.function.Supplier<T> initial) {
        return meters.ref(name, collections().ref(name, codec, initial));
    }

    /** The existing coherent object named {@code name}; see {@link DsmCollections#ref(String, Codec)}. */
    public <T> RemoteRef<T> ref(String name, Codec<T> codec) {
        return meters.ref(name, collections().ref(name, codec));
    }

    /** Fails at once with {@link DsmClosedException} once {@link #close()} was called. */
    private void checkOpen() {
        if (closed) {
            throw new DsmClosedException("membus instance of node " + node.nodeId());
        }
    }

    /**
     * Closes the coherent heap and, when this instance started its node, the node. Every
     * later call on this instance, and on the structures it handed out, fails at once with
     * {@link DsmClosedException}: create a new instance instead.
     */
    @Override
    public void close() {
        closed = true;
        DsmCollections c = collections;
        if (c != null) {
            c.close(); // its handles fail naming their structure, before any verb
        }
        meters.close();
        CoherentHeap h = heap;
        if (h != null) {
            h.close();
        }
        if (owned) {
            node.close();
        }
    }

    @Override
    public String toString() {
        return "Membus{" + node + "}";
    }
}
