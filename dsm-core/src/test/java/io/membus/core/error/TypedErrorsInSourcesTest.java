package io.membus.core.error;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Every failure is thrown as the subclass of its category, so that
 * {@code catch (DsmTimeoutException e)} and the like see it: no main source of any
 * module builds a bare {@code new DsmException(...)} (only {@code DsmException}'s own
 * factories do: {@link DsmException#internal} for failures without a category,
 * {@link DsmException#decoded} for a peer's). Scans the sources of every module.
 */
class TypedErrorsInSourcesTest {
    private static final String BARE = "new DsmException(";

    @Test
    void noMainSourceBuildsABareDsmException() throws IOException {
        Path root = Path.of("").toAbsolutePath();
        while (root != null && !(Files.isRegularFile(root.resolve("pom.xml")) && Files.isDirectory(root.resolve("dsm-core"))
                && Files.isDirectory(root.resolve("dsm-cluster")))) {
            root = root.getParent();
        }
        assertTrue(root != null, "the project root (with dsm-core and dsm-cluster) above " + Path.of("").toAbsolutePath());
        Path errorPackage = Path.of("io", "membus", "core", "error");
        List<String> bare = new ArrayList<>();
        int scanned = 0;
        try (Stream<Path> modules = Files.list(root)) {
            for (Path module : modules.filter(m -> Files.isDirectory(m.resolve("src/main/java"))).toList()) {
                Path main = module.resolve("src/main/java");
                try (Stream<Path> files = Files.walk(main)) {
                    for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                        scanned++;
                        if (main.relativize(f).startsWith(errorPackage)) {
                            continue; // the exceptions themselves and DsmException's factories
                        }
                        List<String> lines;
                        try {
                            lines = Files.readAllLines(f);
                        } catch (IOException e) {
                            throw new UncheckedIOException(e);
                        }
                        for (int i = 0; i < lines.size(); i++) {
                            if (lines.get(i).contains(BARE)) {
                                bare.add(root.relativize(f) + ":" + (i + 1) + ": " + lines.get(i).trim());
                            }
                        }
                    }
                }
            }
        }
        assertTrue(scanned > 200, "scanned only " + scanned + " main sources under " + root);
        if (!bare.isEmpty()) {
            fail(bare.size() + " bare DsmException(s): throw the subclass of the category (DsmTimeoutException,"
                    + " NodeUnavailableException, DsmConfigException, ...) or DsmException.internal(...):\n  "
                    + String.join("\n  ", bare));
        }
    }
}
