package io.membus.transport.shm;

import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.test.Seeds;
import io.membus.core.test.TestJvm;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * shm adoption of real processes (docs/replication.md §8): a child JVM that owns segments
 * is killed with SIGKILL, or stopped with SIGSTOP while it writes, and a survivor adopts
 * its files; an adopter that dies in turn is adopted with what it had adopted. Every
 * child is bounded in time and destroyed by {@link TestJvm}; the shared directory is
 * removed after each test.
 */
@Tag("slow")
class ShmAdoptionProcessTest {
    private static final Pattern READY = Pattern.compile("READY incarnation=(\\d+)");

    private Path dir;
    private TestJvm jvms;
    private final List<ShmTransport> nodes = new ArrayList<>();

    @BeforeEach
    void setUp() throws IOException {
        Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
        dir = root.resolve("membus-adopt-proc-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        Files.createDirectories(dir);
        jvms = new TestJvm();
    }

    @AfterEach
    void tearDown() throws IOException {
        nodes.forEach(ShmTransport::close);
        jvms.close();
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    private ShmTransport node(int id) {
        ShmTransport t = (ShmTransport) Transports.create("shm", TransportConfig.builder(id)
                .property("shm.dir", dir.toString()).build());
        nodes.add(t);
        return t;
    }

    /** Starts a child node and waits for its READY line; returns its incarnation. */
    private long child(long seed, int node, String... args) throws Exception {
        List<String> a = new ArrayList<>(List.of(dir.toString(), Integer.toString(node), Long.toString(seed)));
        a.addAll(List.of(args));
        jvms.start(ShmNodeProcess.class, a);
        return Long.parseLong(awaitOutput(jvms.size() - 1, READY).group(1));
    }

    private Matcher awaitOutput(int child, Pattern p) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while (System.nanoTime() - deadline < 0) {
            Matcher m = p.matcher(jvms.output(child));
            if (m.find()) {
                return m;
            }
            Thread.sleep(50);
        }
        throw new AssertionError("child " + child + " did not print " + p + " within 90 s; output:\n" + jvms.output(child));
    }

    private static long deadline() {
        return System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    }

    private static void kill9(long pid) throws Exception {
        ProcessHandle h = ProcessHandle.of(pid).orElseThrow();
        assertTrue(h.destroyForcibly());
        h.onExit().get(30, TimeUnit.SECONDS);
    }

    /** Reads both segments of {@code node} by their logical pointers through a new connection to {@code adopter}. */
    private void assertPattern(ShmTransport initiator, ShmTransport adopter, long seed, int node, int segments)
            throws Exception {
        Connection c = initiator.connect(new PeerInfo(adopter.nodeId(), adopter.incarnation(), dir.toString()))
                .get(10, TimeUnit.SECONDS);
        for (int s = 0; s < segments; s++) {
            long key = adopter.hosted(node).get(s).remoteKey();
            int length = s == 0 ? (int) ShmNodeProcess.SIZE : 4096;
            assertArrayEquals(ShmNodeProcess.pattern(seed, node, s, length),
                    c.read(RemotePtr.pack(node, s, 0), key, length).get(10, TimeUnit.SECONDS),
                    "every byte node " + node + " wrote in segment " + s);
        }
    }

    @Test
    void killNineOfTheOwnerThenAdopt() throws Exception {
        long seed = Seeds.seed("membus.test.seed", "killNineOfTheOwnerThenAdopt");
        long inc = child(seed, 2, "own");
        long pid = ShmRegistry.read(dir, 2).pid();
        kill9(pid);

        ShmTransport adopter = node(1);
        List<SegmentDescriptor> got = adopter.adopt(new PeerInfo(2, inc, dir.toString()), deadline());
        assertEquals(2, got.size(), "" + got);
        assertPattern(node(4), adopter, seed, 2, 2);
    }

    @Test
    void aStoppedOwnerIsKilledBeforeItsFilesAreAdoptedAndNeverWritesAgain() throws Exception {
        long seed = Seeds.seed("membus.test.seed", "aStoppedOwnerIsKilledBeforeItsFilesAreAdoptedAndNeverWritesAgain");
        long inc = child(seed, 2, "own", "write");
        long pid = ShmRegistry.read(dir, 2).pid();
        Path counterFile = dir.resolve("node-2-seg-1.seg");
        try (Segment peek = Segment.mapPeer(2, counterFile)) {
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (peek.readLong(ShmNodeProcess.COUNTER) == 0 && System.nanoTime() - until < 0) {
                Thread.sleep(10);
            }
            assertTrue(peek.readLong(ShmNodeProcess.COUNTER) > 0, "the owner writes");
        }
        assertEquals(0, new ProcessBuilder("kill", "-STOP", Long.toString(pid)).start().waitFor());
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!"T".equals(ShmAdoption.state(pid)) && System.nanoTime() - until < 0) {
            Thread.sleep(10);
        }
        assertEquals("T", ShmAdoption.state(pid), "the owner is stopped, not dead");

        ShmTransport adopter = node(1);
        List<SegmentDescriptor> got = adopter.adopt(new PeerInfo(2, inc, dir.toString()), deadline());
        assertEquals(2, got.size(), "" + got);
        assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "the adopter killed it first");
        assertEquals(128 + 9, jvms.await(0, 30), "ended by SIGKILL: it never runs user code again");
        // a SIGCONT now reaches no process, and the counter stays where the stop left it
        long counter = adopter.hosted(2).readLong(RemotePtr.pack(2, 1, ShmNodeProcess.COUNTER), got.stream()
                .filter(d -> d.index() == 1).findFirst().orElseThrow().remoteKey());
        new ProcessBuilder("kill", "-CONT", Long.toString(pid)).start().waitFor();
        Thread.sleep(300);
        long key1 = adopter.hosted(2).get(1).remoteKey();
        assertEquals(counter, adopter.hosted(2).readLong(RemotePtr.pack(2, 1, ShmNodeProcess.COUNTER), key1),
                "no write after the adoption");
        assertPattern(node(4), adopter, seed, 2, 1);
    }

    @Test
    void twoAdoptersRaceAndTheWinnerDiesInTurn() throws Exception {
        long seed = Seeds.seed("membus.test.seed", "twoAdoptersRaceAndTheWinnerDiesInTurn");
        long inc2 = child(seed, 2, "own");
        kill9(ShmRegistry.read(dir, 2).pid());
        long inc5 = child(seed, 5, "adopt", "2", Long.toString(inc2));
        long inc6 = child(seed, 6, "adopt", "2", Long.toString(inc2));
        Pattern outcome = Pattern.compile("(ADOPTED \\d+|LOST winner=\\d+)");
        String o5 = awaitOutput(1, outcome).group(1);
        String o6 = awaitOutput(2, outcome).group(1);
        assertTrue(o5.equals("ADOPTED 2") ^ o6.equals("ADOPTED 2"), "exactly one adopts: " + o5 + " / " + o6);
        int winner = o5.equals("ADOPTED 2") ? 5 : 6;
        assertEquals("LOST winner=" + winner, winner == 5 ? o6 : o5, "the other is told who won");
        long winnerInc = winner == 5 ? inc5 : inc6;
        assertEquals(java.util.Map.of(io.membus.core.replication.GroupId.of(2, 0), "node-" + winner + "-hosted-2-0.seg",
                        io.membus.core.replication.GroupId.of(2, 1), "node-" + winner + "-hosted-2-1.seg"),
                ShmRegistry.read(dir, winner).hosted());

        // a connection to the winner reaches node 2's memory, and its liveness is the winner's
        ShmTransport initiator = node(4);
        Connection toWinner = initiator.connect(new PeerInfo(winner, winnerInc, dir.toString())).get(10, TimeUnit.SECONDS);
        long key20 = Segment.readHeader(dir.resolve("node-" + winner + "-hosted-2-0.seg")).remoteKey();
        assertArrayEquals(ShmNodeProcess.pattern(seed, 2, 0, 4096),
                toWinner.read(RemotePtr.pack(2, 0, 0), key20, 4096).get(10, TimeUnit.SECONDS));

        kill9(ShmRegistry.readAny(dir, winner).pid());
        Throwable failure = null;
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (failure == null && System.nanoTime() - until < 0) {
            try {
                toWinner.read(RemotePtr.pack(2, 0, 0), key20, 8).get(10, TimeUnit.SECONDS);
                Thread.sleep(10);
            } catch (java.util.concurrent.ExecutionException e) {
                failure = e.getCause();
            }
        }
        assertInstanceOf(NodeUnavailableException.class, failure,
                "node 2's memory through a dead adopter fails as the adopter's death");
        assertEquals(winner, ((NodeUnavailableException) failure).nodeId());

        ShmTransport next = node(1);
        List<SegmentDescriptor> got = next.adopt(new PeerInfo(winner, winnerInc, dir.toString()), deadline());
        assertEquals(3, got.size(), "the winner's own segment and node 2's two: " + got);
        assertPattern(initiator, next, seed, 2, 2);
        assertPattern(initiator, next, seed, winner, 1);
        assertEquals(Optional.of(new ShmAdoption.Claim(1, next.incarnation())),
                next.adopter(new PeerInfo(2, inc2, dir.toString())), "node 2 routes to node 1 now");
    }
}
