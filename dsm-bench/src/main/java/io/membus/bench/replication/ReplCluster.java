package io.membus.bench.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.replication.CopyReplica;
import io.membus.core.replication.GroupId;
import io.membus.core.replication.ReplicaGroup;
import io.membus.core.replication.ReplicationConfig;
import io.membus.core.replication.Replicator;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * tcp nodes of one benchmark JVM on loopback, on one {@link StaticDirectory} that is also
 * every node's claim publisher, each node with its {@link Replicator} (as dsm-core's
 * replication contract builds them). Node 1 is the initiator: it exports nothing, so it is
 * never a copy holder. Every other node exports one segment; with one backup, the copy of
 * node 2's segment is placed on the only other memory node.
 *
 * <p>"Crashing" a node is what membership does after a crash: its replicator and transport
 * are closed, then ({@link #down}) it leaves the directory.
 *
 * <p>Public for the other benchmarks' Membus peers ({@code io.membus.bench.peers}).
 *
 * <p><b>Note:</b> not thread-safe: set up and torn down by one thread (JMH's setup and
 * teardown); the nodes it returns are used by any thread, as the transports allow.
 */
public final class ReplCluster implements AutoCloseable {
    public static final Duration OP_TIMEOUT = Duration.ofSeconds(20);
    private static final String SECRET = "repl-bench-secret-0123456789abcdef";
    private static final long SETTLE_NANOS = Duration.ofSeconds(120).toNanos();

    /** One node: transport, memory, replicator and the segment it exports (null on the initiator). */
    public static final class Node {
        public final int id;
        public final Transport transport;
        public final RemoteMemory memory;
        public final Replicator replicator;
        public final Segment segment;
        boolean alive = true;

        Node(int id, Transport transport, RemoteMemory memory, Replicator replicator, Segment segment) {
            this.id = id;
            this.transport = transport;
            this.memory = memory;
            this.replicator = replicator;
            this.segment = segment;
        }

        public int group() {
            return GroupId.of(id, segment.index());
        }
    }

    public final StaticDirectory directory = new StaticDirectory();
    final ReplicationConfig config;
    private final Map<Integer, Node> nodes = new LinkedHashMap<>();

    /** {@link io.membus.core.replication.ReplicationCounts} when this cluster was made: {@link #close()} prints what changed. */
    private final long[] countsMark = io.membus.core.replication.ReplicationCounts.snapshot();

    public ReplCluster(ReplicationConfig config) {
        this.config = config;
    }

    /** Starts node {@code id}; it exports segment {@code index} of {@code size} bytes, or nothing when size is 0. */
    public Node start(int id, int index, long size) {
        TransportConfig tc = TransportConfig.builder(id).operationTimeout(OP_TIMEOUT)
                .connectTimeout(Duration.ofSeconds(10))
                .properties(properties()).build();
        Transport t = Transports.create("tcp", tc);
        directory.addMember(t.self());
        RemoteMemory mem = new RemoteMemory(t, directory, OP_TIMEOUT);
        Replicator r = new Replicator(t, mem, directory, directory, config);
        r.start();
        Segment s = null;
        if (size > 0) {
            s = t.export(SegmentSpec.of(index, size));
            directory.addSegment(s.descriptor());
            r.exported(s);
        }
        Node n = new Node(id, t, mem, r, s);
        nodes.put(id, n);
        return n;
    }

    /**
     * The nodes' transport properties: loopback, and {@code tcp.blocking-lanes} from the system
     * property {@code membus.bench.blocking-lanes} when it is set (a benchmark fork's
     * {@code -jvmArgsPrepend -Dmembus.bench.blocking-lanes=16}; the transport's default otherwise).
     */
    private static Map<String, String> properties() {
        Map<String, String> p = new java.util.HashMap<>(Map.of("tcp.secret", SECRET, "tcp.host", "127.0.0.1",
                "tcp.port", "0"));
        String lanes = System.getProperty("membus.bench.blocking-lanes");
        if (lanes != null) {
            p.put("tcp.blocking-lanes", lanes);
        }
        return p;
    }

    public Node node(int id) {
        return nodes.get(id);
    }

    public ReplicaGroupView view(int group) {
        return directory.group(GroupId.node(group), GroupId.index(group)).orElse(null);
    }

    /** The group is served by {@code primary} with {@code copies} in-sync copies, every change acknowledged by all. */
    boolean settled(int group, int primary, int copies) {
        if (!config.enabled()) {
            return true; // replication off: no group, the segment is served as before
        }
        ReplicaGroupView v = view(group);
        if (v == null || v.state() != ReplicaGroupView.State.SERVING || v.primary() != primary
                || v.inSync().length != copies) {
            return false;
        }
        ReplicaGroup g = node(primary).replicator.primary(group);
        if (g == null || g.watermark() != g.lastSeq() || g.joining().length != 0 || g.inSync().length != copies) {
            return false;
        }
        for (int c : v.inSync()) {
            CopyReplica copy = node(c).replicator.copy(group);
            if (copy == null || !copy.inSync() || copy.applied() != g.lastSeq()) {
                return false;
            }
        }
        return true;
    }

    public void awaitSettled(int group, int primary, int copies) {
        await("segment " + GroupId.toString(group) + " served by node " + primary + " with " + copies
                + " in-sync copies", () -> settled(group, primary, copies));
    }

    /** Waits (polling) for {@code condition}, at most two minutes; a typed timeout beyond. */
    static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + SETTLE_NANOS;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new DsmTimeoutException("benchmark setup: " + what, 0, Duration.ofNanos(SETTLE_NANOS),
                        "the machine may be too loaded for this benchmark: run it again on a quieter machine");
            }
            LockSupport.parkNanos(1_000_000L);
        }
    }

    /** The crash: replicator and transport closed (not yet downed). */
    void kill(Node n) {
        n.alive = false;
        n.replicator.close();
        n.transport.close();
    }

    /** The downing event: membership removes the node. */
    void down(Node n) {
        directory.removeMember(n.id, "downed (benchmark)");
    }

    /**
     * The voluntary context switches (a thread that slept and was woken: the wake-ups of docs/replication.md
     * §3.5.2) of this JVM's live threads, summed by thread name without digits (Linux {@code /proc}; empty
     * elsewhere), and their CPU time. Threads that ended are not counted.
     */
    static String contextSwitches() {
        java.util.Map<String, Long> byName = new java.util.TreeMap<>();
        java.util.Map<String, Long> cpuTicks = new java.util.TreeMap<>();
        java.io.File[] tasks = new java.io.File("/proc/self/task").listFiles();
        if (tasks == null) {
            return "";
        }
        for (java.io.File t : tasks) {
            try {
                String name = java.nio.file.Files.readString(new java.io.File(t, "comm").toPath()).trim()
                        .replaceAll("[0-9]+", "N");
                for (String line : java.nio.file.Files.readAllLines(new java.io.File(t, "status").toPath())) {
                    if (line.startsWith("voluntary_ctxt_switches:")) {
                        byName.merge(name, Long.parseLong(line.substring(line.indexOf(':') + 1).trim()), Long::sum);
                    }
                }
                String stat = java.nio.file.Files.readString(new java.io.File(t, "stat").toPath());
                String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                cpuTicks.merge(name, Long.parseLong(f[11]) + Long.parseLong(f[12]), Long::sum); // utime + stime
            } catch (java.io.IOException | RuntimeException e) {
                // the thread ended meanwhile
            }
        }
        return byName + "; their CPU time in clock ticks (user + system, usually 10 ms): " + cpuTicks;
    }

    @Override
    public void close() {
        System.out.println("[repl] counted since the cluster started: " + io.membus.core.replication.ReplicationCounts
                .since(countsMark) + "; voluntary context switches of this JVM's live threads by name: "
                + contextSwitches());
        List<Node> all = new ArrayList<>(nodes.values());
        nodes.clear();
        for (Node n : all) {
            if (n.alive) {
                n.alive = false;
                n.replicator.close();
                n.transport.close();
            }
        }
    }
}
