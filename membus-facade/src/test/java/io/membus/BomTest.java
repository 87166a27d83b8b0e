package io.membus;

import org.junit.jupiter.api.Test;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

import javax.xml.parsers.DocumentBuilderFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The BOM ({@code membus-bom}, no parent on purpose) stays in step with the
 * reactor: the same version, and every module a user can depend on listed.
 */
class BomTest {
    /** Modules that are applications or the BOM itself, not libraries a user depends on. */
    private static final Set<String> NOT_PUBLISHED_AS_LIBRARIES = Set.of("membus-bom", "samples", "dsm-bench");

    @Test
    void theBomListsEveryLibraryModuleAtTheReactorsVersion() throws Exception {
        Path root = Path.of("..").toAbsolutePath().normalize();
        Document parent = parse(root.resolve("pom.xml"));
        String version = child(parent.getDocumentElement(), "version");
        Document bom = parse(root.resolve("membus-bom/pom.xml"));
        Element bomProperties = first(bom.getDocumentElement(), "properties");
        assertEquals(version, child(bom.getDocumentElement(), "version"), "membus-bom's own version");
        assertEquals(version, child(bomProperties, "membus.version"), "membus-bom's membus.version");

        Set<String> libraries = new TreeSet<>();
        NodeList modules = parent.getElementsByTagName("module");
        for (int i = 0; i < modules.getLength(); i++) {
            String dir = modules.item(i).getTextContent().trim();
            if (!NOT_PUBLISHED_AS_LIBRARIES.contains(dir)) {
                libraries.add(child(parse(root.resolve(dir).resolve("pom.xml")).getDocumentElement(), "artifactId"));
            }
        }
        Set<String> listed = new TreeSet<>();
        NodeList deps = bom.getElementsByTagName("dependency");
        for (int i = 0; i < deps.getLength(); i++) {
            Element d = (Element) deps.item(i);
            assertEquals("io.membus", child(d, "groupId"));
            assertEquals("${membus.version}", child(d, "version"));
            listed.add(child(d, "artifactId"));
        }
        assertEquals(libraries, listed, "membus-bom must list exactly the library modules of the reactor");
        assertTrue(listed.contains("membus"));
    }

    private static Document parse(Path pom) throws Exception {
        assertTrue(Files.isRegularFile(pom), pom + " missing");
        return DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(pom.toFile());
    }

    private static Element first(Element parent, String tag) {
        for (Node n = parent.getFirstChild(); n != null; n = n.getNextSibling()) {
            if (n instanceof Element e && e.getTagName().equals(tag)) {
                return e;
            }
        }
        throw new AssertionError("<" + tag + "> missing under <" + parent.getTagName() + ">");
    }

    private static String child(Element parent, String tag) {
        return first(parent, tag).getTextContent().trim();
    }
}
