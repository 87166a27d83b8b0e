package io.membus.samples.stress;

import io.membus.core.error.DsmConfigException;
import io.membus.samples.proc.NodeProcess;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The node processes of one stress run on this machine: one {@link NodeProcess} per
 * node id, each with a fixed Pekko port and every memory node a seed (so that any node,
 * node 1 included, can be killed and started again into the same cluster). Memory nodes
 * are ids {@code 1..nodes}; client nodes (no memory, never seeds) follow them. Segment
 * files live in one directory of the run under {@code /dev/shm}, removed by
 * {@link #close()}; a shutdown hook (Ctrl-C) kills the processes by pid and removes it
 * too.
 *
 * <p><b>Note:</b> thread-safe: the driver and the nemesis share it; the processes
 * are swapped under this object's lock.
 */
final class StressCluster implements AutoCloseable {
    private static final List<String> QUIET_NODE = List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.log.org.apache.pekko=error");

    private final String transport;
    private final int nodes;
    private final int members;
    private final int timeoutSeconds;
    private final int operationTimeoutMillis;
    private final int backups;
    private final Path runDir;
    private final int[] ports;
    private final Map<String, String> properties = new LinkedHashMap<>();
    private final Map<String, String> env = new LinkedHashMap<>();
    private final NodeProcess[] processes;
    private final int[] lives;
    private final PrintStream log;
    private final Thread hook;
    private boolean closed;
    private volatile Restarted onRestart = (id, p, life) -> {
    };

    /** What happens when a killed node has been started again and has rejoined (the workload starts on it). */
    interface Restarted {
        void started(int nodeId, NodeProcess process, int life) throws Exception;
    }

    StressCluster(String transport, int nodes, int clientNodes, int timeoutSeconds, int operationTimeoutMillis,
                  PrintStream log) throws IOException {
        this(transport, nodes, clientNodes, timeoutSeconds, operationTimeoutMillis, -1, log);
    }

    /** @param backups {@code membus.replication.backups} of every memory node, or -1 for reference.conf's default */
    StressCluster(String transport, int nodes, int clientNodes, int timeoutSeconds, int operationTimeoutMillis,
                  int backups, PrintStream log) throws IOException {
        this.backups = backups;
        this.transport = transport;
        this.nodes = nodes;
        this.members = nodes + clientNodes;
        this.timeoutSeconds = timeoutSeconds;
        this.operationTimeoutMillis = operationTimeoutMillis;
        this.log = log;
        Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
        this.runDir = root.resolve("membus-stress-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        Files.createDirectories(runDir.resolve("data"));
        // a cluster secret of this run's own (membership TLS, and tcp's peers), in the environment, never on the command line
        byte[] secret = new byte[16];
        new SecureRandom().nextBytes(secret);
        env.put(StressNodeCommand.SECRET_ENV, HexFormat.of().formatHex(secret));
        switch (transport) {
            case "shm" -> properties.put("shm.dir", runDir.toString());
            case "tcp" -> {
                properties.put("tcp.host", "127.0.0.1");
                properties.put("tcp.port", "0");
            }
            default -> throw new DsmConfigException("--transport", transport, "shm, tcp");
        }
        this.ports = new int[members + 1];
        for (int id = 1; id <= members; id++) {
            ports[id] = freePort();
        }
        this.processes = new NodeProcess[members + 1];
        this.lives = new int[members + 1];
        this.hook = new Thread(this::close, "membus-stress-cleanup");
        Runtime.getRuntime().addShutdownHook(hook);
    }

    Path runDir() {
        return runDir;
    }

    /** The memory nodes: ids 1..nodes. */
    int nodes() {
        return nodes;
    }

    /** Every node process, memory nodes and clients: ids 1..members. */
    int members() {
        return members;
    }

    boolean isClient(int id) {
        return id > nodes;
    }

    /** Starts every node and waits for each to join; returns their status lines. */
    List<String> start(long deadline) throws Exception {
        for (int id = 1; id <= members; id++) {
            launch(id);
        }
        List<String> ready = new ArrayList<>();
        for (int id = 1; id <= members; id++) {
            ready.add(awaitReady(id, deadline));
        }
        return ready;
    }

    private synchronized NodeProcess launch(int id) throws IOException {
        if (closed) {
            throw new IllegalStateException("the stress run is ending: node " + id + " is not started again");
        }
        List<String> seeds = new ArrayList<>();
        for (int s = 1; s <= nodes; s++) {
            seeds.add("127.0.0.1:" + ports[s]);
        }
        if (processes[id] != null && !isClient(id)) {
            // started again: only the first seed may start a cluster on its own, and a node coming back
            // must join the running one (whose members may not answer it until they drop its old
            // incarnation), never found an island of its own; so it lists itself last
            seeds.remove("127.0.0.1:" + ports[id]);
            seeds.add("127.0.0.1:" + ports[id]);
        }
        List<String> args = new ArrayList<>(List.of("stress-node", "--transport", transport,
                "--node-id", Integer.toString(id), "--nodes", Integer.toString(nodes),
                "--members", Integer.toString(members),
                "--port", Integer.toString(ports[id]), "--seeds", String.join(",", seeds),
                "--data-dir", runDir.resolve("data").toString(),
                "--operation-timeout-ms", Integer.toString(operationTimeoutMillis),
                "--timeout", Integer.toString(timeoutSeconds)));
        if (isClient(id)) {
            args.add("--client");
        } else if (backups >= 0) {
            args.add("--backups");
            args.add(Integer.toString(backups));
        }
        properties.forEach((k, v) -> {
            args.add("--property");
            args.add(k + "=" + v);
        });
        NodeProcess p = new NodeProcess("node " + id, QUIET_NODE, args, env, line -> log.println(line));
        processes[id] = p;
        return p;
    }

    /**
     * Waits for node {@code id}'s READY and checks that its {@code System.nanoTime()}
     * shares this JVM's origin (CLOCK_MONOTONIC on Linux): histories from every process
     * are put on one time line.
     */
    String awaitReady(int id, long deadline) throws Exception {
        NodeProcess p = process(id);
        long before = System.nanoTime();
        String ready = p.expect("READY ", deadline);
        long after = System.nanoTime();
        String[] f = ready.split(" ", 2);
        long theirs = Long.parseLong(f[0]);
        if (theirs > after + 1_000_000_000L || theirs < before - 600_000_000_000L) {
            throw new IllegalStateException("node " + id + "'s System.nanoTime() (" + theirs + ") is not on this "
                    + "process's time line (" + before + ".." + after + "): the stress histories need one monotonic"
                    + " clock for every process of the machine (Linux CLOCK_MONOTONIC)");
        }
        return f[1] + " (pid " + p.pid() + ")";
    }

    synchronized NodeProcess process(int id) {
        return processes[id];
    }

    /** How many times node {@code id} was started before its current process (0 for the first). */
    synchronized int life(int id) {
        return lives[id];
    }

    /** Starts node {@code id} again (after {@link #kill}), same id and port: a new incarnation. */
    NodeProcess restart(int id) throws IOException {
        synchronized (this) {
            lives[id]++;
        }
        return launch(id);
    }

    void onRestart(Restarted action) {
        this.onRestart = action;
    }

    /**
     * Sends a command to node {@code id} and waits for its answer; a node that is
     * down (killed, not yet started again) is skipped: it starts with no fault.
     */
    void command(int id, String command, String answerPrefix, long deadline) throws Exception {
        NodeProcess p = process(id);
        synchronized (p) {
            if (p.isAlive()) {
                p.send(command);
                p.expect(answerPrefix, deadline);
            }
        }
    }

    /**
     * Asks node {@code id} for its view of the replica groups ({@code GROUPS}); null when
     * the node is down.
     *
     * @return {@code [groups, short or not in sync]} and the members it lists, or null
     */
    GroupView groups(int id, long deadline) throws Exception {
        NodeProcess p = process(id);
        synchronized (p) {
            if (!p.isAlive()) {
                return null;
            }
            p.send("GROUPS");
            String[] f = p.expect("GROUPS ", deadline).split(" ");
            java.util.Set<Integer> members = new java.util.TreeSet<>();
            if (!f[2].equals("-")) {
                for (String m : f[2].split(",")) {
                    members.add(Integer.parseInt(m));
                }
            }
            return new GroupView(Integer.parseInt(f[0]), Integer.parseInt(f[1]), members);
        }
    }

    /** One node's view of the replica groups: how many, how many need attention, and the members it lists. */
    record GroupView(int groups, int groupsShort, java.util.Set<Integer> members) {
    }

    /**
     * The kill-permanent nemesis' view of the cluster: whole again when every live node
     * lists none of the killed nodes and sees every replica group served with its copies
     * in sync; a live memory node holds groups (its own segments are groups it serves).
     */
    io.membus.test.nemesis.ProcessNemesis.ReplicaHealth replicaHealth() {
        return new io.membus.test.nemesis.ProcessNemesis.ReplicaHealth() {
            @Override
            public boolean inSync(java.util.Set<Integer> gone) {
                long deadline = System.nanoTime() + 10_000_000_000L;
                try {
                    boolean anyGroups = false;
                    for (int id = 1; id <= members; id++) {
                        GroupView v = groups(id, deadline);
                        if (v == null) {
                            continue;
                        }
                        if (v.groupsShort() != 0 || v.members().stream().anyMatch(gone::contains)) {
                            return false;
                        }
                        anyGroups |= v.groups() > 0;
                    }
                    return anyGroups;
                } catch (Exception e) {
                    throw new IllegalStateException("could not ask the nodes for their replica groups: "
                            + e.getMessage(), e);
                }
            }

            @Override
            public boolean holdsGroups(int nodeId) {
                NodeProcess p = process(nodeId);
                return !isClient(nodeId) && p != null && p.isAlive();
            }
        };
    }

    /** The memory nodes (ids 1..nodes) as the kit's process nemeses see them. */
    List<io.membus.test.nemesis.NodeProcess> kitMemoryProcesses() {
        return kitProcesses().subList(0, nodes);
    }

    /** The nodes as the test kit's process nemeses see them: kill -9, and restart until rejoined and running. */
    List<io.membus.test.nemesis.NodeProcess> kitProcesses() {
        List<io.membus.test.nemesis.NodeProcess> all = new ArrayList<>();
        for (int id = 1; id <= members; id++) {
            int nodeId = id;
            all.add(new io.membus.test.nemesis.NodeProcess() {
                @Override
                public int nodeId() {
                    return nodeId;
                }

                @Override
                public long pid() {
                    return process(nodeId).pid();
                }

                @Override
                public void kill() {
                    process(nodeId).kill();
                }

                @Override
                public void restart() {
                    try {
                        NodeProcess fresh = StressCluster.this.restart(nodeId);
                        awaitReady(nodeId, System.nanoTime() + timeoutSeconds * 1_000_000_000L);
                        onRestart.started(nodeId, fresh, life(nodeId));
                    } catch (RuntimeException e) {
                        throw e;
                    } catch (Exception e) {
                        throw new IllegalStateException("node " + nodeId + " did not come back after kill -9: "
                                + e.getMessage(), e);
                    }
                }

                @Override
                public String toString() {
                    return "node " + nodeId;
                }
            });
        }
        return all;
    }

    /** Every process leaves (EXIT, then killed after a grace period), and the run's /dev/shm folder goes. */
    @Override
    public void close() {
        NodeProcess[] all;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            all = processes.clone();
        }
        for (NodeProcess p : all) {
            if (p != null) {
                p.exit();
            }
        }
        // on Ctrl-C the user is waiting: a short grace, then kill -9 (by pid); at the end of a run, time to leave.
        // One grace for all of them, counted from the EXIT they were all sent together: each its own grace, one
        // after the other, let a run whose nodes could not leave (a member killed for good and not yet downed
        // blocks the leave) wait 15 s per node
        int grace = Thread.currentThread() == hook ? 3 : 15;
        long graceEnds = System.nanoTime() + grace * 1_000_000_000L;
        for (NodeProcess p : all) {
            if (p != null) {
                long left = graceEnds - System.nanoTime();
                p.destroy(left <= 0 ? 0 : (int) ((left + 999_999_999L) / 1_000_000_000L));
            }
        }
        deleteTree(runDir);
        if (Thread.currentThread() != hook) {
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException e) {
                // the JVM is shutting down; the hook finds everything done
            }
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    static void deleteTree(Path dir) {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            System.err.println("membus stress: could not remove " + dir + ": " + e.getMessage());
        }
    }
}
