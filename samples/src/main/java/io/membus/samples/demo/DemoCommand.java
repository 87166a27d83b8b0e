package io.membus.samples.demo;

import io.membus.core.error.DsmConfigException;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.capability.TransportCapabilities;

import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * {@code membus demo [app]}: starts a cluster of nodes on this machine — separate
 * processes over {@code shm} (default) or {@code tcp}, or threads of this JVM over
 * {@code local} — each a {@link io.membus.cluster.DsmNode} that joins one Pekko
 * cluster on loopback (node 1 is the seed) and finds the others' segments in the
 * replicated directory; then runs the apps ({@link DemoApp}: every app this build
 * has, or the one named), each printing what it did and a checked result.
 *
 * <p><b>Note:</b> one instance per run.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = "Run a multi-node Membus cluster on this machine running small shared-state apps, and check "
                + "their results.")
public final class DemoCommand implements Callable<Integer> {

    @Parameters(index = "0", arity = "0..1", paramLabel = "APP",
            description = "the app to run alone: counters, kv, bank, jobs, params (default: every app this build has, in turn)")
    String app;

    /** Nodes: 3, or what --nodes said; {@link #call()} makes it 4 with --kill. */
    int nodes = 3;
    private boolean nodesGiven;

    @Option(names = "--nodes", description = "number of nodes, 2..16 (default: 3; 4 with --kill: 3 memory nodes, so"
            + " that the 2 left after the kill are a majority of them and are not downed by the split-brain resolver)")
    void nodes(int n) {
        nodes = n;
        nodesGiven = true;
    }

    @Option(names = "--clients", defaultValue = "1",
            description = "how many of the nodes are clients, the last ones: they export no memory and use the apps'"
                    + " collections like the others, every block they make placed on the memory nodes; 0.."
                    + "nodes-1 (default: ${DEFAULT-VALUE})")
    int clients;

    @Option(names = "--transport",
            description = "shm: node processes sharing memory under /dev/shm; tcp: node processes over loopback TCP; "
                    + "local: nodes as threads of this JVM (default: shm; tcp with --kill)")
    String transport;

    @Option(names = "--ops", defaultValue = "20000",
            description = "operations per node: counters does this many fetch-and-adds per counter (default: ${DEFAULT-VALUE})")
    int ops;

    @Option(names = "--blocks", defaultValue = "64", description = "blocks each node writes and reads back (default: ${DEFAULT-VALUE})")
    int blocks;

    @Option(names = "--block-size", defaultValue = "1024", description = "bytes per block (default: ${DEFAULT-VALUE})")
    int blockSize;

    @Option(names = "--seed", description = "seed of the apps' random choices (default: random, printed)")
    Long seed;

    @Option(names = "--kill", description = "jobs: kill -9 a memory node that holds the app's queue, array or counter"
            + " mid-run, never restarted; with replication on (membus.replication.backups = 1) its copies are promoted"
            + " and every check still holds (node processes over tcp; jobs runs last)")
    boolean kill;

    @Option(names = "--timeout", defaultValue = "120", description = "seconds the whole demo may take (default: ${DEFAULT-VALUE})")
    int timeoutSeconds;

    @Option(names = "--hold", defaultValue = "0",
            description = "seconds to keep the cluster up after the check, for `membus status` (default: ${DEFAULT-VALUE})")
    int holdSeconds;

    /** Node processes log warnings only; their output is the demo's protocol. */
    static final List<String> QUIET_NODE = List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.log.org.apache.pekko=error");

    private final PrintStream out = System.out;
    private volatile boolean aborting;

    @Override
    public Integer call() throws Exception {
        if (transport == null) {
            transport = kill ? "tcp" : "shm";
        }
        if (kill && !nodesGiven) {
            nodes = 4;
        }
        validate();
        List<DemoApp> apps = app == null ? DemoApps.all() : List.of(DemoApps.byName(app));
        if (kill && apps.size() > 1) {
            // the killed memory node is gone for good: the app that kills it runs after the others
            List<DemoApp> ordered = new ArrayList<>(apps.stream().filter(a -> !a.name().equals("jobs")).toList());
            apps.stream().filter(a -> a.name().equals("jobs")).forEach(ordered::add);
            apps = ordered;
        }
        long runSeed = seed != null ? seed : ThreadLocalRandom.current().nextLong();
        DemoOptions options = new DemoOptions(ops, blocks, blockSize, runSeed, kill, clients);
        int memoryNodes = nodes - clients;
        long segmentSize = DemoNode.segmentSizeFor(blocks, blockSize, (nodes + memoryNodes - 1) / memoryNodes);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        List<DemoNodeHandle> handles = new ArrayList<>();
        Path shmDir = null;
        Path[] hookShmDir = new Path[1];
        Thread hook = installHook(handles, hookShmDir);
        try {
            Map<String, String> props = new LinkedHashMap<>();
            String where;
            switch (transport) {
                case "local" -> {
                    quietInProcessNodes();
                    props.put("local.fabric", "demo-" + ProcessHandle.current().pid());
                    where = "as threads of this JVM over local";
                }
                case "shm" -> {
                    Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
                    shmDir = root.resolve("membus-demo-" + ProcessHandle.current().pid());
                    props.put("shm.dir", shmDir.toString());
                    hookShmDir[0] = shmDir;
                    where = "as separate processes over shm (" + shmDir + ")";
                }
                case "tcp" -> {
                    // no secret here: every node uses this user's cluster secret file (membus.secret-file, made on
                    // first use) for membership and tcp alike, so `membus status` reaches a --hold cluster as it is
                    props.put("tcp.host", "127.0.0.1");
                    props.put("tcp.port", "0");
                    where = "as separate processes over tcp (127.0.0.1)";
                }
                default -> throw new DsmConfigException("--transport", transport, "shm, tcp, local");
            }
            if (kill) {
                props.put("membus.replication.backups", "1"); // every memory node: one copy of each segment
                // the first copies are made while the nodes join: give the join the demo's whole --timeout
                props.put("membus.start-timeout", timeoutSeconds + "s");
                where += ", replication on (membus.replication.backups = 1)";
            }
            out.printf("membus demo: %d nodes %s%s; apps: %s (seed %d)%n", nodes, where, clients == 0 ? ""
                            : "; " + (memoryNodes == 1 ? "node 1 holds" : "nodes 1-" + memoryNodes + " hold")
                            + " the memory, " + (clients == 1 ? "node " + nodes + " is a client" : "nodes "
                            + (memoryNodes + 1) + "-" + nodes + " are clients") + " (no memory of "
                            + (clients == 1 ? "its" : "their") + " own; every app runs there too)",
                    apps.stream().map(DemoApp::name).collect(Collectors.joining(", ")), runSeed);

            int seedPort = freePort();
            for (int id = 1; id <= nodes; id++) {
                DemoNodeHandle h = inProcess()
                        ? new DemoNodeHandle.InProcess(id, nodes, seedPort, segmentSize, props, id > memoryNodes)
                        : new DemoNodeHandle.Child(id, nodes, transport, timeoutSeconds, seedPort, segmentSize, props,
                                QUIET_NODE, () -> aborting, id > memoryNodes);
                synchronized (handles) {
                    handles.add(h);
                }
            }
            List<String> joined = new ArrayList<>();
            for (DemoNodeHandle h : handles) {
                joined.add(h.ready(deadline));
            }
            out.printf("cluster formed (Pekko, seed 127.0.0.1:%d, cluster-name %s):%n", seedPort, DemoNode.CLUSTER_NAME);
            joined.forEach(line -> out.println("  " + line));
            if (kill) {
                // the first copies are made now; changes share the copies' streams with them, so the apps start
                // once node 1 sees every replica group in sync (the kill waits for it anyway)
                long t0 = System.nanoTime();
                String[] g;
                while (((g = handles.get(0).run("jobs", "groups", List.of(), deadline).get(Math.max(1,
                        deadline - System.nanoTime()), TimeUnit.NANOSECONDS).split(" "))[0].equals("0")
                        || !g[1].equals("0")) && System.nanoTime() - deadline < 0) {
                    Thread.sleep(200);
                }
                out.printf(java.util.Locale.ROOT, "replication: %s replica groups, %s short of copies or not in sync"
                        + " (waited %.1f s for the first copies)%n", g[0], g[1], (System.nanoTime() - t0) / 1e9);
            }
            List<String> failed = new ArrayList<>();
            for (DemoApp a : apps) {
                out.printf("%n== %s: %s%n", a.name(), a.title());
                boolean ok = a.drive(new ClusterDriver(a.name(), handles, options, deadline));
                out.printf("%n%s%n", ok ? a.name() + " OK" : a.name() + " FAILED: a check does not hold (see above)");
                if (!ok) {
                    failed.add(a.name());
                }
            }
            out.println();
            out.println(failed.isEmpty() ? "demo OK: every app's result is checked and holds."
                    : "demo FAILED: " + String.join(", ", failed) + " (see above).");
            if (holdSeconds > 0) {
                out.printf("%nthe cluster stays up for %d s; from another terminal:%n"
                        + "  ./membus status --seed 127.0.0.1:%d --cluster-name %s%n", holdSeconds, seedPort,
                        DemoNode.CLUSTER_NAME);
                out.flush();
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(holdSeconds);
                while (System.nanoTime() - until < 0) {
                    Thread.sleep(Math.min(1000, Math.max(1, (until - System.nanoTime()) / 1_000_000)));
                }
            }
            return failed.isEmpty() ? 0 : 1;
        } catch (RuntimeException | Error e) {
            aborting = true; // a node failed: stop the others now instead of waiting for them to give up
            throw e;
        } catch (Exception e) {
            aborting = true;
            throw new IllegalStateException("demo FAILED: " + e, e);
        } finally {
            cleanUp(handles, shmDir);
            removeHook(hook);
        }
    }

    /** The apps' view of the cluster. */
    private final class ClusterDriver implements DemoApp.Driver {
        private final String app;
        private final List<DemoNodeHandle> handles;
        private final DemoOptions options;
        private final long deadline;

        ClusterDriver(String app, List<DemoNodeHandle> handles, DemoOptions options, long deadline) {
            this.app = app;
            this.handles = handles;
            this.options = options;
            this.deadline = deadline;
        }

        @Override
        public int nodes() {
            return nodes;
        }

        @Override
        public DemoOptions options() {
            return options;
        }

        @Override
        public PrintStream out() {
            return out;
        }

        @Override
        public List<String> onEveryNode(String phase, List<String> args) throws Exception {
            List<Integer> all = new ArrayList<>();
            for (int id = 1; id <= nodes; id++) {
                all.add(id);
            }
            return onNodes(all, phase, args);
        }

        @Override
        public List<String> onNodes(List<Integer> nodeIds, String phase, List<String> args) throws Exception {
            List<CompletableFuture<String>> running = new ArrayList<>();
            for (int id : nodeIds) {
                running.add(handles.get(id - 1).run(app, phase, args, deadline));
            }
            awaitAll(running, deadline);
            return running.stream().map(CompletableFuture::join).toList();
        }

        @Override
        public String onNode(int nodeId, String phase, List<String> args) throws Exception {
            return onNodes(List.of(nodeId), phase, args).get(0);
        }

        @Override
        public CompletableFuture<String> start(int nodeId, String phase, List<String> args) {
            return handles.get(nodeId - 1).run(app, phase, args, deadline);
        }

        @Override
        public void kill(int nodeId) {
            handles.get(nodeId - 1).kill();
        }

        @Override
        public boolean canKill() {
            return !inProcess();
        }
    }

    /**
     * Waits for every node's phase; the first node that fails ends the wait (the others
     * are then stopped by the caller instead of running on against a dead peer).
     */
    private static void awaitAll(List<CompletableFuture<String>> running, long deadline) throws Exception {
        CompletableFuture<Object> firstFailure = new CompletableFuture<>();
        for (CompletableFuture<String> r : running) {
            r.whenComplete((ok, e) -> {
                if (e != null) {
                    firstFailure.completeExceptionally(e);
                }
            });
        }
        try {
            CompletableFuture.anyOf(CompletableFuture.allOf(running.toArray(new CompletableFuture<?>[0])), firstFailure)
                    .get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable c = e.getCause() instanceof java.util.concurrent.CompletionException && e.getCause().getCause() != null
                    ? e.getCause().getCause() : e.getCause();
            throw new IllegalStateException("demo FAILED: " + c.getMessage(), c);
        } catch (java.util.concurrent.TimeoutException e) {
            throw new IllegalStateException("demo FAILED: the nodes did not finish their work within the demo's"
                    + " --timeout; is the machine overloaded? (try fewer --ops or a longer --timeout)", e);
        }
    }

    /** Stops every node (EXIT, then by force after a grace period) and removes the shm directory. */
    private void cleanUp(List<DemoNodeHandle> handles, Path shmDir) {
        synchronized (handles) {
            for (DemoNodeHandle h : handles) {
                h.exit();
            }
            for (DemoNodeHandle h : handles) {
                h.close();
            }
            handles.clear();
            if (shmDir != null) {
                deleteTree(shmDir);
            }
        }
    }

    /** On Ctrl-C (or a kill of this JVM): node processes are destroyed and the shm directory removed. */
    private Thread installHook(List<DemoNodeHandle> handles, Path[] shmDir) {
        Thread hook = new Thread(() -> {
            aborting = true;
            cleanUp(handles, shmDir[0]);
        }, "membus-demo-cleanup");
        try {
            Runtime.getRuntime().addShutdownHook(hook);
        } catch (IllegalStateException e) {
            return null; // the JVM is shutting down already
        }
        return hook;
    }

    private static void removeHook(Thread hook) {
        if (hook != null) {
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException e) {
                // the JVM is shutting down: the hook runs, or ran, cleanUp (a no-op once done)
            }
        }
    }

    /**
     * Nodes in this JVM log like the node processes do (warnings; Pekko errors only), so
     * their INFO lines do not interleave with the demo's report. slf4j-simple reads these
     * properties when its first logger is made, which is when the first node starts;
     * settings given on the command line win.
     */
    private static void quietInProcessNodes() {
        for (String option : QUIET_NODE) {
            String[] kv = option.substring(2).split("=", 2);
            if (System.getProperty(kv[0]) == null) {
                System.setProperty(kv[0], kv[1]);
            }
        }
    }

    /**
     * Refuses a bad option with a {@link DsmConfigException} naming the option, the value given and what is
     * allowed; the CLI prints it as {@code membus: bad config: key=--nodes, value=1, allowed=2..16}.
     */
    void validate() {
        if (nodes < 2 || nodes > 16) {
            throw new DsmConfigException("--nodes", nodes, "2..16");
        }
        if (ops < 1) {
            throw new DsmConfigException("--ops", ops, "1 or more");
        }
        if (blocks < 1) {
            throw new DsmConfigException("--blocks", blocks, "1 or more");
        }
        if (blockSize < 8 || blockSize > 1 << 20) {
            throw new DsmConfigException("--block-size", blockSize, "8..1048576");
        }
        if (clients < 0 || clients >= nodes) {
            throw new DsmConfigException("--clients", clients, "0.." + (nodes - 1)
                    + " (at least one of the --nodes " + nodes + " must hold memory)");
        }
        if (timeoutSeconds < 1) {
            throw new DsmConfigException("--timeout", timeoutSeconds, "1 or more seconds");
        }
        if (holdSeconds < 0) {
            throw new DsmConfigException("--hold", holdSeconds, "0 or more seconds");
        }
        if (!List.of("shm", "tcp", "local").contains(transport)) {
            throw new DsmConfigException("--transport", transport, "shm, tcp, local");
        }
        // a capability, not a name: --kill needs node processes (local runs the nodes as threads of this JVM, the
        // demo's launch mode) over a transport whose kind forwards every change to the copies
        if (kill && (inProcess()
                || TransportCapabilities.of(transport).replication() != ReplicationSupport.FORWARDING)) {
            throw new DsmConfigException("--transport", transport + " with --kill", "tcp (the default with --kill):"
                    + " --kill kills a memory node, whose structures live on in their copies; it needs node processes"
                    + " whose transport forwards changes to copies");
        }
        if (kill && nodes - clients < 3) {
            throw new DsmConfigException("--nodes", nodes + " --clients " + clients + " with --kill (" + (nodes - clients)
                    + " memory nodes)", "3 or more memory nodes: the killed node's copies live on another one, and"
                    + " the memory nodes left must be a majority, or the split-brain resolver downs them too");
        }
    }

    /** Whether the nodes run as threads of this JVM ({@code --transport local}): the demo's launch mode, not a capability. */
    private boolean inProcess() {
        return transport.equals("local");
    }

    private static int freePort() throws IOException {
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    private static void deleteTree(Path dir) {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).collect(Collectors.toList())) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            System.err.println("membus demo: could not remove " + dir + ": " + e.getMessage());
        }
    }
}
