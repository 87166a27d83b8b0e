package io.membus.samples;

import io.membus.cluster.DsmNode;
import io.membus.cluster.NodeConfig;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Tag("slow") // over 20 s: the slow tier (failsafe, mvn verify), so that mvn test stays under 4 minutes
class NodeAndStatusCommandTest {

    private static final String FAST = """
            membus.cluster-name = cli-test
            membus.transport = tcp
            membus.secret = "cli-test-secret-0123"
            membus.transports.tcp.port = 0
            membus.segments { count = 1, size = 1MiB }
            membus.failure-detection.gossip-interval = 200ms
            pekko.cluster.seed-node-timeout = 1s
            pekko.coordinated-shutdown.run-by-jvm-shutdown-hook = off
            """;

    private static int freePort() throws Exception {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private record Run(int code, String out, String err) {
    }

    /**
     * Standard out and err as the test's threads see them: each thread inside {@link #run} writes to its own
     * buffers, every other thread to the original streams. {@code membus node} runs on a thread of its own while
     * {@code membus status} runs on the test's thread: swapping {@code System.out} per call let the node's run,
     * ending under load in the middle of the status query, put back the original stream under the status query's
     * feet (its table went to the console and the test read an empty answer).
     */
    private static final ThreadLocal<PrintStream[]> CAPTURE = new ThreadLocal<>();
    private static PrintStream originalOut;
    private static PrintStream originalErr;

    @BeforeAll
    static void captureByThread() {
        originalOut = System.out;
        originalErr = System.err;
        System.setOut(byThread(originalOut, 0));
        System.setErr(byThread(originalErr, 1));
    }

    @AfterAll
    static void restoreStreams() {
        System.setOut(originalOut);
        System.setErr(originalErr);
    }

    private static PrintStream byThread(PrintStream original, int which) {
        return new PrintStream(new OutputStream() {
            private PrintStream target() {
                PrintStream[] mine = CAPTURE.get();
                return mine == null ? original : mine[which];
            }

            @Override
            public void write(int b) {
                target().write(b);
            }

            @Override
            public void write(byte[] b, int off, int len) {
                target().write(b, off, len);
            }

            @Override
            public void flush() {
                target().flush();
            }
        }, true, StandardCharsets.UTF_8);
    }

    private static Run run(String... args) {
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        ByteArrayOutputStream e = new ByteArrayOutputStream();
        CAPTURE.set(new PrintStream[] {new PrintStream(o, true, StandardCharsets.UTF_8),
                new PrintStream(e, true, StandardCharsets.UTF_8)});
        int code;
        try {
            code = MembusCli.run(args);
        } finally {
            CAPTURE.remove();
        }
        Run r = new Run(code, o.toString(StandardCharsets.UTF_8), e.toString(StandardCharsets.UTF_8));
        System.out.println(r.out + r.err);
        return r;
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void aNodeRunsFromItsConfigFileAndStatusShowsTheCluster(@TempDir Path dir) throws Exception {
        int seed = freePort();
        // over tcp, the default transport: both nodes authenticate with the cluster secret
        try (DsmNode first = DsmNode.start(NodeConfig.parse(FAST + "membus { node-id = 1, port = " + seed
                + ", seed-nodes = [\"127.0.0.1:" + seed + "\"] }"))) {
            Path conf = dir.resolve("node5.conf");
            Files.writeString(conf, FAST + "membus { node-id = 5, port = 0, seed-nodes = [\"127.0.0.1:" + seed
                    + "\"] }");
            // node 5 runs for a bounded time from when it has joined: long enough for two status queries on a loaded
            // machine (5 s was not, at a load average of 37: node 5 was leaving when the query reached node 1)
            CompletableFuture<Run> node = CompletableFuture.supplyAsync(() -> run("node", "--config", conf.toString(),
                    "--status-interval", "4", "--run-for", "20"));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (first.directory().member(5).isEmpty()) {
                assertTrue(System.nanoTime() < deadline, "node 5 did not join");
                Thread.sleep(50);
            }
            // membership is authenticated by the cluster secret: a query without it gets no answer ...
            Run stranger = run("status", "--seed", "127.0.0.1:" + seed, "--cluster-name", "cli-test", "--timeout", "2");
            assertEquals(1, stranger.code(), stranger.out());
            // ... and one with a node's config (its secret) does
            Run status = run("status", "--seed", "127.0.0.1:" + seed, "--config", conf.toString());
            assertEquals(0, status.code(), status.err());
            // one 1 MiB segment per node, and node 1's system segment with the name table (516 KiB): replication is
            // on by default, so names live in replicated memory
            assertTrue(status.out().contains("2 members (2 Up), 3 segments, 2.5 MiB exported"), status.out());
            assertTrue(status.out().contains("replica groups, as node 1 sees them: 3,"), status.out());
            assertTrue(status.out().matches("(?s).*\\n5 +member +pekko://cli-test@127\\.0\\.0\\.1:\\d+ +Up +yes +tcp .*"),
                    status.out());
            Run done = node.get(60, TimeUnit.SECONDS);
            assertEquals(0, done.code(), done.err());
            assertTrue(done.out().contains("node 5 UP | members 2 [1, 5]"), done.out());
            // a status line at start and one every 4 s until --run-for ends: the schedule decides how many, not how
            // late a loaded machine woke up (a loop that cut its last wait short to meet --run-for printed the
            // same line twice under load, and one woken early printed a seventh)
            List<String> lines = done.out().lines().filter(l -> l.startsWith("node 5 UP")).toList();
            assertEquals(6, lines.size(), done.out());
        }
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void badConfigsAndUnreachableSeedsAreReportedClearly(@TempDir Path dir) throws Exception {
        Path conf = dir.resolve("bad.conf");
        Files.writeString(conf, "membus { node-id = 3, segments.access = \"rx\" }");
        Run bad = run("node", "--config", conf.toString());
        assertEquals(1, bad.code());
        assertTrue(bad.err().contains("key=membus.segments.access, value=rx"), bad.err());
        Path typo = dir.resolve("typo.conf");
        Files.writeString(typo, "membus {\n  node-id = 3\n  heap.segmnets = [0]\n  operation-timout = 5s\n}\n");
        Run misspelled = run("node", "--config", typo.toString());
        assertEquals(1, misspelled.code(), "a misspelled key stops the node at start");
        assertTrue(misspelled.err().contains("key=membus.heap.segmnets") && misspelled.err().contains(
                "closest known key: membus.heap.segments") && misspelled.err().contains("typo.conf: 3")
                && misspelled.err().contains("membus.operation-timout (closest: membus.operation-timeout"),
                misspelled.err());
        Run missing = run("node", "--config", dir.resolve("missing.conf").toString());
        assertEquals(1, missing.code());
        assertTrue(missing.err().contains("missing.conf"), missing.err());
        Run none = run("status", "--seed", "127.0.0.1:" + freePort(), "--timeout", "2");
        assertEquals(1, none.code());
        assertTrue(none.err().contains("no answer from a membus node"), none.err());
        assertEquals(1, run("status", "--seed", "nonsense").code());
        Run badName = run("status", "--seed", "127.0.0.1:" + freePort(), "--cluster-name", "no spaces");
        assertEquals(1, badName.code());
        assertTrue(badName.err().contains("key=cluster-name, value=no spaces"), badName.err());
        Run badHost = run("status", "--seed", "127.0.0.1:" + freePort(), "--bind-host", "192.0.2.1", "--timeout", "2");
        assertEquals(1, badHost.code());
        assertTrue(badHost.err().contains("key=bind-host, value=192.0.2.1"), badHost.err());
    }
}
