package io.membus.cluster;

import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigRenderOptions;
import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A key under {@code membus} that no {@code reference.conf} defines is refused at start
 * with the key, the closest known key and the file and line it was set at; every key
 * the reference files define is accepted.
 */
class NodeConfigUnknownKeysTest {

    @Test
    void aMisspelledKeyInAFileIsRefusedWithTheClosestKeyAndItsLine(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("node.conf");
        Files.writeString(f, """
                membus {
                  node-id = 3
                  heap.segmnets = [0]
                  operation-timout = 5s
                }
                """);
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> NodeConfig.load(f));
        assertEquals("membus.heap.segmnets", e.key(), e.getMessage());
        assertTrue(e.allowed().contains("closest known key: membus.heap.segments;"), e.getMessage());
        assertTrue(e.allowed().contains("node.conf: 3"), "names the file and line: " + e.getMessage());
        assertTrue(e.allowed().contains("also unknown: membus.operation-timout (closest: membus.operation-timeout,"),
                e.getMessage());
        assertTrue(e.allowed().contains("node.conf: 4"), e.getMessage());
        assertTrue(!e.mayHaveRun());
    }

    @Test
    void aMisspelledTopLevelKeyNamesTheKeyItMeant() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> NodeConfig.parse(
                "membus { node-id = 1, operation-timout = 5s }"));
        assertEquals("membus.operation-timout", e.key());
        assertEquals("5s", e.value());
        assertTrue(e.allowed().contains("closest known key: membus.operation-timeout;"), e.getMessage());
        DsmConfigException nested = assertThrows(DsmConfigException.class, () -> NodeConfig.parse(
                "membus { node-id = 1, failure-detection.treshold = 9 }"));
        assertEquals("membus.failure-detection.treshold", nested.key());
        assertTrue(nested.allowed().contains("closest known key: membus.failure-detection.threshold;"),
                nested.getMessage());
        DsmConfigException secret = assertThrows(DsmConfigException.class, () -> NodeConfig.parse(
                "membus { node-id = 1, secrte = \"do-not-print-me-0123456789\" }"));
        assertTrue(secret.allowed().contains("closest known key: membus.secret;"), secret.getMessage());
        // a key without "secret" in its name is printed; this one is misspelled, so the value shows
        DsmConfigException transport = assertThrows(DsmConfigException.class, () -> NodeConfig.parse(
                "membus { node-id = 1, transports.tcp.prot = 7000 }"));
        assertTrue(transport.allowed().contains("closest known key: membus.transports.tcp.port;"),
                transport.getMessage());
    }

    /**
     * System properties are the whole JVM's namespace (a test's -Dmembus.seed): an unknown
     * membus.* property is left out (and logged), a known one is read.
     */
    @Test
    void unknownSystemPropertiesAreLeftOutAndKnownOnesRead() {
        System.setProperty("membus.node-id", "6");
        System.setProperty("membus.seedling", "42");
        ConfigFactory.invalidateCaches();
        try {
            assertEquals(6, NodeConfig.load().nodeId());
        } finally {
            System.clearProperty("membus.node-id");
            System.clearProperty("membus.seedling");
            ConfigFactory.invalidateCaches();
        }
    }

    /** Every key of the merged reference.conf files, set explicitly, is accepted. */
    @Test
    void aConfigSettingEveryKnownKeyPasses() {
        String full = ConfigFactory.defaultReference(NodeConfig.class.getClassLoader()).getConfig("membus").root()
                .render(ConfigRenderOptions.concise());
        NodeConfig c = NodeConfig.from(ConfigFactory.parseString("membus = " + full + "\nmembus.node-id = 2"));
        assertEquals(2, c.nodeId());
        // and a real file in the documented form
        assertEquals(5, NodeConfig.parse("""
                membus {
                  node-id = 5
                  transport = tcp
                  secret = "0123456789abcdef0123"
                  heap { segments = [0], chunk-size = 64KiB }
                  failure-detection { threshold = 9.0 }
                  transports.tcp { port = 0, io-threads = 2 }
                }
                """).nodeId());
    }
}
