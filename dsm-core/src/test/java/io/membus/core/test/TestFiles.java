package io.membus.core.test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * The files a test leaves: its shm or segment-file directory, removed when the test ends.
 *
 * <p><b>Note:</b> stateless; thread-safe as far as the file system is (two removals of one
 * directory at once may each fail on what the other removed first: both are best effort).
 */
public final class TestFiles {
    private TestFiles() {
    }

    /**
     * Removes {@code dir} and everything under it, best effort: nothing when {@code dir} is
     * null or gone; a directory that cannot be walked is named on stderr, not thrown (a
     * cleanup must not hide the test's own failure).
     */
    public static void deleteTree(Path dir) {
        if (dir == null || !Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            System.err.println("could not remove " + dir + ": " + e);
        }
    }
}
