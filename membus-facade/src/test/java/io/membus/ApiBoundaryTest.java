package io.membus;

import org.junit.jupiter.api.Test;
import org.opentest4j.AssertionFailedError;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The application API and the transport SPI are apart (issue 25; docs/design.md,
 * "Application API and transport SPI"): the main sources of an application-side module
 * name no package of the SPI side, neither by an import nor by a qualified name in code.
 * JPMS exports cannot say it (Chronicle, Pekko and Kryo stay on the class path), so this
 * test does, on the source text: comments and string literals are not code and do not
 * count. Every module of the reactor with main sources is on one side or the other, so a
 * new module must be placed before the suite passes.
 */
class ApiBoundaryTest {
    /**
     * Packages of the SPI side (each with its subpackages): what a transport author and a
     * node's assembly use — the transport SPI (connections, the verb pipeline, segment table,
     * the message endpoint, inboxes and outbox, transport threads, capabilities), the
     * replication layer under the transports, and the transports' peer authentication.
     */
    static final List<String> SPI_PACKAGES = List.of("io.membus.core.transport", "io.membus.core.replication",
            "io.membus.core.auth");

    /** Modules (directories) on the application side: they may use only the application API of dsm-core. */
    static final Set<String> APPLICATION_MODULES = Set.of("dsm-alloc", "dsm-codec", "dsm-coherence",
            "dsm-collections", "membus-facade", "dsm-testkit", "samples");

    /**
     * Modules (directories) that may use the SPI: dsm-core itself, the transports, the node
     * assembly (dsm-cluster) and the benchmarks, which measure the transports beside their floors.
     */
    static final Set<String> SPI_MODULES = Set.of("dsm-core", "dsm-transport-shm", "dsm-transport-tcp",
            "dsm-transport-rdma", "dsm-cluster", "dsm-bench");

    static final String RULE = "an application-side module names no transport SPI package ("
            + String.join(", ", SPI_PACKAGES) + "); use the application API (docs/design.md,"
            + " \"Application API and transport SPI\"), or move a type the application needs out of the SPI";

    private static final Pattern QUALIFIED = Pattern.compile("\\b(?:import\\s+(?:static\\s+)?)?("
            + String.join("|", SPI_PACKAGES.stream().map(p -> p.replace(".", "\\s*\\.\\s*")).toList())
            + ")(?![\\w$])(?:\\s*\\.\\s*[A-Za-z_$][\\w$]*)*(?:\\s*\\.\\s*\\*)?");

    /** One forbidden reference: where, what, and the whole import or qualified name. */
    record Violation(String file, int line, String reference) {
        @Override
        public String toString() {
            return file + ":" + line + ": " + reference;
        }
    }

    @Test
    void noApplicationSideModuleNamesAnSpiPackage() throws Exception {
        Path root = Path.of("..").toAbsolutePath().normalize();
        Map<String, String> sources = new TreeMap<>();
        for (ModuleGraphTest.Row row : ModuleGraphTest.fromPoms(root).values()) {
            String module = row.directory();
            Path main = root.resolve(module).resolve("src/main/java");
            if (!Files.isDirectory(main)) {
                continue;
            }
            assertTrue(APPLICATION_MODULES.contains(module) ^ SPI_MODULES.contains(module), "module " + module
                    + " is on neither side of the API boundary (or on both): add it to APPLICATION_MODULES or"
                    + " SPI_MODULES of " + ApiBoundaryTest.class.getSimpleName());
            if (APPLICATION_MODULES.contains(module)) {
                sources.putAll(sources(root, main));
            }
        }
        assertTrue(sources.size() > 100, "the application side's main sources were found: " + sources.size());
        check(sources);
    }

    /** The check fails on a planted import and a planted qualified name, naming the file, the import and the rule. */
    @Test
    void theCheckFailsOnAPlantedForbiddenImport() {
        String planted = """
                package io.membus.collections;

                import io.membus.core.RemoteMemory;
                import io.membus.core.transport.Transport;
                import static io.membus.core.replication.GroupId.toString;

                /** Mentions io.membus.core.transport.Verbs in a comment: not code. */
                final class Planted {
                    // io.membus.core.auth.PeerAuth in a line comment
                    String text = "io.membus.core.time.Deadlines in a string";
                    long max = io.membus.core.transport.SegmentTable.MAX_VERB_LENGTH;
                }
                """;
        String file = "dsm-collections/src/main/java/io/membus/collections/Planted.java";
        assertEquals(List.of(new Violation(file, 4, "import io.membus.core.transport.Transport"),
                        new Violation(file, 5, "import static io.membus.core.replication.GroupId.toString"),
                        new Violation(file, 11, "io.membus.core.transport.SegmentTable.MAX_VERB_LENGTH")),
                violations(file, planted));
        AssertionFailedError failure = assertThrows(AssertionFailedError.class, () -> check(Map.of(file, planted)));
        assertTrue(failure.getMessage().contains(file + ":4: import io.membus.core.transport.Transport")
                && failure.getMessage().contains(RULE), failure.getMessage());
        String clean = planted.replace("import io.membus.core.transport.Transport;", "")
                .replace("import static io.membus.core.replication.GroupId.toString;", "")
                .replace("io.membus.core.transport.SegmentTable.MAX_VERB_LENGTH", "RemoteMemory.MAX_VERB_LENGTH");
        check(Map.of(file, clean)); // the comment and the string alone do not fail it
    }

    /** Fails, listing every violation and {@link #RULE}, when any of {@code sources} (path to text) has one. */
    static void check(Map<String, String> sources) {
        List<Violation> found = new ArrayList<>();
        sources.forEach((file, text) -> found.addAll(violations(file, text)));
        if (!found.isEmpty()) {
            StringBuilder b = new StringBuilder(found.size() + " reference(s) across the API boundary; rule: " + RULE);
            found.forEach(v -> b.append("\n  ").append(v));
            throw new AssertionFailedError(b.toString());
        }
    }

    /** The references to an SPI package in the code of {@code text} (comments and literals blanked first). */
    static List<Violation> violations(String file, String text) {
        String code = codeOnly(text);
        List<Violation> found = new ArrayList<>();
        Matcher m = QUALIFIED.matcher(code);
        while (m.find()) {
            int line = 1;
            for (int i = 0; i < m.start(); i++) {
                if (code.charAt(i) == '\n') {
                    line++;
                }
            }
            found.add(new Violation(file, line, m.group().replaceAll("\\s*\\.\\s*", ".").replaceAll("\\s+", " ")));
        }
        return found;
    }

    /**
     * {@code text} with every comment, string, text block and character literal replaced
     * by spaces (line breaks kept, so line numbers stay).
     */
    static String codeOnly(String text) {
        StringBuilder b = new StringBuilder(text.length());
        int i = 0;
        int n = text.length();
        while (i < n) {
            char c = text.charAt(i);
            int end;
            if (text.startsWith("//", i)) {
                end = text.indexOf('\n', i);
                end = end < 0 ? n : end;
            } else if (text.startsWith("/*", i)) {
                end = text.indexOf("*/", i + 2);
                end = end < 0 ? n : end + 2;
            } else if (text.startsWith("\"\"\"", i)) {
                end = text.indexOf("\"\"\"", i + 3);
                while (end > 0 && text.charAt(end - 1) == '\\') {
                    end = text.indexOf("\"\"\"", end + 1);
                }
                end = end < 0 ? n : end + 3;
            } else if (c == '"' || c == '\'') {
                end = i + 1;
                while (end < n && text.charAt(end) != c && text.charAt(end) != '\n') {
                    end += text.charAt(end) == '\\' ? 2 : 1;
                }
                end = Math.min(n, end + 1);
            } else {
                b.append(c);
                i++;
                continue;
            }
            for (int k = i; k < end; k++) {
                b.append(text.charAt(k) == '\n' ? '\n' : ' ');
            }
            i = end;
        }
        return b.toString();
    }

    /** Every {@code .java} file under {@code main}, by its path from {@code root}. */
    private static Map<String, String> sources(Path root, Path main) {
        Map<String, String> sources = new TreeMap<>();
        try (Stream<Path> files = Files.walk(main)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                sources.put(root.relativize(f).toString(), Files.readString(f));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return sources;
    }

    /** The sides are disjoint, and the rule's packages are real packages of dsm-core. */
    @Test
    void theSidesAreDisjointAndThePackagesExist() {
        Set<String> both = new TreeSet<>(APPLICATION_MODULES);
        both.retainAll(SPI_MODULES);
        assertEquals(Set.of(), both, "modules on both sides");
        Path core = Path.of("..").toAbsolutePath().normalize().resolve("dsm-core/src/main/java");
        for (String p : SPI_PACKAGES) {
            assertTrue(Files.isDirectory(core.resolve(p.replace('.', '/'))), "no package " + p + " in dsm-core");
        }
    }
}
