package io.membus.samples;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DemoCommandTest {

    private static String run(int expectedExit, String... args) {
        PrintStream original = System.out;
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buffer, true, StandardCharsets.UTF_8));
        int code;
        try {
            code = MembusCli.run(args);
        } finally {
            System.setOut(original);
        }
        String out = buffer.toString(StandardCharsets.UTF_8);
        System.out.println(out);
        assertEquals(expectedExit, code, out);
        return out;
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void theDemoOverLocalChecksEveryTotal() {
        String out = run(0, "demo", "--transport", "local", "--ops", "500", "--blocks", "8");
        assertTrue(out.contains("shared counter on node 1 (incremented by every node)"), out);
        assertTrue(out.contains("demo OK"), out);
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void theDemoRunsItsNodesAsProcessesOverShm() {
        String out = run(0, "demo", "--transport", "shm", "--nodes", "3", "--ops", "500", "--blocks", "8");
        assertTrue(out.contains("as separate processes over shm"), out);
        assertTrue(out.contains("demo OK"), out);
        assertTrue(out.contains("heap blocks read back equal to what was written"), out);
        // the heap table that node 1 read from every node's chunk table: one row per node, chunks claimed
        for (int node = 1; node <= 3; node++) {
            String row = "  " + node + " +1 +64KiB .*\\{[123]=[1-9].*";
            assertTrue(out.lines().anyMatch(l -> l.matches(row)), "no heap row for node " + node + ":\n" + out);
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void theDemoRunsItsNodesAsProcessesOverTcp() {
        String out = run(0, "demo", "--transport", "tcp", "--nodes", "3", "--ops", "500", "--blocks", "8");
        assertTrue(out.contains("as separate processes over tcp"), out);
        assertTrue(out.contains("demo OK"), out);
    }

    @Test
    void badOptionsAreRefusedWithWhatIsAllowed() {
        assertEquals(1, MembusCli.run("demo", "--nodes", "1"));
        assertEquals(1, MembusCli.run("demo", "--transport", "carrier-pigeon", "--nodes", "2"));
        assertEquals(2, MembusCli.run("demo", "--no-such-option"));
    }
}
