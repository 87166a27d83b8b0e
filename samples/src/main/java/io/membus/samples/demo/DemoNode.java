package io.membus.samples.demo;

import io.membus.samples.cluster.StatusText;
import com.typesafe.config.ConfigFactory;
import io.membus.Membus;
import io.membus.cluster.DsmNode;
import io.membus.cluster.NodeConfig;
import io.membus.core.error.DsmException;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * One node of the demo: a {@link DsmNode} (Pekko cluster member, replicated
 * directory, transport, global allocator) that exports two segments (0: raw words,
 * 1: a heap of the global allocator) — or, as a client, none: it then reaches the
 * same collections through {@link Membus}, every block it makes placed on the memory
 * nodes — and runs the phases the demo's apps ask of it
 * ({@link DemoApp#onNode}). It finds every other node's segments in the replicated
 * directory; nothing is passed to it by hand.
 *
 * <p><b>Note:</b> {@link #run} may be called by several threads (the apps' phases),
 * {@link #state} is thread-safe; {@link #close} once, last.
 */
public final class DemoNode implements AutoCloseable {
    static final int HEAP_SEGMENT = 1;
    static final int HEAP_CHUNK = 64 << 10;
    static final String CLUSTER_NAME = "membus-demo";
    /** Room every node's heap has for the apps' collections, beside the counters' blocks. */
    static final long APP_HEAP = 8L << 20;

    private final DsmNode node;
    /** The collections of this node: one handle per name per node (a lock needs that). */
    private final Membus membus;
    /** A property given as a full path (the others are paths under {@code membus.transports}). */
    static final String MEMBUS = "membus.";
    private final Map<Class<?>, Object> state = Collections.synchronizedMap(new LinkedHashMap<>());
    private final boolean client;

    /**
     * Starts the node and joins the demo cluster.
     *
     * @param port        this node's Pekko port (0: ephemeral)
     * @param seedPort    node 1's Pekko port, the seed every node joins
     * @param segmentSize bytes of each of the node's two segments (the second is its heap)
     * @param properties  transport settings as paths under membus.transports (shm.dir, local.fabric, tcp.*), and
     *                    full {@code membus.*} paths (e.g. membus.replication.backups)
     * @param client      a client: no segments, never counts in the split-brain decision
     */
    public DemoNode(String transport, int nodeId, int port, int seedPort, long segmentSize,
                    Map<String, String> properties, boolean client) {
        this.client = client;
        Map<String, Object> m = new HashMap<>();
        m.put("membus.node-id", nodeId);
        m.put("membus.cluster-name", CLUSTER_NAME);
        m.put("membus.host", "127.0.0.1");
        m.put("membus.port", port);
        m.put("membus.seed-nodes", List.of("127.0.0.1:" + seedPort));
        m.put("membus.transport", transport);
        // e.g. tcp.port: a path under membus.transports; a full membus.* path (demo --kill's
        // membus.replication.backups and membus.start-timeout) is taken as it is
        properties.forEach((k, v) -> m.put(k.startsWith(MEMBUS) ? k : "membus.transports." + k, v));
        m.put("membus.operation-timeout", "10s");
        if (client) {
            m.put("membus.role", "client");
            m.put("membus.segments.count", 0);
        } else {
            m.put("membus.segments.count", 2);
            m.put("membus.segments.size", segmentSize);
            m.put("membus.heap.segments", List.of(HEAP_SEGMENT));
        }
        m.put("membus.heap.chunk-size", HEAP_CHUNK);
        // a demo on one machine: form and converge quickly
        m.put("membus.failure-detection.gossip-interval", "200ms");
        m.put("pekko.cluster.seed-node-timeout", "1s");
        m.put("pekko.cluster.retry-unsuccessful-join-after", "1s");
        m.put("pekko.loglevel", "WARNING");
        this.node = DsmNode.start(NodeConfig.from(ConfigFactory.parseMap(m)));
        this.membus = Membus.wrap(node);
    }

    /** Waits until the directory shows {@code nodes} members with their segments. */
    public void awaitCluster(int nodes, Duration timeout) {
        node.awaitMembers(nodes, timeout);
    }

    public String statusLine() {
        String line = StatusText.statusLine(node.status());
        return client ? line + " | client: no memory, its blocks on the memory nodes" : line;
    }

    /** Whether this node is a client (it exports no memory). */
    public boolean isClient() {
        return client;
    }

    public DsmNode node() {
        return node;
    }

    /** The collections (map, atomics, arrays, queue, lock) as this node reaches them. */
    public Membus membus() {
        return membus;
    }

    public int nodeId() {
        return node.nodeId();
    }

    /**
     * Bytes a demo node's segments need so that its heap holds the {@code blocks}
     * blocks of {@code blockSize} of each of the {@code writers} nodes that allocate
     * there (counters), with room for the chunk table, for size-class batches cached by
     * the allocating nodes, and for the other apps' collections (more when clients, which
     * hold none, use them too: {@code writers} is the nodes per memory node, rounded up).
     */
    public static long segmentSizeFor(int blocks, int blockSize, int writers) {
        long perBlock = blockSize <= HEAP_CHUNK / 4
                ? Long.highestOneBit(blockSize + 63L) << 1
                : (blockSize + 63L + HEAP_CHUNK - 1) / HEAP_CHUNK * HEAP_CHUNK;
        long bytes = 2L * writers * blocks * perBlock + 16L * HEAP_CHUNK * writers + APP_HEAP * writers;
        return (bytes + HEAP_CHUNK - 1) / HEAP_CHUNK * HEAP_CHUNK;
    }

    /** Runs one phase of an app on this node. */
    public String run(String app, int nodes, String phase, List<String> args) {
        return DemoApps.byName(app).onNode(this, nodes, phase, args);
    }

    /**
     * The per-node state of an app, made on first use; an {@link AutoCloseable} state
     * is closed (blocks freed, threads stopped) before the node leaves.
     */
    public <T> T state(Class<T> type, Supplier<T> make) {
        synchronized (state) {
            return type.cast(state.computeIfAbsent(type, t -> make.get()));
        }
    }

    /** Closes and forgets one app state now (while every node is still there), if it exists. */
    public void closeState(Class<? extends AutoCloseable> type) throws Exception {
        Object s;
        synchronized (state) {
            s = state.remove(type);
        }
        if (s != null) {
            ((AutoCloseable) s).close();
        }
    }

    /** Closes the apps' states (newest first), then leaves the cluster. */
    @Override
    public void close() {
        try {
            List<Object> states;
            synchronized (state) {
                states = new ArrayList<>(state.values());
                state.clear();
            }
            Collections.reverse(states);
            for (Object s : states) {
                if (s instanceof AutoCloseable c) {
                    try {
                        c.close();
                    } catch (DsmException e) {
                        System.err.println("demo node " + node.nodeId() + ": freeing its blocks failed: "
                                + e.getMessage());
                    } catch (Exception e) {
                        System.err.println("demo node " + node.nodeId() + ": closing " + s + " failed: " + e);
                    }
                }
            }
        } finally {
            try {
                membus.close(); // the coherent heap, if an app used it (its skew thread); the node is not the wrap's
            } finally {
                node.close();
            }
        }
    }
}
