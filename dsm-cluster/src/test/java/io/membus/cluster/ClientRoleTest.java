package io.membus.cluster;

import io.membus.core.test.TestFiles;
import io.membus.core.test.TestJvm;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.membus.cluster.TestClusters.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Clients never count in the split-brain resolver: two memory nodes in this JVM and
 * three client nodes (no segments) in child JVMs; all clients are killed at once
 * (kill -9), which would be a 3-of-5 majority lost if clients counted. The memory nodes
 * must stay up, keep serving and remove the clients.
 */
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
class ClientRoleTest {
    private final List<DsmNode> nodes = new ArrayList<>();
    private Path shmDir;

    @AfterEach
    void cleanUp() {
        for (DsmNode n : nodes) {
            n.close();
        }
        TestFiles.deleteTree(shmDir);
    }

    @Test
    void aNodeWithoutSegmentsIsAClientByDefaultAndAClientWithSegmentsIsRefused() {
        assertTrue(NodeConfig.parse(TestClusters.config(5, 0, 2551, "local", "membus.segments.count = 0\n")).isClient());
        assertFalse(NodeConfig.parse(TestClusters.config(5, 0, 2551, "local", "")).isClient());
        var e = org.junit.jupiter.api.Assertions.assertThrows(io.membus.core.error.DsmConfigException.class,
                () -> NodeConfig.parse(TestClusters.config(5, 0, 2551, "local", "membus.role = client\n")));
        assertTrue(e.getMessage().contains("membus.role"), e.getMessage());
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void killingMoreClientsThanMemoryNodesNeverDownsTheMemoryNodes() throws Exception {
        Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
        shmDir = Files.createTempDirectory(root, "membus-client-test-");
        String shm = "membus.transports.shm.dir = \"" + shmDir + "\"\n";
        int seed = TestClusters.freePort();
        DsmNode n1 = DsmNode.start(NodeConfig.parse(TestClusters.config(1, seed, seed, "shm", shm)));
        nodes.add(n1);
        DsmNode n2 = DsmNode.start(NodeConfig.parse(TestClusters.config(2, 0, seed, "shm", shm)));
        nodes.add(n2);
        try (TestJvm jvm = new TestJvm()) {
            List<Process> clients = new ArrayList<>();
            for (int id = 11; id <= 13; id++) {
                Path conf = shmDir.resolve("client-" + id + ".conf");
                Files.writeString(conf, TestClusters.config(id, 0, seed, "shm", shm + "membus.segments.count = 0\n"));
                clients.add(jvm.start(NodeProcess.class, List.of(conf.toString())));
            }
            try {
                await("three clients joined", Duration.ofSeconds(90), () -> n1.directory().members().size() == 5);
            } catch (AssertionError e) {
                throw new AssertionError(e.getMessage() + "; child output:\n" + jvm.output(0), e);
            }
            long ptr = n1.directory().segment(2, 0).orElseThrow().pointer(0);
            assertEquals(0, n1.remoteMemory().fetchAndAdd(ptr, 1));
            for (Process p : clients) {
                p.destroyForcibly();
            }
            for (Process p : clients) {
                p.waitFor(10, TimeUnit.SECONDS);
            }
            await("the killed clients are removed", Duration.ofSeconds(60),
                    () -> n1.directory().members().size() == 2 && n2.directory().members().size() == 2);
            // past the resolver's stable-after: a decision counting clients would have downed nodes 1 and 2 by now
            Thread.sleep(4_000);
            assertNull(n1.downReason(), "node 1 stays up");
            assertNull(n2.downReason(), "node 2 stays up");
            assertFalse(n1.isDown() || n2.isDown());
            assertEquals(1, n2.remoteMemory().fetchAndAdd(ptr, 1), "and keeps serving");
        }
    }
}
