package io.membus.samples;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every bad option of {@code membus demo}, {@code membus stress} and {@code membus node} is
 * refused before anything starts with a {@link DsmConfigException} naming the option, the
 * value given and what is allowed, and the CLI prints it as one readable line
 * ({@code membus: bad config: key=..., value=..., allowed=...}). No node, process or thread
 * is started by these command lines: each fails in its option check.
 */
class CliOptionErrorsTest {

    /** Runs {@code args} and returns the exception the command failed with (none: the test fails). */
    private static DsmConfigException refused(String... args) {
        AtomicReference<Exception> thrown = new AtomicReference<>();
        CommandLine cli = new CommandLine(new MembusCli());
        cli.setExecutionExceptionHandler((e, cmd, parsed) -> {
            thrown.set(e);
            return 1;
        });
        assertEquals(1, cli.execute(args), String.join(" ", args));
        assertNotNull(thrown.get(), String.join(" ", args));
        return assertInstanceOf(DsmConfigException.class, thrown.get(), String.join(" ", args));
    }

    private static void assertRefused(String key, String value, String allowed, String... args) {
        DsmConfigException e = refused(args);
        assertEquals(key, e.key(), e.getMessage());
        assertEquals(value, e.value(), e.getMessage());
        assertTrue(e.allowed().startsWith(allowed), e.getMessage());
        assertEquals("bad config: key=" + key + ", value=" + value + ", allowed=" + e.allowed(), e.getMessage());
    }

    @Test
    void demoOptions() {
        assertRefused("--nodes", "1", "2..16", "demo", "--nodes", "1");
        assertRefused("--nodes", "17", "2..16", "demo", "--nodes", "17");
        assertRefused("--ops", "0", "1 or more", "demo", "--ops", "0");
        assertRefused("--blocks", "0", "1 or more", "demo", "--blocks", "0");
        assertRefused("--block-size", "4", "8..1048576", "demo", "--block-size", "4");
        assertRefused("--clients", "2", "0..1 (at least one of the --nodes 2 must hold memory)",
                "demo", "--nodes", "2", "--clients", "2");
        assertRefused("--timeout", "0", "1 or more seconds", "demo", "--timeout", "0");
        assertRefused("--hold", "-1", "0 or more seconds", "demo", "--hold", "-1");
        assertRefused("--transport", "carrier-pigeon", "shm, tcp, local", "demo", "--transport", "carrier-pigeon");
        assertRefused("--transport", "local with --kill", "tcp (the default with --kill)",
                "demo", "jobs", "--kill", "--transport", "local");
        assertRefused("--transport", "shm with --kill", "tcp (the default with --kill)",
                "demo", "jobs", "--kill", "--transport", "shm");
        assertRefused("--nodes", "3 --clients 1 with --kill (2 memory nodes)", "3 or more memory nodes",
                "demo", "jobs", "--kill", "--nodes", "3", "--clients", "1");
        assertRefused("demo app", "nosuch", "counters, kv, bank, jobs, params", "demo", "nosuch");
    }

    @Test
    void stressOptions(@TempDir Path dir) throws Exception {
        String out = dir.toString();
        assertRefused("--workload", "bag", "register, counter, map, queue, lock",
                "stress", "--out", out, "--workload", "bag");
        assertRefused("--coherent", "with --workload counter", "--workload register without --raw-verbs",
                "stress", "--out", out, "--workload", "counter", "--coherent");
        assertRefused("--raw-verbs", "with --workload map", "--workload register or counter",
                "stress", "--out", out, "--workload", "map", "--raw-verbs");
        assertRefused("--nemesis", "meteor", "none, partition, drop, kill, pause, delay, skew, all",
                "stress", "--out", out, "--nemesis", "meteor");
        assertRefused("--transport", "local", "shm, tcp", "stress", "--out", out, "--transport", "local");
        assertRefused("--backups", "4", "0..3", "stress", "--out", out, "--backups", "4");
        assertRefused("--nemesis", "kill-permanent with --client-nodes 1 --backups 1 --transport shm",
                "kill-permanent needs --client-nodes 1 or more",
                "stress", "--out", out, "--nemesis", "kill-permanent", "--transport", "shm", "--client-nodes", "1");
        assertRefused("--nodes", "10", "2..9", "stress", "--out", out, "--nodes", "10");
        assertRefused("--client-nodes", "5", "0..4", "stress", "--out", out, "--client-nodes", "5");
        assertRefused("--clients", "0", "1..16", "stress", "--out", out, "--clients", "0");
        assertRefused("--keys", "1001", "1..1000", "stress", "--out", out, "--keys", "1001");
        assertRefused("--duration", "0", "1 s or more", "stress", "--out", out, "--duration", "0");
        assertRefused("--rate", "0", "1 or more", "stress", "--out", out, "--rate", "0");
        assertRefused("--operation-timeout", "9", "10 ms or more", "stress", "--out", out, "--operation-timeout", "9");
        assertRefused("--timeout", "5", "at least --duration (10 s)",
                "stress", "--out", out, "--duration", "10", "--timeout", "5");
        Files.writeString(Files.createDirectories(dir.resolve("history")).resolve("node-1-life-0.log"), "");
        assertRefused("--out", out, "a folder that holds no histories of a run",
                "stress", "--out", out, "--duration", "1");
    }

    @Test
    void nodeOptions(@TempDir Path dir) {
        assertRefused("--status-interval", "0", "1 or more seconds",
                "node", "--config", dir.resolve("absent.conf").toString(), "--status-interval", "0");
    }

    @Test
    void theCliPrintsTheRefusalAsOneReadableLine() {
        PrintStream err = System.err;
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        System.setErr(new PrintStream(sink, true, StandardCharsets.UTF_8));
        int code;
        try {
            code = MembusCli.run("node", "--config", "absent.conf", "--status-interval", "0");
        } finally {
            System.setErr(err);
        }
        assertEquals(1, code);
        String text = sink.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("membus: bad config: key=--status-interval, value=0, allowed=1 or more seconds"),
                text);
    }
}
