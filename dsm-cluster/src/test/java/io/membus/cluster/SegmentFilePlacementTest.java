package io.membus.cluster;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Where a node puts its file-backed segments follows the transport's declared
 * {@link io.membus.core.capability.TransportCapabilities#segmentFiles()}, not its name: a
 * transport not named {@code shm} that needs its files in its directory
 * ({@link MappedTestTransportProvider}) gets them there, and a failure to create one names
 * the key that sets that directory.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SegmentFilePlacementTest {

    private static String config(int id, int port, Path mapped, Path segments) {
        return TestClusters.FAST + "membus.node-id = " + id + "\n"
                + "membus.cluster-name = placement-" + System.nanoTime() + "\n"
                + "membus.host = \"127.0.0.1\"\n"
                + "membus.port = " + port + "\n"
                + "membus.seed-nodes = [\"127.0.0.1:" + port + "\"]\n"
                + "membus.transport = " + MappedTestTransportProvider.NAME + "\n"
                + "membus.transports.shm.dir = \"" + mapped + "\"\n"
                + "membus.segments.count = 2\n"
                + "membus.segments.size = 64KiB\n"
                // where segment files go, not replication: the wrapper declares shm's adoption but is no
                // AbstractTransport, which the adoption service needs to adopt files
                + "membus.replication.backups = 0\n"
                + "membus.segments.file-backed = true\n"
                + "membus.segments.dir = \"" + segments + "\"\n";
    }

    @Test
    void aTransportNotNamedShmThatNeedsMappedFilesGetsItsSegmentFilesInItsDirectory(@TempDir Path dir)
            throws IOException {
        Path mapped = Files.createDirectories(dir.resolve("mapped"));
        Path segments = Files.createDirectories(dir.resolve("segments"));
        int port = TestClusters.freePort();
        try (DsmNode node = DsmNode.start(NodeConfig.parse(config(51, port, mapped, segments)))) {
            assertEquals(MappedTestTransportProvider.NAME, node.transport().name());
            for (int i = 0; i < 2; i++) {
                Path f = mapped.resolve("node-51-persistent-" + i + ".seg");
                assertTrue(Files.isRegularFile(f), "segment " + i + " is a file in the transport's directory: " + f);
            }
        }
        try (var left = Files.list(segments)) {
            assertEquals(0, left.count(), "nothing in membus.segments.dir: the transport said where its files go");
        }
    }

    @Test
    void aSegmentFileThatCannotBeCreatedNamesTheKeyOfTheTransportsDirectory(@TempDir Path dir) throws IOException {
        Path mapped = Files.createDirectories(dir.resolve("mapped"));
        Path segments = Files.createDirectories(dir.resolve("segments"));
        // a dangling link where the file must go: it does not exist, and it cannot be created
        Files.createSymbolicLink(mapped.resolve("node-52-persistent-0.seg"), dir.resolve("nowhere").resolve("x"));
        int port = TestClusters.freePort();
        DsmConfigException e = assertThrows(DsmConfigException.class,
                () -> DsmNode.start(NodeConfig.parse(config(52, port, mapped, segments))));
        assertEquals("membus.transports.shm.dir", e.key(), e.getMessage());
        assertEquals(mapped.toString(), e.value(), e.getMessage());
    }
}
