package io.membus.samples;

import io.membus.core.JvmFlags;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Element;
import org.w3c.dom.Node;

import javax.xml.parsers.DocumentBuilderFactory;
import java.io.IOException;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * docs/getting-started.md as a new user follows it: every file the page shows
 * (blocks marked {@code file=PATH}) is written as shown, the client project is
 * built by Maven against Membus' artifacts installed in a local repository of its
 * own (made from this build's modules, third-party artifacts mirrored from the
 * build's local repository, so no network is needed), three memory nodes run
 * {@code membus node --config} with the page's configs, and the page's own
 * {@code java} command runs the application as a client. The only changes made
 * to the page's text: free ports instead of 2551-2553, and a home folder of the
 * test's own (for the cluster secret file every process shares).
 */
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
class GettingStartedTest {
    private static final Pattern FILE_BLOCK = Pattern.compile("```\\w+ file=(\\S+)\\n(.*?)```", Pattern.DOTALL);
    private static final List<String> NOT_LIBRARIES = List.of("samples", "dsm-bench");
    /** {@code membus node}'s periodic status line (two may come in one second of uptime under load). */
    private static final Pattern STATUS_LINE = Pattern.compile("^node \\d+ \\S+ \\| members ");
    /**
     * One local repository for both builds of the class: the reactor's artifacts are installed
     * into it once, and the third-party plugins and dependencies the first build copies from the
     * build's repository are there for the second (a repository of each test's own made both
     * again). Neither build writes what the other reads differently: the same reactor jars.
     */
    @TempDir
    static Path repository;

    @Test
    @Timeout(value = 420, unit = TimeUnit.SECONDS)
    void thePageBuildsAndRunsAsWritten(@TempDir Path dir) throws Exception {
        Path root = Path.of("..").toAbsolutePath().normalize();
        String page = Files.readString(root.resolve("docs/getting-started.md"));

        String run = "java " + String.join(" ", JvmFlags.required())
            + " -cp \"target/classes:target/lib/*\" com.example.shop.ShopApp client.conf";
        assertTrue(page.contains(run), "the page's java command is not\n" + run);
        assertTrue(page.contains("mvn -q package"), "the page's build command");
        for (int n = 1; n <= 3; n++) {
            assertTrue(page.contains("membus/membus node --config node" + n + ".conf"), "node " + n + "'s command");
        }

        Map<String, String> ports = Map.of("2551", String.valueOf(freePort()), "2552", String.valueOf(freePort()),
            "2553", String.valueOf(freePort()));
        Map<String, String> files = fileBlocks(page);
        assertEquals(List.of("node1.conf", "node2.conf", "node3.conf", "shop/pom.xml", "shop/client.conf",
            "shop/src/main/java/com/example/shop/Order.java", "shop/src/main/java/com/example/shop/ShopApp.java"),
            new ArrayList<>(files.keySet()));
        for (Map.Entry<String, String> f : files.entrySet()) {
            String text = f.getValue();
            for (Map.Entry<String, String> p : ports.entrySet()) {
                text = text.replace(p.getKey(), p.getValue());
            }
            Path target = dir.resolve(f.getKey());
            Files.createDirectories(target.getParent());
            Files.writeString(target, text);
        }

        Path shop = dir.resolve("shop");
        build(root, dir, shop, "package", "mvn -q package of the page's project");

        Path home = dir.resolve("home");
        Files.createDirectories(home);
        List<Process> nodes = new ArrayList<>();
        try {
            for (int n = 1; n <= 3; n++) {
                ProcessBuilder pb = JvmLauncher.membus(List.of(),
                    List.of("node", "--config", dir.resolve("node" + n + ".conf").toString(), "--status-interval", "1"));
                pb.environment().put("JDK_JAVA_OPTIONS", "-Duser.home=" + home);
                nodes.add(pb.directory(dir.toFile()).redirectErrorStream(true)
                    .redirectOutput(dir.resolve("node" + n + ".log").toFile()).start());
                if (n == 1) {
                    awaitLine(dir.resolve("node1.log"), "node 1 UP", 90, nodes.get(0));
                }
            }
            awaitLine(dir.resolve("node1.log"), "members 3", 90, nodes.get(0));

            List<String> cmd = new ArrayList<>();
            cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
            cmd.addAll(JvmFlags.required());
            cmd.addAll(List.of("-cp", "target/classes:target/lib/*", "com.example.shop.ShopApp", "client.conf"));
            ProcessBuilder client = new ProcessBuilder(cmd).directory(shop.toFile()).redirectErrorStream(true)
                .redirectOutput(dir.resolve("client.log").toFile());
            client.environment().put("JDK_JAVA_OPTIONS", "-Duser.home=" + home);
            client.environment().remove("JAVA_TOOL_OPTIONS");
            String out = finish(client.start(), 120, dir.resolve("client.log"), "the page's client application");
            for (String line : List.of("map:     Order[id=order-1, items=[book, lamp], status=PAID]",
                "queue:   took order-1", "counter: 2", "lock:    held, fencing token ",
                "object:  Order[id=order-2, items=[chair], status=PAID]", "shop OK")) {
                assertTrue(out.contains(line), "missing \"" + line + "\" in the client's output:\n" + out);
            }
            // "log lines print twice": no message twice in a row in the client's output or a node's log
            assertOnce("the client's output", out);
            for (int n = 1; n <= 3; n++) {
                assertOnce("node " + n + "'s log", Files.readString(dir.resolve("node" + n + ".log"),
                    StandardCharsets.UTF_8));
            }
        } finally {
            for (Process p : nodes) {
                p.destroy();
            }
            for (Process p : nodes) {
                if (!p.waitFor(20, TimeUnit.SECONDS)) {
                    p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                }
            }
        }
    }

    /**
     * The README's dependency snippet builds as copied (issue 29): pasted into a project (the
     * page's pom with its two dependency sections replaced by the README's block), a class
     * that uses the facade and the tcp transport and a test class that uses the test kit
     * ({@code dsm-testkit}, test scope) compile against the installed artifacts, every version
     * coming from the BOM but the logging binding's.
     */
    @Test
    @Timeout(value = 360, unit = TimeUnit.SECONDS)
    void theReadmesDependencySnippetBuildsAsCopied(@TempDir Path dir) throws Exception {
        Path root = Path.of("..").toAbsolutePath().normalize();
        Matcher xml = Pattern.compile("```xml\\n(.*?)```", Pattern.DOTALL)
            .matcher(Files.readString(root.resolve("README.md")));
        assertTrue(xml.find(), "README.md has no xml block");
        String snippet = xml.group(1);
        for (String artifact : List.of("membus-bom", "membus", "dsm-transport-tcp", "slf4j-simple", "dsm-testkit")) {
            assertTrue(snippet.contains("<artifactId>" + artifact + "</artifactId>"), artifact + " in the snippet");
        }
        String pagePom = fileBlocks(Files.readString(root.resolve("docs/getting-started.md"))).get("shop/pom.xml");
        int from = pagePom.indexOf("  <dependencyManagement>");
        int to = pagePom.indexOf("</dependencies>", pagePom.indexOf("\n  <dependencies>")) + "</dependencies>".length();
        assertTrue(from > 0 && to > from, "the page's pom has dependencyManagement, then dependencies");
        Path app = dir.resolve("app");
        Files.createDirectories(app.resolve("src/main/java/com/example"));
        Files.createDirectories(app.resolve("src/test/java/com/example"));
        Files.writeString(app.resolve("pom.xml"), pagePom.substring(0, from).replace("<artifactId>shop</artifactId>",
            "<artifactId>app</artifactId>") + snippet + pagePom.substring(to));
        Files.writeString(app.resolve("src/main/java/com/example/App.java"), """
            package com.example;

            import io.membus.Membus;
            import io.membus.collections.DsmMap;
            import java.nio.file.Path;

            public final class App {
                static final Class<?> TRANSPORT = io.membus.transport.tcp.TcpTransport.class;

                public static void main(String[] args) {
                    try (Membus membus = Membus.start(Path.of(args[0]))) {
                        DsmMap<String, Long> m = membus.map("m", String.class, Long.class);
                        m.put("k", 1L);
                        org.slf4j.LoggerFactory.getLogger(App.class).info("put");
                    }
                }
            }
            """);
        Files.writeString(app.resolve("src/test/java/com/example/AppCheck.java"), """
            package com.example;

            final class AppCheck {
                static final Class<?> KIT = io.membus.test.check.LinearizabilityChecker.class;
            }
            """);
        build(root, dir, app, "test-compile", "mvn -q test-compile of the README's snippet");
        assertTrue(Files.isRegularFile(app.resolve("target/classes/com/example/App.class")));
        assertTrue(Files.isRegularFile(app.resolve("target/test-classes/com/example/AppCheck.class")));
    }

    /**
     * Runs {@code mvn -B -q <goal>} in {@code project} against a local repository of the
     * test's own that holds this reactor's artifacts (third-party ones mirrored from the
     * build's local repository: no network).
     */
    private static void build(Path root, Path dir, Path project, String goal, String what) throws Exception {
        Path repo = repository.resolve("m2");
        if (!Files.isDirectory(repo)) {
            installReactor(root, repo);
        }
        Path settings = dir.resolve("settings.xml");
        Files.writeString(settings, "<settings><mirrors><mirror><id>build-repository</id><mirrorOf>*</mirrorOf><url>"
            + Path.of(System.getProperty("membus.m2.repository", System.getProperty("user.home") + "/.m2/repository"))
                .toUri() + "</url></mirror></mirrors></settings>\n");
        Path log = dir.resolve(project.getFileName() + "-build.log");
        Process build = new ProcessBuilder(mvn(), "-B", "-q", "-s", settings.toString(), "-Dmaven.repo.local=" + repo,
            goal).directory(project.toFile()).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        finish(build, 300, log, what);
    }

    /**
     * No log message twice in a row: a line that two loggers print (two SLF4J bindings,
     * Pekko's standard-out logger beside slf4j, an appender added twice) comes out back to
     * back, whatever its format. Status lines repeat by design and differ in their uptime.
     */
    static void assertOnce(String what, String output) {
        List<String> twice = new ArrayList<>();
        String previous = null;
        for (String line : output.split("\n")) {
            String m = logMessage(line.strip());
            if (m.isEmpty() || STATUS_LINE.matcher(m).find()) {
                continue;
            }
            if (m.equals(previous)) {
                twice.add(line);
            }
            previous = m;
        }
        assertEquals(List.of(), twice, "lines printed twice in " + what + ":\n" + output);
    }

    /**
     * A log line's message without what its logger puts first: slf4j-simple's
     * {@code [thread] LEVEL logger - } (or the samples' {@code LEVEL Logger - }), and the
     * bracketed fields of Pekko's standard-out logger ({@code [WARN] [date] [thread] [source] }).
     */
    static String logMessage(String line) {
        return line.replaceFirst("^(\\[[^]]*] )+", "")
            .replaceFirst("^(\\d\\d:\\d\\d:\\d\\d\\.\\d{3} )?(TRACE|DEBUG|INFO|WARN|ERROR) \\S+ - ", "");
    }

    /** The check above sees one message printed by two loggers, in either format, and lets a repeat later pass. */
    @Test
    void theLogCheckSeesALinePrintedTwice() {
        String pekkoAndSlf4j = "[main] INFO io.membus.cluster.DsmNode - membus node 4 started\n"
            + "[WARN] [11/26/2026 20:00:00.000] [shop-pekko.actor.default-dispatcher-5] [Cluster(pekko://shop)]"
            + " Cluster Node [pekko://shop@127.0.0.1:2551] - joined\n"
            + "[shop-pekko.actor.default-dispatcher-5] WARN org.apache.pekko.cluster.Cluster - Cluster Node"
            + " [pekko://shop@127.0.0.1:2551] - joined\n";
        org.junit.jupiter.api.Assertions.assertThrows(org.opentest4j.AssertionFailedError.class,
            () -> assertOnce("a sample", pekkoAndSlf4j));
        org.junit.jupiter.api.Assertions.assertThrows(org.opentest4j.AssertionFailedError.class,
            () -> assertOnce("a sample", "INFO DsmNode - started\nINFO DsmNode - started\n"));
        assertOnce("a sample", "INFO DsmNode - started\nINFO ClusterAgent - joined\nINFO DsmNode - started\n"
            + "node 1 UP | members 3 [1, 2, 3] | up 19s\nnode 1 UP | members 3 [1, 2, 3] | up 19s\n");
    }

    /** The page's blocks marked {@code ```lang file=PATH}, in page order. */
    static Map<String, String> fileBlocks(String page) {
        Map<String, String> files = new LinkedHashMap<>();
        Matcher m = FILE_BLOCK.matcher(page);
        while (m.find()) {
            files.put(m.group(1), m.group(2));
        }
        return files;
    }

    /**
     * What {@code mvn install} of this reactor puts in a local repository: the parent
     * pom, and each library module's pom and jar (made from its compiled classes, so
     * it works after {@code mvn test} as after {@code package}).
     */
    private static void installReactor(Path root, Path repo) throws Exception {
        Element parent = pom(root.resolve("pom.xml"));
        String version = child(parent, "version");
        install(repo, "membus-parent", version, root.resolve("pom.xml"), null);
        for (Node n = element(parent, "modules").getFirstChild(); n != null; n = n.getNextSibling()) {
            if (!(n instanceof Element module) || NOT_LIBRARIES.contains(module.getTextContent().trim())) {
                continue;
            }
            Path dir = root.resolve(module.getTextContent().trim());
            Element pom = pom(dir.resolve("pom.xml"));
            boolean pomOnly = "pom".equals(childOrNull(pom, "packaging"));
            Path classes = dir.resolve("target/classes");
            assertTrue(pomOnly || Files.isDirectory(classes), classes + " missing: build the reactor first");
            install(repo, child(pom, "artifactId"), version, dir.resolve("pom.xml"), pomOnly ? null : classes);
        }
    }

    private static void install(Path repo, String artifactId, String version, Path pom, Path classes) throws IOException {
        Path at = repo.resolve("io/membus").resolve(artifactId).resolve(version);
        Files.createDirectories(at);
        Files.copy(pom, at.resolve(artifactId + "-" + version + ".pom"));
        if (classes != null) {
            try (OutputStream out = Files.newOutputStream(at.resolve(artifactId + "-" + version + ".jar"));
                 JarOutputStream jar = new JarOutputStream(out);
                 Stream<Path> walk = Files.walk(classes)) {
                for (Path p : walk.sorted().toList()) {
                    if (Files.isRegularFile(p)) {
                        jar.putNextEntry(new JarEntry(classes.relativize(p).toString().replace('\\', '/')));
                        Files.copy(p, jar);
                        jar.closeEntry();
                    }
                }
            }
        }
    }

    private static Element pom(Path file) throws Exception {
        return DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(file.toFile()).getDocumentElement();
    }

    private static String child(Element parent, String tag) {
        String v = childOrNull(parent, tag);
        assertTrue(v != null, "<" + tag + "> missing");
        return v;
    }

    private static String childOrNull(Element parent, String tag) {
        Element e = element(parent, tag);
        return e == null ? null : e.getTextContent().trim();
    }

    private static Element element(Element parent, String tag) {
        for (Node n = parent.getFirstChild(); n != null; n = n.getNextSibling()) {
            if (n instanceof Element e && e.getTagName().equals(tag)) {
                return e;
            }
        }
        return null;
    }

    private static String mvn() {
        String home = System.getProperty("maven.home");
        if (home != null && !home.isBlank() && Files.isExecutable(Path.of(home, "bin", "mvn"))) {
            return Path.of(home, "bin", "mvn").toString();
        }
        return "mvn";
    }

    private static String finish(Process p, long seconds, Path log, String what) throws Exception {
        boolean done = p.waitFor(seconds, TimeUnit.SECONDS);
        if (!done) {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
        String out = Files.readString(log, StandardCharsets.UTF_8);
        assertTrue(done, what + " did not end within " + seconds + " s:\n" + out);
        assertEquals(0, p.exitValue(), what + " failed:\n" + out);
        return out;
    }

    private static void awaitLine(Path log, String text, long seconds, Process p) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            if (Files.exists(log) && Files.readString(log, StandardCharsets.UTF_8).contains(text)) {
                return;
            }
            assertTrue(p.isAlive(), "the node exited:\n" + Files.readString(log, StandardCharsets.UTF_8));
            Thread.sleep(200);
        }
        throw new AssertionError("\"" + text + "\" not seen within " + seconds + " s in " + log + ":\n"
            + Files.readString(log, StandardCharsets.UTF_8));
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
