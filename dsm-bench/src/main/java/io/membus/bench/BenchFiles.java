package io.membus.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * The files a benchmark leaves: its shm segment directory, removed at the trial's end.
 *
 * <p><b>Note:</b> stateless and thread-safe; removing one directory from two threads at
 * once is not meant (JMH tears a trial down on one thread).
 */
public final class BenchFiles {
    private BenchFiles() {
    }

    /**
     * Removes {@code dir} and everything under it, when it exists.
     *
     * @throws UncheckedIOException when the directory cannot be walked
     */
    public static void deleteTree(Path dir) {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot remove " + dir, e);
        }
    }
}
