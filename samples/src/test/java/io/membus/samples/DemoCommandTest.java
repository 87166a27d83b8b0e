package io.membus.samples;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
@ExtendWith(CheapNodeJvms.class) // node JVMs that start with less CPU
class DemoCommandTest {

    private static String run(int expectedExit, String... args) {
        PrintStream original = System.out;
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        long began = System.nanoTime();
        System.setOut(new PrintStream(new TimedLines(buffer, original, began), true, StandardCharsets.UTF_8));
        int code;
        try {
            code = MembusCli.run(args);
        } finally {
            System.setOut(original);
        }
        String out = buffer.toString(StandardCharsets.UTF_8);
        System.out.println(TimedLines.since(began) + " membus demo returned " + code);
        assertEquals(expectedExit, code, out);
        return out;
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void theDemoOverLocalChecksEveryTotal() {
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        int code = runCapturing(sink, "demo", "--transport", "local", "--ops", "500", "--blocks", "8");
        String out = sink.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, out);
        assertTrue(out.contains("shared counter on node 1 (incremented by every node)"), out);
        assertEveryAppOk(out);
        // every node freed its blocks before any node left (they live in the next node's heap)
        assertTrue(!out.contains("freeing its blocks failed"), out);
        assertTrue(!out.contains("could not free map entry"), out);
    }

    /** Every app ran, printed its checks, and every check held. */
    private static void assertEveryAppOk(String out) {
        for (String app : new String[]{"counters", "kv", "bank", "jobs", "params"}) {
            assertTrue(out.contains("\n== " + app + ": "), app + " ran:\n" + out);
            assertTrue(out.contains("\n" + app + " OK\n"), app + " OK:\n" + out);
        }
        assertTrue(!out.contains("MISMATCH"), out);
        assertTrue(out.contains("demo OK: every app's result is checked and holds."), out);
        // each app prints latency percentiles of its main operation (HdrHistogram)
        for (String p : new String[]{"FAA p99 us", "get p99 us", "transfer p99 us", "take p99 us", "p99 "}) {
            assertTrue(out.contains(p), p + ":\n" + out);
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void theDemoRunsItsNodesAsProcessesOverShm() {
        String out = run(0, "demo", "--transport", "shm", "--nodes", "3", "--ops", "500", "--blocks", "8");
        assertTrue(out.contains("as separate processes over shm"), out);
        assertEveryAppOk(out);
        assertTrue(out.contains("heap blocks read back equal to what was written"), out);
        // node 3 is a client: it runs every app, and holds no memory
        assertTrue(out.contains("node 3 is a client"), out);
        assertTrue(out.lines().anyMatch(l -> l.matches("  node 3 UP .*client: no memory.*")), out);
        // the heap table that node 1 read from every memory node's chunk table: chunks claimed, also by client 3
        for (int node = 1; node <= 2; node++) {
            String row = "  " + node + " +1 +64KiB .*\\{[123]=[1-9].*";
            assertTrue(out.lines().anyMatch(l -> l.matches(row)), "no heap row for node " + node + ":\n" + out);
        }
        assertTrue(out.lines().anyMatch(l -> l.matches("  [12] +1 +64KiB .*3=[1-9].*")), "client 3 owns chunks:\n" + out);
        assertTrue(out.lines().noneMatch(l -> l.matches("  3 +1 +64KiB .*")), "no heap on client 3:\n" + out);
    }

    /**
     * Over tcp with replication, the jobs app alone: a memory node holding some of its
     * structures is killed mid-run and never restarted; its copies are promoted, the
     * structures answer again, and every job is still done exactly once.
     */
    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void overTcpTheJobsAppDoesEveryJobExactlyOnceWhenAMemoryNodeHoldingItsStructuresIsKilled() {
        ByteArrayOutputStream sink = new ByteArrayOutputStream(); // stdout and stderr: the nodes' logs too
        int code = runCapturing(sink, "demo", "jobs", "--kill", "--ops", "20000");
        String out = sink.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, out);
        assertTrue(out.contains("as separate processes over tcp (127.0.0.1), replication on"), out);
        java.util.regex.Matcher killed = java.util.regex.Pattern
                .compile("killed memory node (\\d) \\(kill -9, not restarted\\) when ([\\d,]+) of 1,000 jobs were"
                        + " done; it held the Dsm").matcher(out);
        assertTrue(killed.find(), out);
        assertTrue(Integer.parseInt(killed.group(1)) >= 2 && Integer.parseInt(killed.group(1)) <= 3, "a memory node"
                + " other than node 1:\n" + out);
        assertTrue(Integer.parseInt(killed.group(2).replace(",", "")) < 1000, "killed mid-run:\n" + out);
        assertTrue(out.contains("its structures answered again"), out);
        assertTrue(out.contains(killed.group(1) + "     killed: its answer died with it"), out);
        assertTrue(out.matches("(?s).*jobs done \\(doneBy set, read back by node 1\\) +1,000 +expected +1,000 +OK.*"), out);
        assertTrue(out.contains("\njobs OK\n"), out);
        assertTrue(!out.contains("== counters"), "only the app asked for runs:\n" + out);
        // "log lines print twice": both memory nodes warn that they lost the killed node; each line names its node
        assertTrue(out.lines().anyMatch(l -> l.matches("\\[node \\d\\] .*")),
                "the nodes' warnings, each naming its node:\n" + out);
        assertNoLineTwiceInARow(out);
    }

    /** No line twice in a row (the nodes' logs share the demo's stderr; each line names its node). */
    private static void assertNoLineTwiceInARow(String out) {
        java.util.List<String> twice = new java.util.ArrayList<>();
        String previous = null;
        for (String line : out.split("\n")) {
            if (line.isBlank()) {
                continue;
            }
            if (line.equals(previous)) {
                twice.add(line);
            }
            previous = line;
        }
        assertEquals(java.util.List.of(), twice, "lines printed twice in a row:\n" + out);
    }

    /** Runs the CLI with stdout and stderr captured into {@code sink} (both), returning the exit code. */
    private static int runCapturing(ByteArrayOutputStream sink, String... args) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        long began = System.nanoTime();
        // each line also goes, timed, to the test's output as it comes (where a run's time goes is read there)
        PrintStream both = new PrintStream(new TimedLines(sink, out, began), true, StandardCharsets.UTF_8);
        System.setOut(both);
        System.setErr(both);
        int code = -1;
        try {
            code = MembusCli.run(args);
            return code;
        } finally {
            System.setOut(out);
            System.setErr(err);
            System.out.println(TimedLines.since(began) + " membus demo returned " + code);
        }
    }

    @Test
    void badOptionsAreRefusedWithWhatIsAllowed() {
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        assertEquals(1, runCapturing(sink, "demo", "--nodes", "1"));
        assertEquals(1, runCapturing(sink, "demo", "--transport", "carrier-pigeon", "--nodes", "2"));
        assertEquals(1, runCapturing(sink, "demo", "--ops", "0"));
        assertEquals(1, runCapturing(sink, "demo", "--nodes", "2", "--clients", "2"));
        assertEquals(2, runCapturing(sink, "demo", "--no-such-option"));
        assertEquals(1, runCapturing(sink, "demo", "nosuch"));
        assertEquals(1, runCapturing(sink, "demo", "jobs", "--kill", "--transport", "local"));
        // shm's kind keeps copies by adopting files, not by forwarding changes (TransportCapabilities.of("shm"))
        assertEquals(1, runCapturing(sink, "demo", "jobs", "--kill", "--transport", "shm"));
        String text = sink.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("membus: bad config: key=--nodes, value=1, allowed=2..16"), text);
        assertTrue(text.contains("membus: bad config: key=--transport, value=carrier-pigeon, allowed=shm, tcp, local"),
                text);
        assertTrue(text.contains("membus: bad config: key=--ops, value=0, allowed=1 or more"), text);
        assertTrue(text.contains("Unknown option: '--no-such-option'"), text);
        assertTrue(text.contains("membus: bad config: key=demo app, value=nosuch, allowed=counters, kv, bank, jobs,"
                + " params"), text);
        assertTrue(text.contains("membus: bad config: key=--transport, value=local with --kill, allowed=tcp (the"
                + " default with --kill): --kill kills a memory node, whose structures live on in their copies; it"
                + " needs node processes whose transport forwards changes to copies"), text);
        assertTrue(text.contains("key=--transport, value=shm with --kill, allowed=tcp (the default with --kill)"), text);
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aNodeProcessKilledMidRunFailsTheDemoWhichStopsEveryNodeAndRemovesItsShmDirectory() throws Exception {
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        java.util.concurrent.CompletableFuture<Integer> demo = java.util.concurrent.CompletableFuture.supplyAsync(
                () -> runCapturing(sink, "demo", "--transport", "shm", "--nodes", "3", "--ops", "100000000",
                        "--blocks", "8", "--timeout", "100"));
        java.util.regex.Pattern node2 = java.util.regex.Pattern.compile("node 2 UP .*\\(pid (\\d+)\\)");
        long pid = -1;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (pid < 0 && System.nanoTime() - deadline < 0 && !demo.isDone()) {
            java.util.regex.Matcher m = node2.matcher(sink.toString(StandardCharsets.UTF_8));
            if (m.find()) {
                pid = Long.parseLong(m.group(1));
            } else {
                Thread.sleep(50);
            }
        }
        assertTrue(pid > 0, "node 2's pid was not printed:\n" + sink.toString(StandardCharsets.UTF_8));
        String shmDir = sink.toString(StandardCharsets.UTF_8).replaceAll("(?s).*over shm \\(([^)]*)\\).*", "$1");
        assertTrue(ProcessHandle.of(pid).orElseThrow().destroyForcibly(), "kill node 2");

        int code = demo.get(90, TimeUnit.SECONDS);
        String text = sink.toString(StandardCharsets.UTF_8);
        assertEquals(1, code, text);
        assertTrue(text.contains("membus: demo FAILED: node 2 (pid " + pid + ") exited"), text);
        assertTrue(ProcessHandle.current().descendants().noneMatch(p -> p.info().commandLine().orElse("")
                .contains("demo-node")), "every node process is gone");
        assertTrue(!java.nio.file.Files.exists(java.nio.file.Path.of(shmDir)), shmDir + " removed");
    }
}
