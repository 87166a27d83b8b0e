package io.membus;

import org.junit.jupiter.api.Test;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

import javax.xml.parsers.DocumentBuilderFactory;
import javax.xml.xpath.XPath;
import javax.xml.xpath.XPathConstants;
import javax.xml.xpath.XPathFactory;
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

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The module graph in README.md and docs/design.md is the poms' (issue 25): each page's
 * table of modules (artifact, directory, compile-scope and run-time dependencies on other
 * Membus modules) equals what the reactor's poms declare, and the drawing above it names
 * every module. Test-scope dependencies and test-jars are not part of the graph.
 */
class ModuleGraphTest {
    /** The header line of the table on both pages. */
    static final String HEADER = "| module | directory | depends on (compile scope) | at run time |";

    private static final Pattern NAME = Pattern.compile("`([^`]+)`");

    /** One row of the graph: a module's directory and its dependencies on other Membus modules. */
    record Row(String directory, Set<String> compile, Set<String> runtime) {
    }

    @Test
    void theReadmesAndTheDesignPagesModuleTablesAreThePoms() throws Exception {
        Path root = Path.of("..").toAbsolutePath().normalize();
        Map<String, Row> poms = fromPoms(root);
        assertTrue(poms.containsKey("membus") && poms.containsKey("dsm-core"), "the reactor's modules: " + poms.keySet());
        for (String page : List.of("README.md", "docs/design.md")) {
            String text = Files.readString(root.resolve(page));
            assertEquals(poms, fromPage(text), page + "'s module table against the poms");
            String drawing = text.substring(text.indexOf("## Modules"), text.indexOf(HEADER));
            for (String artifact : poms.keySet()) {
                assertTrue("membus-bom".equals(artifact) || drawing.contains(artifact),
                    page + "'s module drawing does not name " + artifact);
            }
        }
    }

    /** The check sees a dependency the page leaves out and a directory it names wrong. */
    @Test
    void theCheckSeesAMissingDependencyAndAWrongDirectory() throws Exception {
        Path root = Path.of("..").toAbsolutePath().normalize();
        Map<String, Row> poms = fromPoms(root);
        String page = Files.readString(root.resolve("README.md"));
        String row = "| `dsm-coherence` | `dsm-coherence` | `dsm-alloc`, `dsm-codec` |";
        assertTrue(page.contains(row), "README.md has the row " + row);
        assertNotEquals(poms, fromPage(page.replace(row, "| `dsm-coherence` | `dsm-coherence` | `dsm-alloc` |")));
        assertNotEquals(poms, fromPage(page.replace("| `membus` | `membus-facade` |", "| `membus` | `membus` |")));
    }

    /** Each module's artifact mapped to its row, as the reactor's poms declare them. */
    static Map<String, Row> fromPoms(Path root) throws Exception {
        Map<String, Row> graph = new TreeMap<>();
        for (Element module : children(pom(root.resolve("pom.xml")), "modules/module")) {
            String dir = module.getTextContent().trim();
            Element pom = pom(root.resolve(dir).resolve("pom.xml"));
            Set<String> compile = new TreeSet<>();
            Set<String> runtime = new TreeSet<>();
            for (Element d : children(pom, "dependencies/dependency")) {
                String scope = text(d, "scope", "compile");
                if (!"io.membus".equals(text(d, "groupId", "")) || !"jar".equals(text(d, "type", "jar"))) {
                    continue;
                }
                if ("compile".equals(scope)) {
                    compile.add(text(d, "artifactId", ""));
                } else if ("runtime".equals(scope)) {
                    runtime.add(text(d, "artifactId", ""));
                } else {
                    assertEquals("test", scope, dir + "'s dependency on " + text(d, "artifactId", "") + ": a scope the graph does not know");
                }
            }
            graph.put(text(pom, "artifactId", ""), new Row(dir, compile, runtime));
        }
        return graph;
    }

    /** Each module's artifact mapped to its row, as the page's table under {@link #HEADER} gives them. */
    static Map<String, Row> fromPage(String page) {
        int at = page.indexOf(HEADER);
        assertTrue(at >= 0, "no table headed " + HEADER);
        Map<String, Row> graph = new TreeMap<>();
        List<String> lines = page.substring(at).lines().skip(2).takeWhile(l -> l.startsWith("|")).toList();
        for (String line : lines) {
            String[] cells = line.split("\\|");
            assertEquals(5, cells.length, "four cells in " + line);
            graph.put(names(cells[1]).get(0), new Row(names(cells[2]).get(0),
                new TreeSet<>(names(cells[3])), new TreeSet<>(names(cells[4]))));
        }
        return graph;
    }

    private static List<String> names(String cell) {
        List<String> names = new ArrayList<>();
        Matcher m = NAME.matcher(cell);
        while (m.find()) {
            names.add(m.group(1));
        }
        return names;
    }

    private static Element pom(Path file) throws Exception {
        assertTrue(Files.isRegularFile(file), file + " missing");
        return DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(file.toFile()).getDocumentElement();
    }

    /** The elements at {@code path} (an XPath below {@code parent}; the poms are read without namespaces). */
    private static List<Element> children(Element parent, String path) throws Exception {
        XPath xpath = XPathFactory.newInstance().newXPath(); // not thread-safe: one per call
        NodeList nodes = (NodeList) xpath.evaluate(path, parent, XPathConstants.NODESET);
        List<Element> items = new ArrayList<>();
        for (int i = 0; i < nodes.getLength(); i++) {
            items.add((Element) nodes.item(i));
        }
        return items;
    }

    /** The text of {@code parent}'s child {@code tag}, or {@code otherwise} where it has none. */
    private static String text(Element parent, String tag, String otherwise) throws Exception {
        List<Element> e = children(parent, tag);
        return e.isEmpty() ? otherwise : e.get(0).getTextContent().trim();
    }
}
