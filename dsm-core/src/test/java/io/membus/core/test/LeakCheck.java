package io.membus.core.test;

import io.membus.core.OpenResources;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * The leak check: fails a test class that leaves behind a {@code membus-*} thread, an
 * open {@link io.membus.core.Segment} or an open transport connection, naming each
 * (a thread with the top frames of its stack, a segment by its descriptor, a
 * connection by its peer).
 *
 * <p>Every module's tests load it: dsm-core's test jar lists it in
 * {@code META-INF/services/org.junit.jupiter.api.extension.Extension}, and the root pom
 * turns on JUnit's extension autodetection for surefire and failsafe. It checks after
 * each test <em>class</em> (after its {@code @AfterAll} methods), against what existed
 * before the class began: nodes and clusters built in {@code @BeforeAll} are legitimately
 * open between a class's tests, and a thread's grace period paid after every test
 * would cost seconds per class. What is left behind is waited for up to
 * {@value #DEFAULT_GRACE_MILLIS} ms (threads finishing a close), then reported.
 *
 * <p>Not counted: the JVM-wide threads that live as long as the JVM by design
 * ({@link #JVM_WIDE}); what a class found open when it began (a leak of an earlier
 * class is reported once, by that class); child JVMs of multi-process tests (only
 * this JVM is checked). {@code -Dmembus.leakCheck=false} turns it off for a run
 * (triage only: the build keeps it on).
 *
 * <p><b>Note:</b> thread-safe: JUnit may run classes concurrently; each class keeps
 * its baseline in its own extension store.
 */
public final class LeakCheck implements BeforeAllCallback, AfterAllCallback {
    /** Threads that serve the whole JVM and are never stopped: the timers, the map reclaimer, the destroyer. */
    static final Set<String> JVM_WIDE = Set.of("membus-timer", "membus-wheel", "membus-map-reclaim", "membus-destroy");
    static final long DEFAULT_GRACE_MILLIS = 5_000;
    private static final int FRAMES = 6;
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(LeakCheck.class);

    private record Baseline(Set<Thread> threads, long segmentId, long connectionId) {
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        if (!enabled()) {
            return;
        }
        Set<Thread> threads = Collections.newSetFromMap(new IdentityHashMap<>());
        threads.addAll(membusThreads().keySet());
        context.getStore(NS).put(Baseline.class, new Baseline(threads,
                OpenResources.SEGMENTS.lastId(), OpenResources.CONNECTIONS.lastId()));
    }

    @Override
    public void afterAll(ExtensionContext context) throws InterruptedException {
        Baseline base = context.getStore(NS).remove(Baseline.class, Baseline.class);
        if (base == null) {
            return; // turned off, or beforeAll did not run
        }
        long grace = Long.getLong("membus.leakCheck.graceMillis", DEFAULT_GRACE_MILLIS);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(grace);
        String report;
        while ((report = leaks(base)) != null && System.nanoTime() < deadline) {
            Thread.sleep(25);
        }
        if (report != null) {
            throw new AssertionError("Leak check: " + context.getDisplayName() + " left behind, "
                    + grace + " ms after its last test:\n" + report
                    + "Close what the test opened (try-with-resources, @AfterEach or @AfterAll); a membus thread"
                    + " still running after its owner's close() is a bug of that close(). Run this class alone:"
                    + " mvn -o -B -pl <its module> -am test -Dtest=" + context.getTestClass().map(Class::getSimpleName)
                    .orElse("<class>") + " -Dsurefire.failIfNoSpecifiedTests=false (docs/testing.md, \"The leak check\").");
        }
    }

    /** What this class left open beyond {@code base}, one line each; null when nothing. */
    private static String leaks(Baseline base) {
        StringBuilder out = new StringBuilder();
        List<String> threads = new ArrayList<>();
        for (Map.Entry<Thread, StackTraceElement[]> e : membusThreads().entrySet()) {
            Thread t = e.getKey();
            if (!base.threads.contains(t) && !JVM_WIDE.contains(t.getName())) {
                threads.add(describe(t, e.getValue()));
            }
        }
        if (!threads.isEmpty()) {
            out.append("  ").append(threads.size()).append(" membus thread(s):\n");
            threads.forEach(line -> out.append("    ").append(line).append('\n'));
        }
        appendOpen(out, "open segment(s)", OpenResources.SEGMENTS.snapshot(), base.segmentId);
        appendOpen(out, "open connection(s)", OpenResources.CONNECTIONS.snapshot(), base.connectionId);
        return out.length() == 0 ? null : out.toString();
    }

    private static void appendOpen(StringBuilder out, String what, Map<Long, String> open, long after) {
        List<String> mine = new ArrayList<>();
        open.forEach((id, description) -> {
            if (id > after) {
                mine.add(description);
            }
        });
        if (!mine.isEmpty()) {
            out.append("  ").append(mine.size()).append(' ').append(what).append(":\n");
            mine.forEach(line -> out.append("    ").append(line).append('\n'));
        }
    }

    private static String describe(Thread t, StackTraceElement[] stack) {
        StringBuilder s = new StringBuilder();
        s.append('"').append(t.getName()).append("\" (").append(t.getState()).append(t.isDaemon() ? ", daemon" : "")
                .append(')');
        // the top two frames (what it waits in), then the first frames of Membus or test code (who runs
        // it): an idle pool thread's next frames are the JDK's executor, which name nobody
        List<StackTraceElement> shown = new ArrayList<>();
        List<StackTraceElement> jdk = new ArrayList<>();
        for (int i = 0; i < stack.length && shown.size() < FRAMES; i++) {
            if (i < 2 || !isJdk(stack[i])) {
                shown.add(stack[i]);
            } else {
                jdk.add(stack[i]);
            }
        }
        if (shown.size() <= 2) { // nothing but the JDK below the top: show a little more of it, in order
            for (int i = 0; i < jdk.size() && shown.size() < 4; i++) {
                shown.add(jdk.get(i));
            }
        }
        for (int i = 0; i < shown.size(); i++) {
            s.append(i == 0 ? " at " : " <- ").append(shown.get(i));
        }
        return s.toString();
    }

    private static boolean isJdk(StackTraceElement frame) {
        String c = frame.getClassName();
        return c.startsWith("java.") || c.startsWith("jdk.") || c.startsWith("sun.");
    }

    private static Map<Thread, StackTraceElement[]> membusThreads() {
        Map<Thread, StackTraceElement[]> all = Thread.getAllStackTraces();
        all.keySet().removeIf(t -> !t.isAlive() || !t.getName().startsWith("membus-"));
        return all;
    }

    private static boolean enabled() {
        return !"false".equalsIgnoreCase(System.getProperty("membus.leakCheck"));
    }
}
