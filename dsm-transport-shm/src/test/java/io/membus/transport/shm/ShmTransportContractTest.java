package io.membus.transport.shm;

import io.membus.core.transport.TransportContractTest;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Map;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The transport contract over {@code shm}: one shared directory per test under
 * /dev/shm (or the build directory where /dev/shm does not exist), removed after.
 */
class ShmTransportContractTest extends TransportContractTest {
    private Path dir;

    @Override
    protected String transportName() {
        return "shm";
    }

    @Override
    protected Map<String, String> nodeProperties(int nodeId) {
        if (dir == null) {
            Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
            dir = root.resolve("membus-test-" + testId);
        }
        return Map.of("shm.dir", dir.toString());
    }

    /** A killed child cannot remove its registry, ring and segment files: the test does. */
    @Override
    protected void afterChildKilled(int nodeId) {
        if (dir == null) {
            return;
        }
        try (Stream<Path> files = Files.list(dir)) {
            files.filter(p -> p.getFileName().toString().startsWith("node-" + nodeId + ".")
                    || p.getFileName().toString().startsWith("node-" + nodeId + "-")).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            throw new AssertionError("cannot list " + dir, e);
        }
    }

    @Override
    protected void afterNodesClosed() {
        if (dir == null) {
            return;
        }
        try (Stream<Path> files = Files.list(dir)) {
            // every node closed: its registry and non-persistent segment files are gone
            assertEquals(0, files.count(), "files left in " + dir);
        } catch (IOException e) {
            throw new AssertionError("cannot list " + dir, e);
        } finally {
            try (Stream<Path> walk = Files.walk(dir)) {
                walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException e) {
                System.err.println("could not remove " + dir + ": " + e);
            }
            dir = null;
        }
    }
}
