package io.membus.core.replication;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * No main source of any module changes a {@link io.membus.core.Segment}'s memory
 * outside the places that sequence and forward changes (or apply them as a copy): a
 * change that bypassed its replica group would reach the primary's memory with no
 * sequence, and no copy would ever have it. Changes go through
 * {@link io.membus.core.transport.SegmentTable}'s verbs, which route a replicated
 * segment's changes through its {@link ReplicaGroup}.
 *
 * <p>The scan finds variables, fields and parameters declared as {@code Segment} and
 * calls of a change method on them ({@code write}, {@code writeLong},
 * {@code writeFromAddress}, {@code compareAndSwap}, {@code fetchAndAdd}, {@code zero}),
 * and the same calls on a segment looked up inline in a table ({@code table().get(i).write(...)}).
 */
class NoChangeBypassesTheGroupTest {
    /** The files allowed to change segment memory, relative to a module's {@code src/main/java}. */
    private static final Set<String> ALLOWED = Set.of(
            "io/membus/core/Segment.java",                    // the memory itself
            "io/membus/core/transport/SegmentTable.java",     // unreplicated segments; replicated ones go to the group
            "io/membus/core/replication/ReplicaGroup.java",   // the primary: sequence, apply, forward
            "io/membus/core/replication/CopyReplica.java");   // a copy applies what its primary forwarded

    private static final String CHANGES = "(write|writeLong|writeFromAddress|compareAndSwap|fetchAndAdd|zero)\\s*\\(";
    private static final Pattern DECLARED = Pattern.compile("\\bSegment\\s+(\\w+)\\s*[=;,)]");
    private static final Pattern INLINE = Pattern.compile(
            "\\b(table\\(\\)|table|segments\\(\\)|segments)\\s*\\.\\s*get\\([^()]*\\)\\s*\\.\\s*" + CHANGES);

    @Test
    void noChangeBypassesTheGroup() throws IOException {
        Path root = Path.of("").toAbsolutePath();
        if (!Files.exists(root.resolve("dsm-core")) && root.getParent() != null) {
            root = root.getParent(); // run from a module directory
        }
        assertTrue(Files.isDirectory(root.resolve("dsm-core/src/main/java")), "repository root not found from " + root);
        List<String> bypasses = new ArrayList<>();
        int scanned = 0;
        try (Stream<Path> modules = Files.list(root)) {
            for (Path module : (Iterable<Path>) modules::iterator) {
                Path main = module.resolve("src/main/java");
                if (!Files.isDirectory(main)) {
                    continue;
                }
                try (Stream<Path> files = Files.walk(main)) {
                    for (Path file : (Iterable<Path>) files.filter(p -> p.toString().endsWith(".java"))::iterator) {
                        scanned++;
                        String rel = main.relativize(file).toString().replace('\\', '/');
                        if (!ALLOWED.contains(rel)) {
                            bypasses.addAll(scan(root.relativize(file).toString(), Files.readString(file)));
                        }
                    }
                }
            }
        } catch (UncheckedIOException e) {
            throw e.getCause();
        }
        assertTrue(scanned > 100, "the scan found the sources (" + scanned + " files)");
        assertTrue(bypasses.isEmpty(), "segment memory changed outside SegmentTable and the replication engine (it"
                + " would bypass a replica group: call the table's verbs instead):\n  " + String.join("\n  ", bypasses));
    }

    static List<String> scan(String name, String source) {
        String code = source.replaceAll("(?s)/\\*.*?\\*/", " ").replaceAll("//[^\n]*", " ");
        Set<String> segments = new HashSet<>();
        Matcher d = DECLARED.matcher(code);
        while (d.find()) {
            segments.add(d.group(1));
        }
        List<String> found = new ArrayList<>();
        for (String var : segments) {
            Matcher m = Pattern.compile("\\b" + Pattern.quote(var) + "\\s*\\.\\s*" + CHANGES).matcher(code);
            while (m.find()) {
                found.add(name + ":" + line(code, m.start()) + ": " + var + "." + m.group(1) + "(...)");
            }
        }
        Matcher i = INLINE.matcher(code);
        while (i.find()) {
            found.add(name + ":" + line(code, i.start()) + ": " + i.group().replaceAll("\\s+", ""));
        }
        return found;
    }

    private static int line(String code, int at) {
        int n = 1;
        for (int k = 0; k < at; k++) {
            if (code.charAt(k) == '\n') {
                n++;
            }
        }
        return n;
    }

    @Test
    void theScanFindsABypass() {
        String bypass = "class X { void f(Segment s, long o) { s.write(o, b, 0, 8); }\n"
                + " void g() { transport.table().get(0).fetchAndAdd(0, 1); } }";
        List<String> found = scan("X.java", bypass);
        assertTrue(found.size() == 2, "both bypasses found: " + found);
    }
}
