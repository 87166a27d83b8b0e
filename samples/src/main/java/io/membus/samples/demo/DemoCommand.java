package io.membus.samples.demo;

import io.membus.samples.JvmLauncher;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * {@code membus demo}: starts a cluster of nodes on this machine — separate
 * processes over {@code shm} (default) or {@code tcp}, or threads of this JVM
 * over {@code local} — each a {@link io.membus.cluster.DsmNode} that joins one
 * Pekko cluster on loopback (node 1 is the seed) and finds the others' segments in
 * the replicated directory. Every node exports a segment, increments a counter
 * on the next node of a ring and a shared counter on node 1 with remote
 * fetch-and-add, writes blocks into the next node's memory and reads them back;
 * then prints what each node did and checks the totals.
 *
 * <p><b>Note:</b> one instance per run.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = "Run a multi-node Membus cluster on this machine doing shared-state work, and check the totals.")
public final class DemoCommand implements Callable<Integer> {

    @Option(names = "--nodes", defaultValue = "3", description = "number of nodes, 2..16 (default: ${DEFAULT-VALUE})")
    int nodes;

    @Option(names = "--transport", defaultValue = "shm",
            description = "shm: node processes sharing memory under /dev/shm; tcp: node processes over loopback TCP; "
                    + "local: nodes as threads of this JVM (default: ${DEFAULT-VALUE})")
    String transport;

    @Option(names = "--ops", defaultValue = "20000", description = "fetch-and-adds per node and counter (default: ${DEFAULT-VALUE})")
    int ops;

    @Option(names = "--blocks", defaultValue = "64", description = "blocks each node writes and reads back (default: ${DEFAULT-VALUE})")
    int blocks;

    @Option(names = "--block-size", defaultValue = "1024", description = "bytes per block (default: ${DEFAULT-VALUE})")
    int blockSize;

    @Option(names = "--timeout", defaultValue = "120", description = "seconds the whole demo may take (default: ${DEFAULT-VALUE})")
    int timeoutSeconds;

    @Option(names = "--hold", defaultValue = "0",
            description = "seconds to keep the cluster up after the check, for `membus status` (default: ${DEFAULT-VALUE})")
    int holdSeconds;

    /** Node processes log warnings only; their output is the demo's protocol. */
    private static final List<String> QUIET_NODE = List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.log.org.apache.pekko=error");

    private PrintStream out = System.out;
    private volatile boolean aborting;

    @Override
    public Integer call() throws Exception {
        validate();
        long segmentSize = DemoNode.segmentSizeFor(blocks, blockSize);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        List<Handle> handles = new ArrayList<>();
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
                    byte[] secret = new byte[16];
                    new SecureRandom().nextBytes(secret);
                    props.put("tcp.host", "127.0.0.1");
                    props.put("tcp.port", "0");
                    props.put("tcp.secret", HexFormat.of().formatHex(secret));
                    where = "as separate processes over tcp (127.0.0.1)";
                }
                default -> throw new IllegalArgumentException("unknown transport: --transport " + transport
                        + "; allowed: shm, tcp, local");
            }
            out.printf("membus demo: %d nodes %s%n", nodes, where);
            out.printf("  each node: %,d fetch-and-adds on the next node's ring counter and %,d on node 1's shared counter,"
                    + " %d blocks of %,d B allocated in the next node's heap (global allocator), written and read back%n%n", ops, ops, blocks, blockSize);

            int seedPort = freePort();
            for (int id = 1; id <= nodes; id++) {
                Handle h = transport.equals("local") ? new InProcess(id, seedPort, segmentSize, props)
                        : new Child(id, seedPort, segmentSize, props);
                synchronized (handles) {
                    handles.add(h);
                }
            }
            List<String> joined = new ArrayList<>();
            for (Handle h : handles) {
                joined.add(h.ready(deadline));
            }
            out.printf("cluster formed (Pekko, seed 127.0.0.1:%d, cluster-name %s):%n", seedPort, DemoNode.CLUSTER_NAME);
            joined.forEach(line -> out.println("  " + line));
            out.println();
            List<CompletableFuture<DemoNode.Result>> running = new ArrayList<>();
            for (Handle h : handles) {
                running.add(h.go(ops, blocks, blockSize));
            }
            awaitAll(running, deadline);
            List<DemoNode.Result> results = new ArrayList<>();
            for (CompletableFuture<DemoNode.Result> r : running) {
                results.add(r.join());
            }
            List<long[]> counters = new ArrayList<>();
            for (Handle h : handles) {
                counters.add(h.counters(deadline));
            }
            int code = report(results, counters);
            out.printf("%nHeap segments after the work (global allocator; read by node 1 from every chunk table):%n");
            handles.get(0).heap(deadline).lines().forEach(l -> out.println("  " + l));
            // every node frees its blocks while every heap is still there, then they leave
            for (Handle h : handles) {
                h.free(deadline);
            }
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
            return code;
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

    /**
     * Waits for every node's work; the first node that fails ends the wait (the others
     * are then stopped by the caller instead of running on against a dead peer).
     */
    private static void awaitAll(List<CompletableFuture<DemoNode.Result>> running, long deadline) throws Exception {
        CompletableFuture<Object> firstFailure = new CompletableFuture<>();
        for (CompletableFuture<DemoNode.Result> r : running) {
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
    private void cleanUp(List<Handle> handles, Path shmDir) {
        synchronized (handles) {
            for (Handle h : handles) {
                h.exit();
            }
            for (Handle h : handles) {
                h.close();
            }
            handles.clear();
            if (shmDir != null) {
                deleteTree(shmDir);
            }
        }
    }

    /** On Ctrl-C (or a kill of this JVM): node processes are destroyed and the shm directory removed. */
    private Thread installHook(List<Handle> handles, Path[] shmDir) {
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

    private void validate() {
        if (nodes < 2 || nodes > 16) {
            throw new IllegalArgumentException("--nodes " + nodes + " is out of range; allowed: 2..16");
        }
        if (ops < 1 || blocks < 1 || blockSize < 8 || blockSize > 1 << 20) {
            throw new IllegalArgumentException("--ops " + ops + ", --blocks " + blocks + ", --block-size " + blockSize
                    + ": allowed --ops 1 or more, --blocks 1 or more, --block-size 8..1048576");
        }
        if (timeoutSeconds < 1 || holdSeconds < 0) {
            throw new IllegalArgumentException("--timeout " + timeoutSeconds + ", --hold " + holdSeconds
                    + ": allowed --timeout 1 or more seconds, --hold 0 or more");
        }
        if (!List.of("shm", "tcp", "local").contains(transport)) {
            throw new IllegalArgumentException("--transport " + transport + " is unknown; allowed: shm, tcp, local");
        }
    }

    private int report(List<DemoNode.Result> results, List<long[]> counters) {
        String header = String.format(Locale.ROOT, "%-5s %-8s %-6s %15s %9s %9s %12s %12s %8s",
                "node", "pid", "ring->", "fetch-and-adds", "allocated", "verified", "FAA p50 us", "FAA p99 us", "ms");
        out.println(header);
        out.println("-".repeat(header.length()));
        long verified = 0;
        for (DemoNode.Result r : results) {
            out.printf(Locale.ROOT, "%-5d %-8d %-6d %,15d %9d %9d %12.2f %12.2f %8d%n", r.nodeId(), r.pid(),
                    r.ringTarget(), r.adds(), r.blocksWritten(), r.blocksVerified(), r.p50Micros(), r.p99Micros(),
                    r.millis());
            verified += r.blocksVerified();
        }
        out.println();
        out.println("Verified totals");
        boolean ok = true;
        for (int i = 0; i < counters.size(); i++) {
            ok &= check(String.format("ring counter on node %d (incremented by node %d)", i + 1,
                    i == 0 ? nodes : i), counters.get(i)[0], ops);
        }
        ok &= check("shared counter on node 1 (incremented by every node)", counters.get(0)[1], (long) ops * nodes);
        ok &= check("heap blocks read back equal to what was written", verified, (long) blocks * nodes);
        out.println();
        out.println(ok ? "demo OK: every remote fetch-and-add and every block is accounted for."
                : "demo FAILED: a total does not match (see above).");
        return ok ? 0 : 1;
    }

    private boolean check(String what, long actual, long expected) {
        boolean ok = actual == expected;
        out.printf(Locale.ROOT, "  %-62s %,12d  expected %,12d  %s%n", what, actual, expected, ok ? "OK" : "MISMATCH");
        return ok;
    }

    private static int freePort() throws IOException {
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    private static long roundUp(long v, long to) {
        return (v + to - 1) / to * to;
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

    /** One node, wherever it runs. */
    private interface Handle extends AutoCloseable {
        /** Waits until the node has joined and sees every node's segment; returns its status line. */
        String ready(long deadline) throws Exception;

        CompletableFuture<DemoNode.Result> go(int ops, int blocks, int blockSize);

        /** Asks the node to leave the cluster and stop (without waiting). */
        void exit();

        long[] counters(long deadline) throws Exception;

        /** The cluster's heap usage table, as this node reads it. */
        String heap(long deadline) throws Exception;

        /** Frees the node's blocks (in the next node's heap); called on every node before any leaves. */
        void free(long deadline) throws Exception;

        @Override
        void close();
    }

    /** A node as a thread of this JVM (the local transport). */
    private final class InProcess implements Handle {
        private final DemoNode node;

        InProcess(int id, int seedPort, long segmentSize, Map<String, String> props) {
            this.node = new DemoNode("local", id, id == 1 ? seedPort : 0, seedPort, segmentSize, props);
        }

        @Override
        public String ready(long deadline) {
            node.awaitCluster(nodes, java.time.Duration.ofNanos(Math.max(1, deadline - System.nanoTime())));
            return node.statusLine();
        }

        @Override
        public CompletableFuture<DemoNode.Result> go(int ops, int blocks, int blockSize) {
            return CompletableFuture.supplyAsync(() -> node.work(nodes, ops, blocks, blockSize),
                    r -> new Thread(r, "demo-node-" + node.nodeId()).start());
        }

        @Override
        public void exit() {
        }

        @Override
        public long[] counters(long deadline) {
            return node.counters();
        }

        @Override
        public String heap(long deadline) {
            return node.heapUsage();
        }

        @Override
        public void free(long deadline) {
            node.freeBlocks();
        }

        @Override
        public void close() {
            node.close();
        }
    }

    /** A node process, driven over its standard input and output. */
    private final class Child implements Handle {
        private final int id;
        private final Process process;
        private final Writer stdin;
        private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

        Child(int id, int seedPort, long segmentSize, Map<String, String> props) throws IOException {
            this.id = id;
            List<String> args = new ArrayList<>(List.of("demo-node", "--transport", transport, "--node-id",
                    Integer.toString(id), "--nodes", Integer.toString(nodes), "--port",
                    Integer.toString(id == 1 ? seedPort : 0), "--seed-port", Integer.toString(seedPort),
                    "--segment-size", Long.toString(segmentSize), "--timeout", Integer.toString(timeoutSeconds)));
            props.forEach((k, v) -> {
                if (!k.endsWith(".secret")) {
                    args.add("--property");
                    args.add(k + "=" + v);
                }
            });
            ProcessBuilder pb = JvmLauncher.membus(QUIET_NODE, args).redirectError(ProcessBuilder.Redirect.INHERIT);
            // secrets go through the environment (readable by this user only), never the command line (ps shows it)
            props.forEach((k, v) -> {
                if (k.endsWith(".secret")) {
                    pb.environment().put(DemoNodeCommand.SECRET_ENV, k + "=" + v);
                }
            });
            this.process = pb.start();
            this.stdin = new java.io.OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
            Thread reader = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                        StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = r.readLine()) != null) {
                        lines.add(line);
                    }
                } catch (IOException e) {
                    lines.add("ERROR reading node output: " + e.getMessage());
                }
                lines.add("EOF");
            }, "demo-reader-" + id);
            reader.setDaemon(true);
            reader.start();
        }

        private void send(String line) throws IOException {
            stdin.write(line + "\n");
            stdin.flush();
        }

        /** The next line that starts with {@code prefix}; other lines (logs) are passed through. */
        private String expect(String prefix, long deadline) throws Exception {
            while (true) {
                long left = deadline - System.nanoTime();
                String line = lines.poll(Math.max(0, left), TimeUnit.NANOSECONDS);
                if (line == null) {
                    throw new IllegalStateException("node " + id + " did not answer " + prefix + " before the demo's "
                            + "--timeout; is the machine overloaded?");
                }
                if (line.startsWith(prefix)) {
                    return line.substring(prefix.length()).trim();
                }
                if (line.startsWith("ERROR") || line.equals("EOF")) {
                    throw new IllegalStateException(line.equals("EOF")
                            ? "node " + id + " (pid " + process.pid() + ") exited, code " + exitCode()
                            : "node " + id + " failed: " + line.substring("ERROR".length()).trim());
                }
                System.err.println("[node " + id + "] " + line);
            }
        }

        private String exitCode() {
            try {
                return process.waitFor(2, TimeUnit.SECONDS) ? Integer.toString(process.exitValue()) : "still running";
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return "unknown";
            }
        }

        @Override
        public String ready(long deadline) throws Exception {
            return expect("READY ", deadline) + " (pid " + process.pid() + ")";
        }

        @Override
        public CompletableFuture<DemoNode.Result> go(int ops, int blocks, int blockSize) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
            return CompletableFuture.supplyAsync(() -> {
                try {
                    send("GO " + ops + " " + blocks + " " + blockSize);
                    return DemoNode.Result.decode(expect("RESULT ", deadline));
                } catch (IllegalStateException e) {
                    throw e;
                } catch (Exception e) {
                    throw new IllegalStateException("node " + id + ": " + e, e);
                }
            });
        }

        @Override
        public long[] counters(long deadline) throws Exception {
            send("VERIFY");
            String[] f = expect("COUNTERS ", deadline).split(" ");
            return new long[]{Long.parseLong(f[0]), Long.parseLong(f[1])};
        }

        @Override
        public String heap(long deadline) throws Exception {
            send("HEAP");
            StringBuilder table = new StringBuilder();
            for (String line; !(line = expect("HEAP", deadline)).equals("END"); ) {
                table.append(line).append('\n');
            }
            return table.toString();
        }

        @Override
        public void free(long deadline) throws Exception {
            send("FREE");
            expect("FREED ", deadline);
        }

        @Override
        public void exit() {
            try {
                if (process.isAlive()) {
                    send("EXIT");
                }
            } catch (IOException e) {
                System.err.println("node " + id + ": could not send EXIT: " + e.getMessage());
            }
        }

        @Override
        public void close() {
            try {
                if (!process.waitFor(aborting ? 0 : 20, TimeUnit.SECONDS)) {
                    process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                process.destroyForcibly();
            }
        }
    }
}
