package io.membus.samples.stress;

import io.membus.samples.CheapNodeJvms;
import io.membus.samples.MembusCli;
import io.membus.samples.TimedLines;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code membus stress} end to end: short runs of a real 2-process cluster over shm (two nodes: the
 * smallest cluster a partition can cut, and the quickest to start on a small machine).
 * The seed of each run is printed in its output and replays with
 * {@code -Dmembus.seed=}.
 */
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
@ExtendWith(CheapNodeJvms.class) // node JVMs that start with less CPU
class StressCommandTest {
    private static final long SEED = Long.getLong("membus.seed", System.nanoTime());

    private record Run(int code, String out) {
    }

    private static Run stress(Path out, String... args) {
        return stress(2, out, args);
    }

    /** A run of {@code membus stress} with {@code nodes} memory nodes (0: the command's default for its nemesis). */
    private static Run stress(int nodes, Path out, String... args) {
        PrintStream stdout = System.out;
        PrintStream stderr = System.err;
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        // each line also goes, with the seconds since the run began, to the test's own output as it comes: where a
        // run's time goes (JVM starts and joins, the clients, restarts, the check, teardown) is read there
        long began = System.nanoTime();
        PrintStream both = new PrintStream(new TimedLines(sink, stdout, began), true, StandardCharsets.UTF_8);
        System.setOut(both);
        System.setErr(both);
        int code;
        try {
            List<String> all = new ArrayList<>(List.of("stress", "--clients", "2", "--keys", "3", "--rate", "150",
                    "--seed", Long.toString(SEED), "--out", out.toString()));
            if (nodes > 0) { // 0: the command's own choice
                all.addAll(List.of("--nodes", Integer.toString(nodes)));
            }
            all.addAll(List.of(args));
            code = MembusCli.run(all.toArray(String[]::new));
        } finally {
            System.setOut(stdout);
            System.setErr(stderr);
        }
        String text = sink.toString(StandardCharsets.UTF_8);
        System.out.println(TimedLines.since(began) + " membus stress returned " + code);
        return new Run(code, text);
    }

    /** Every node process gone, and the run's folder under /dev/shm removed. */
    private static void assertCleanedUp(String out) {
        assertTrue(ProcessHandle.current().descendants().noneMatch(p -> p.info().commandLine().orElse("")
                .contains("stress-node")), "every node process is gone");
        Matcher m = Pattern.compile("\\(pid (\\d+)\\)").matcher(out);
        while (m.find()) {
            assertTrue(ProcessHandle.of(Long.parseLong(m.group(1))).map(p -> !p.isAlive()).orElse(true),
                    "node process " + m.group(1) + " ended");
        }
        try (var shm = Files.list(Path.of("/dev/shm"))) {
            String mine = "membus-stress-" + ProcessHandle.current().pid() + "-";
            assertTrue(shm.noneMatch(p -> p.getFileName().toString().startsWith(mine)), "no /dev/shm/" + mine + "*");
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static void assertPng(Path file) throws Exception {
        byte[] head = java.util.Arrays.copyOf(Files.readAllBytes(file), 8);
        assertArrayEquals(new byte[]{(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, head, file + " is a PNG");
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aCounterWithoutFaultsIsLinearizableAndTheReportSaysSo(@TempDir Path dir) throws Exception {
        // 4 s, not 3: under load the client node's first operations (binding the counters by name, majority
        // writes) took most of 3 s, and it recorded 5 operations or fewer (twice in 3 runs on a loaded 2-core box)
        Run run = stress(dir, "--workload", "counter", "--nemesis", "none", "--duration", "4");
        assertEquals(0, run.code(), run.out());
        assertTrue(run.out().contains("stress OK: every key's history is linearizable"), run.out());
        // node 3 is a client process (no memory): it ran its client threads on the memory nodes' counters too
        assertTrue(run.out().contains("2 nodes + 1 client node (no memory)"), run.out());
        assertTrue(Files.readString(dir.resolve("history").resolve("node-3-life-0.log")).lines().count() > 10,
                "client node 3 recorded operations");
        for (int key = 0; key < 3; key++) {
            assertTrue(run.out().matches("(?s).*key " + key + " +LINEARIZABLE +ok +[1-9].*"), "key " + key + " checked");
        }
        String html = Files.readString(dir.resolve("index.html"));
        assertTrue(html.contains("VALID: every key's history is linearizable"), html);
        assertTrue(html.contains("<img src=\"latency.png\"") && html.contains("<img src=\"throughput.png\""), html);
        assertPng(dir.resolve("latency.png"));
        assertPng(dir.resolve("throughput.png"));
        assertCleanedUp(run.out());
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aRegisterUnderPartitionsIsLinearizableAndTheFaultsAreInTheReport(@TempDir Path dir) throws Exception {
        Run run = stress(dir, "--workload", "register", "--nemesis", "partition", "--duration", "5");
        assertEquals(0, run.code(), run.out());
        assertTrue(run.out().contains("nemesis partition"), "a partition was injected:\n" + run.out());
        String html = Files.readString(dir.resolve("index.html"));
        assertTrue(html.matches("(?s).*<tr><td class=\"l\">partition</td><td>[0-9.]+</td><td>[0-9.]+</td><td class=\"l\">\\[[0-9, ]+\\] \\| \\[[0-9, ]+\\]</td>.*"),
                "the partition's window and halves are in the report:\n" + html);
        assertCleanedUp(run.out());
    }

    /**
     * Coherent registers (cached reads under leases, invalidating writers) on three node
     * processes while one is killed with {@code kill -9} and started again, or stopped
     * with {@code SIGSTOP} and continued: every key's history is linearizable.
     */
    @ParameterizedTest
    @ValueSource(strings = {"kill", "pause"})
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void coherentRegistersStayLinearizableWhenANodeIsKilledOrPaused(String nemesis, @TempDir Path dir) {
        Run run = stress(3, dir, "--coherent", "--workload", "register", "--nemesis", nemesis, "--duration", "6");
        assertEquals(0, run.code(), run.out());
        assertTrue(run.out().contains("nemesis " + nemesis), "a " + nemesis + " was injected:\n" + run.out());
        assertTrue(run.out().contains("stress OK: every key's history is linearizable"), run.out());
        assertCleanedUp(run.out());
    }

    /**
     * Memory nodes killed with {@code kill -9} and never restarted, with the default
     * replication ({@code backups = 1}): the structures they held are served by their
     * promoted copies, and every key's history, checked to the end, is linearizable with
     * nothing acknowledged lost. (The queue here, about 50 s; every workload under the same
     * nemesis was run by hand: docs/stress.md, "kill-permanent".)
     */
    @ParameterizedTest
    @ValueSource(strings = {"queue"})
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void structuresOfMemoryNodesKilledForGoodStayLinearizable(String workload, @TempDir Path dir) {
        Run run = stress(0, dir, "--workload", workload, "--nemesis", "kill-permanent", "--duration", "6");
        assertEquals(0, run.code(), run.out());
        assertTrue(run.out().contains("nemesis kill-permanent"), "a kill-permanent was injected:\n" + run.out());
        assertTrue(run.out().contains("stress OK: every key's history is linearizable"), run.out());
        assertCleanedUp(run.out());
    }

    /**
     * A queue under kills: operations on a queue whose root's node is down fail as not-run
     * (not indeterminate), so the checker decides every key instead of running out of budget.
     */
    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void queuesUnderKillsAreCheckedToTheEnd(@TempDir Path dir) {
        Run run = stress(3, dir, "--workload", "queue", "--nemesis", "kill", "--duration", "6");
        assertEquals(0, run.code(), run.out());
        assertTrue(run.out().contains("nemesis kill"), "a kill was injected:\n" + run.out());
        assertFalse(run.out().contains("UNKNOWN"), run.out());
        assertCleanedUp(run.out());
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aPlantedStaleReadFailsTheRunAndTheReportNamesTheKey(@TempDir Path dir) throws Exception {
        Run run = stress(dir, "--workload", "counter", "--nemesis", "none", "--duration", "4", "--plant-violation");
        assertEquals(1, run.code(), run.out());
        assertTrue(run.out().contains("stress FAILED: a history is not linearizable"), run.out());
        Matcher bad = Pattern.compile("key (\\d+) +VIOLATION").matcher(run.out());
        assertTrue(bad.find(), "a key is named as violating:\n" + run.out());
        String html = Files.readString(dir.resolve("index.html"));
        assertTrue(html.contains("INVALID") && html.contains("<tr><td>" + bad.group(1) + "</td><td class=\"bad\">VIOLATION"),
                html);
        assertCleanedUp(run.out());
    }

    @Test
    void badOptionsAreRefusedWithWhatIsAllowed(@TempDir Path dir) throws Exception {
        Run a = stress(dir, "--workload", "bag");
        Run b = stress(dir, "--nemesis", "meteor");
        Run c = stress(dir, "--duration", "0");
        assertEquals(1, a.code());
        assertTrue(a.out().contains("membus: bad config: key=--workload, value=bag, allowed=register, counter, map,"
                + " queue, lock"), a.out());
        assertEquals(1, b.code());
        assertTrue(b.out().contains("membus: bad config: key=--nemesis, value=meteor, allowed=none, partition, drop,"
                + " kill, pause, delay, skew, all"), b.out());
        assertEquals(1, c.code());
        assertTrue(c.out().contains("membus: bad config: key=--duration, value=0, allowed=1 s or more"), c.out());
        // shm's kind keeps copies by adopting files, not by forwarding changes (TransportCapabilities.of("shm"))
        Run e = stress(dir, "--nemesis", "kill-permanent", "--transport", "shm", "--client-nodes", "1");
        assertEquals(1, e.code());
        assertTrue(e.out().contains("--transport tcp (replication forwards changes over tcp; got shm)"), e.out());
        assertFalse(Files.exists(dir.resolve("index.html")), "no report for a refused run");
        Files.writeString(Files.createDirectories(dir.resolve("history")).resolve("node-1-life-0.log"), "");
        Run d = stress(dir, "--duration", "1");
        assertEquals(1, d.code());
        assertTrue(d.out().contains("membus: bad config: key=--out, value=" + dir + ", allowed=a folder that holds no"
                + " histories of a run"), d.out());
    }
}
