package io.membus.samples.stress;

import io.membus.samples.cluster.StatusText;
import com.typesafe.config.ConfigFactory;
import io.membus.cluster.DsmNode;
import io.membus.alloc.Placement;
import io.membus.codec.Codecs;
import io.membus.coherence.CoherentHeap;
import io.membus.coherence.RemoteRef;
import io.membus.collections.DsmLongArray;
import io.membus.collections.DsmCollections;
import io.membus.collections.DsmMap;
import io.membus.cluster.NodeConfig;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.time.SkewableClock;
import io.membus.core.fault.FaultInjector;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * {@code membus stress-node}: one node process of {@code membus stress}, driven over
 * its standard input and output, one line per step:
 *
 * <pre>
 *   node   -> stress : READY &lt;nanoTime&gt; &lt;status line&gt;    (joined; every node's segment is in the directory)
 *   stress -> node   : RUN &lt;workload&gt; &lt;clients&gt; &lt;keys&gt; &lt;fromNanos&gt; &lt;untilNanos&gt; &lt;seed&gt; &lt;gapNanos&gt; &lt;plant 0|1&gt; &lt;life&gt; &lt;history file&gt;
 *   node   -> stress : RUNNING                     (clients started; they run from fromNanos to untilNanos)
 *   node   -> stress : DONE &lt;ops&gt; &lt;unknown&gt;        (every client finished)
 *   stress -> node   : RULES &lt;rules&gt; &lt;skewMicros&gt;     (this node's faults, replacing the previous ones)
 *                        rules: - (none) or peer:drop and peer:delay:millis, comma-separated
 *   node   -> stress : FAULT &lt;what is in force&gt;
 *   stress -> node   : GROUPS                      (the replica groups as this node's directory sees them)
 *   node   -> stress : GROUPS &lt;groups&gt; &lt;short or not in sync&gt; &lt;members, comma-separated&gt;
 *   stress -> node   : STREAM &lt;peer&gt; skip &lt;seq&gt; | STREAM &lt;peer&gt; heal  (a replication stream rule of
 *                        this node as a copy of peer's groups: acknowledge the effect of seq unapplied)
 *   node   -> stress : FAULT &lt;what is in force&gt;
 *   stress -> node   : EXIT
 * </pre>
 *
 * Segment 0 of every memory node holds raw words (the {@code -verbs} workloads: key {@code k}
 * is word {@code k} of segment 0 of node {@code k % nodes + 1}); segment 1 is a heap of
 * the global allocator where the collections live ({@link CollectionWorkloads}). A client
 * node ({@code --client}) exports nothing: it runs the same client threads, on the memory
 * nodes' words and collections.
 * Segments are file-backed, so a node killed with {@code kill -9} and started again
 * with the same id has its memory back. A closed
 * standard input ends the node. Not meant to be run by hand.
 *
 * <p><b>Note:</b> one instance per process; client threads share only the history
 * log and the counters.
 */
@Command(name = "stress-node", hidden = true, description = "One node process of membus stress (driven by it).")
public final class StressNodeCommand implements java.util.concurrent.Callable<Integer> {

    static final String CLUSTER_NAME = "membus-stress";
    /** The run's cluster secret (membus.secret), passed in the environment, not on the command line. */
    static final String SECRET_ENV = "MEMBUS_STRESS_SECRET";

    @Option(names = "--transport", required = true)
    String transport;

    @Option(names = "--node-id", required = true)
    int nodeId;

    @Option(names = "--nodes", required = true)
    int nodes;

    @Option(names = "--members", description = "every node process of the run, clients included (default: --nodes)")
    Integer members;

    @Option(names = "--client", description = "a client node: no segments (its collections live on the memory nodes)")
    boolean client;

    @Option(names = "--port", required = true)
    int port;

    @Option(names = "--seeds", required = true, split = ",")
    List<String> seeds;

    @Option(names = "--data-dir", required = true)
    Path dataDir;

    @Option(names = "--operation-timeout-ms", defaultValue = "1000")
    int operationTimeoutMillis;

    @Option(names = "--timeout", defaultValue = "90")
    int timeoutSeconds;

    @Option(names = "--backups", defaultValue = "-1",
            description = "membus.replication.backups of a memory node (-1: the default of reference.conf)")
    int backups;

    @Option(names = "--property")
    Map<String, String> properties = new HashMap<>();

    private final SkewableClock clock = new SkewableClock();
    private final PrintStream out = System.out;

    @Override
    public Integer call() throws Exception {
        try (DsmNode node = DsmNode.start(NodeConfig.from(ConfigFactory.parseMap(config())))) {
            node.awaitMembers(members == null ? nodes : members, Duration.ofSeconds(timeoutSeconds));
            answer("READY " + System.nanoTime() + " " + StatusText.statusLine(node.status())
                    + (client ? " | client: no memory" : ""));
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                String[] f = line.split(" ");
                switch (f[0]) {
                    case "RUN" -> run(node, f);
                    case "SETUP" -> answer("SETUP " + setupRefs(node, Integer.parseInt(f[1])));
                    case "RULES" -> {
                        FaultInjector faults = node.faults();
                        faults.clear();
                        if (!f[1].equals("-")) {
                            for (String rule : f[1].split(",")) {
                                String[] r = rule.split(":");
                                int peer = Integer.parseInt(r[0]);
                                if (r[1].equals("drop")) {
                                    faults.drop(peer);
                                } else {
                                    faults.delay(peer, Duration.ofMillis(Long.parseLong(r[2])));
                                }
                            }
                        }
                        clock.skewMicros(Long.parseLong(f[2]));
                        answer("FAULT rules " + f[1] + ", clock skew " + f[2] + " us");
                    }
                    case "GROUPS" -> {
                        io.membus.cluster.NodeStatus st = node.status();
                        answer("GROUPS " + st.groups() + " " + st.groupsShort() + " " + (st.members().isEmpty() ? "-"
                                : String.join(",", st.members().stream().map(String::valueOf).toList())));
                    }
                    case "STREAM" -> {
                        FaultInjector.StreamRule rule = node.faults().stream(Integer.parseInt(f[1]));
                        if (f[2].equals("skip")) {
                            rule.skip(Long.parseLong(f[3]));
                        } else {
                            rule.heal();
                        }
                        answer("FAULT stream " + f[1] + " " + f[2] + (f.length > 3 ? " " + f[3] : ""));
                    }
                    case "EXIT" -> {
                        stopClients();
                        return 0;
                    }
                    default -> answer("ERROR unknown command: " + line);
                }
            }
            stopClients();
            System.err.println("stress-node " + nodeId + ": the stress run closed its pipe; shutting down");
            return 2;
        } catch (RuntimeException e) {
            answer("ERROR " + String.valueOf(e.getMessage()).replace('\n', ' '));
            throw e;
        }
    }

    private Map<String, Object> config() {
        Map<String, Object> m = new HashMap<>();
        m.put("membus.node-id", nodeId);
        m.put("membus.cluster-name", CLUSTER_NAME);
        m.put("membus.host", "127.0.0.1");
        m.put("membus.port", port);
        m.put("membus.seed-nodes", seeds);
        m.put("membus.transport", transport);
        properties.forEach((k, v) -> m.put("membus.transports." + k, v)); // e.g. tcp.port: a path under it
        String secret = System.getenv(SECRET_ENV);
        if (secret != null && !secret.isEmpty()) {
            m.put("membus.secret", secret); // the run's cluster secret: membership and the transport
        }
        m.put("membus.operation-timeout", operationTimeoutMillis + "ms");
        m.put("membus.connect-timeout", "2s");
        m.put("membus.start-timeout", timeoutSeconds + "s");
        if (client) {
            m.put("membus.role", "client");
            m.put("membus.segments.count", 0);
        } else {
            m.put("membus.segments.count", 2);
            m.put("membus.segments.size", 8 << 20);
            m.put("membus.heap.segments", List.of(1));
            m.put("membus.heap.chunk-size", 64 << 10);
            m.put("membus.segments.file-backed", true);
            m.put("membus.segments.dir", dataDir.toString());
            if (backups >= 0) {
                m.put("membus.replication.backups", backups);
            }
        }
        m.put("membus.failure-detection.gossip-interval", "200ms");
        m.put("pekko.cluster.seed-node-timeout", "1s");
        m.put("pekko.cluster.retry-unsuccessful-join-after", "1s");
        m.put("pekko.loglevel", "WARNING");
        return m;
    }

    private void answer(String line) {
        synchronized (out) {
            out.println(line);
            out.flush();
        }
    }

    private final List<Thread> clients = new ArrayList<>();
    private volatile boolean stop;

    private void stopClients() throws InterruptedException {
        stop = true;
        for (Thread t : clients) {
            t.join(10_000);
        }
        synchronized (this) {
            if (membus != null) {
                membus.close(); // closes the heap; the node is this command's to close
            }
        }
    }

    /** The word of key {@code k}: word k of segment 0 of node k % nodes + 1. */
    private long word(DsmNode node, int key) {
        int home = key % nodes + 1;
        SegmentDescriptor s = node.directory().segment(home, 0).orElseThrow(() -> new NodeUnavailableException(home,
                "segment 0 of node " + home + " is not in the directory; the node is down or restarting"));
        return s.pointer(8L * key);
    }

    private io.membus.Membus membus;
    private DsmMap<String, Long> map;

    /** The node's collections: one handle per name per node (locks need that). */
    private synchronized DsmCollections collections(DsmNode node) {
        if (membus == null) {
            membus = io.membus.Membus.wrap(node, clock); // its heap's lease clock is the one the skew nemesis moves
        }
        return membus.collections();
    }

    /** The run's one map, found by name (the first node to bind it creates it). */
    private synchronized DsmMap<String, Long> map(DsmNode node) {
        if (map == null) {
            map = collections(node).map("stress-map", Codecs.strings(), Codecs.longs());
        }
        return map;
    }

    private volatile int refKeys;
    private final Map<Integer, RemoteRef<Long>> refs = new HashMap<>();

    /**
     * This node's coherent heap, the facade's (one per node: it owns the coherence channels,
     * which the collections' leased maps use too); its lease clock is the one the skew
     * nemesis moves.
     */
    private synchronized CoherentHeap coherent(DsmNode node) {
        collections(node);
        return membus.heap();
    }

    /** Node 1, before the run: one coherent object per key, on node k % nodes + 1, their words in a named array. */
    private String setupRefs(DsmNode node, int keys) {
        DsmLongArray words = collections(node).longArray("stress-refs", 2 * keys);
        for (int k = 0; k < keys; k++) {
            RemoteRef<Long> r = coherent(node).create(Codecs.longs(), 0L, Placement.node(k % nodes + 1));
            words.set(2 * k, r.ptr());
            words.set(2 * k + 1, r.generationHeader());
        }
        return keys + " coherent objects";
    }

    /** The coherent object of key {@code k}, opened from the named array, read with caching on. */
    private synchronized RemoteRef<Long> ref(DsmNode node, int k) {
        return refs.computeIfAbsent(k, key -> {
            DsmLongArray words = collections(node).longArray("stress-refs", 2 * refKeys);
            return coherent(node).open(words.get(2 * key), words.get(2 * key + 1), Codecs.longs()).cached(true);
        });
    }

    private void run(DsmNode node, String[] f) {
        String workload = f[1];
        int clientCount = Integer.parseInt(f[2]);
        int keys = Integer.parseInt(f[3]);
        refKeys = keys;
        long from = Long.parseLong(f[4]);
        long until = Long.parseLong(f[5]);
        long seed = Long.parseLong(f[6]);
        long gapNanos = Long.parseLong(f[7]);
        boolean plant = f[8].equals("1");
        int life = Integer.parseInt(f[9]);
        HistoryLog log = new HistoryLog(Path.of(f[10]));
        AtomicLong ops = new AtomicLong();
        AtomicLong unknown = new AtomicLong();
        SplittableRandom seeds = new SplittableRandom(seed ^ (nodeId * 0x9E3779B97F4A7C15L) ^ life);
        for (int c = 0; c < clientCount; c++) {
            SplittableRandom random = seeds.split();
            long base = ((nodeId * 100L + life) * 100 + c) * 1_000_000L;
            Workload w = switch (workload) {
                case "register-verbs" -> new WordWorkloads.Register(k -> WordWorkloads.raw(node.remoteMemory(),
                        word(node, k)), true, plant, random.split());
                case "counter-verbs" -> new WordWorkloads.Counter(k -> WordWorkloads.raw(node.remoteMemory(),
                        word(node, k)), plant, random.split());
                case "register" -> new WordWorkloads.Register(CollectionWorkloads.atomicLongs(collections(node),
                        "stress-register-", nodes), true, plant, random.split());
                case "register-coherent" -> new WordWorkloads.Register(k -> WordWorkloads.coherent(ref(node, k)),
                        false, plant, random.split());
                case "counter" -> new WordWorkloads.Counter(CollectionWorkloads.atomicLongs(collections(node),
                        "stress-counter-", nodes), plant, random.split());
                case "map" -> new CollectionWorkloads.MapKeys(map(node));
                case "queue" -> new CollectionWorkloads.Queues(collections(node), nodes, base * 1000);
                case "lock" -> new CollectionWorkloads.Locks(collections(node), nodes);
                default -> throw new IllegalArgumentException("workload " + workload + " is not built into this"
                        + " node; allowed: register, counter, map, queue, lock, register-verbs, counter-verbs");
            };
            Thread t = new Thread(() -> client(w, random, keys, from, until, gapNanos, base, log, ops, unknown),
                    "stress-client-" + nodeId + "-" + c);
            t.setDaemon(true);
            clients.add(t);
        }
        clients.forEach(Thread::start);
        answer("RUNNING");
        Thread waiter = new Thread(() -> {
            try {
                for (Thread t : clients) {
                    t.join();
                }
                log.close();
                answer("DONE " + ops.get() + " " + unknown.get());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "stress-done");
        waiter.setDaemon(true);
        waiter.start();
    }

    /**
     * One client: invoke, run, complete, pause; until the deadline. After an operation
     * with an unknown outcome the client continues as a new process (the old one may
     * still have that operation in flight, as a Jepsen client would).
     */
    private void client(Workload w, SplittableRandom random, int keys, long from, long until, long gapNanos,
                        long base, HistoryLog log, AtomicLong ops, AtomicLong unknown) {
        for (long wait = from - System.nanoTime(); wait > 0 && !stop; wait = from - System.nanoTime()) {
            LockSupport.parkNanos(wait);
        }
        long process = base;
        while (!stop && System.nanoTime() - until < 0) {
            int key = w.key(random.nextInt(keys));
            Workload.Call call = w.next(random);
            log.append(new Event(process, Event.Type.INVOKE, call.f(), key, call.a(), call.b(), System.nanoTime()));
            Event.Type type;
            long a = call.a();
            long b = call.b();
            try {
                Workload.Outcome o = w.run(key, call);
                type = o.type();
                a = o.a();
                b = o.b();
            } catch (DsmException e) {
                boolean certainlyNot = w.readOnly(call) || (w.preciseFailure(call) && !e.mayHaveRun());
                type = certainlyNot ? Event.Type.FAIL : Event.Type.INFO;
            } catch (RuntimeException e) {
                System.err.println("stress client " + process + ": " + e);
                type = w.readOnly(call) ? Event.Type.FAIL : Event.Type.INFO;
            }
            log.append(new Event(process, type, call.f(), key, a, b, System.nanoTime()));
            ops.incrementAndGet();
            if (type == Event.Type.INFO) {
                unknown.incrementAndGet();
                process++;
            }
            if (gapNanos > 0) {
                LockSupport.parkNanos(gapNanos / 2 + random.nextLong(gapNanos));
            }
        }
    }
}
