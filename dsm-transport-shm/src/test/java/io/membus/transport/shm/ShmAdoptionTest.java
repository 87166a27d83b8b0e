package io.membus.transport.shm;

import io.membus.core.Access;
import io.membus.core.PrivateFiles;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.TransportUnavailableException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.replication.GroupId;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.test.Seeds;
import io.membus.core.transport.BlockingVerbs;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * shm adoption in one JVM (docs/replication.md §8): the dead node is what a crashed
 * process leaves behind, made by hand — its segment files (ready, with data) and its
 * registry naming a process that has exited, or a live process that is not it, or one
 * that cannot be killed. The kill of a real owner (kill -9, SIGSTOP) is in
 * {@link ShmAdoptionProcessTest}.
 */
class ShmAdoptionTest {
    private static final long SIZE = 64 * 1024;
    private static final long DEAD_INCARNATION = 77;

    private Path dir;
    private final List<Transport> nodes = new ArrayList<>();
    private final List<Process> processes = new ArrayList<>();

    @BeforeEach
    void dir() throws IOException {
        Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
        dir = root.resolve("membus-adopt-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        Files.createDirectories(dir);
    }

    @AfterEach
    void cleanUp() throws IOException, InterruptedException {
        nodes.forEach(Transport::close);
        for (Process p : processes) {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
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

    private static PeerInfo peer(Transport t) {
        return new PeerInfo(t.nodeId(), t.incarnation(), t.localAddress());
    }

    private PeerInfo dead(int id) {
        return new PeerInfo(id, DEAD_INCARNATION, dir.toString());
    }

    private static long deadline() {
        return System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    }

    /** A sleeping child process (destroyed by the clean-up). */
    private Process sleeper() throws IOException {
        Process p = new ProcessBuilder("sleep", "600").start();
        processes.add(p);
        return p;
    }

    /** The pid and start instant of a process that has exited (and was reaped). */
    private static Object[] exitedProcess() throws IOException, InterruptedException {
        Process p = new ProcessBuilder("sleep", "600").start();
        Instant start = p.toHandle().info().startInstant().orElseThrow();
        p.destroyForcibly();
        assertTrue(p.waitFor(10, TimeUnit.SECONDS));
        return new Object[] {p.pid(), start};
    }

    /**
     * What a crashed node leaves: segment files {@code node-<id>-seg-<s>.seg} holding
     * {@code data.get(s)} at offset 0, ready, and its registry naming {@code pid}/{@code start}.
     */
    private void leaveBehind(int id, long pid, Instant start, Map<Integer, byte[]> data, Map<Integer, String> hosted) {
        Map<Integer, String> files = new TreeMap<>();
        data.forEach((s, bytes) -> {
            String name = "node-" + id + "-seg-" + s + ".seg";
            Segment seg = Segment.createOrOpenFile(dir.resolve(name), id, DEAD_INCARNATION, s, SIZE, Access.ALL, true,
                    PrivateFiles.ownerOnly());
            seg.write(0, bytes, 0, bytes.length);
            seg.close(true); // a crash leaves the header ready
            files.put(s, name);
        });
        new ShmRegistry(id, DEAD_INCARNATION, pid, start, files, null, 0, 0, hosted).write(dir, PrivateFiles.ownerOnly());
    }

    private static byte[] random(SplittableRandom r, int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) r.nextInt(256);
        }
        return b;
    }

    @Test
    void registryKeepsPidStartAndHostedEntriesAndReadsOldOnes() throws IOException {
        Instant start = Instant.parse("2026-11-26T20:01:02.345Z");
        new ShmRegistry(5, 9, 4242, start, Map.of(0, "a.seg"), "node-5.inbox", 8, 1024,
                Map.of(GroupId.of(3, 1), "node-5-hosted-3-1.seg")).write(dir, PrivateFiles.ownerOnly());
        ShmRegistry r = ShmRegistry.readAny(dir, 5);
        assertEquals(start, r.pidStart());
        assertEquals(Map.of(GroupId.of(3, 1), "node-5-hosted-3-1.seg"), r.hosted());
        assertEquals(Map.of(0, "a.seg"), r.segments());
        String text = Files.readString(ShmRegistry.fileOf(dir, 5));
        assertTrue(text.contains("hosted.3.1=node-5-hosted-3-1.seg"), text);

        // a registry of the version before: no pid.start, no hosted entries
        Files.writeString(ShmRegistry.fileOf(dir, 6), "node=6\nincarnation=1\npid=" + ProcessHandle.current().pid()
                + "\nsegment.0=node-6-seg-0.seg\n");
        ShmRegistry old = ShmRegistry.read(dir, 6);
        assertEquals(null, old.pidStart());
        assertTrue(old.hosted().isEmpty());
        assertTrue(old.processAlive());
    }

    @Test
    void aReusedPidIsNotTheNodeAlive() throws IOException {
        Process other = sleeper();
        Instant notIt = other.toHandle().info().startInstant().orElseThrow().minusSeconds(3600);
        ShmRegistry reg = new ShmRegistry(5, 1, other.pid(), notIt, Map.of(), null, 0, 0, Map.of());
        assertFalse(reg.processAlive(), "a live pid with another start instant is another process");
        ShmRegistry same = new ShmRegistry(5, 1, other.pid(), other.toHandle().info().startInstant().orElseThrow(),
                Map.of(), null, 0, 0, Map.of());
        assertTrue(same.processAlive());
    }

    @Test
    void twoSurvivorsRaceAndExactlyOneAdopts() throws Exception {
        Object[] gone = exitedProcess();
        SplittableRandom r = Seeds.random("membus.test.seed", "twoSurvivorsRaceAndExactlyOneAdopts");
        leaveBehind(2, (long) gone[0], (Instant) gone[1], Map.of(0, random(r, 4096), 1, random(r, 4096)), Map.of());
        ShmTransport a = node(1);
        ShmTransport b = node(3);
        assertEquals(ReplicationSupport.ADOPTION, a.capabilities().replication());

        CountDownLatch go = new CountDownLatch(1);
        List<CompletableFuture<Object>> results = new ArrayList<>();
        for (ShmTransport t : List.of(a, b)) {
            CompletableFuture<Object> f = new CompletableFuture<>();
            results.add(f);
            Thread th = new Thread(() -> {
                try {
                    go.await();
                    f.complete(t.adopt(dead(2), deadline()));
                } catch (Throwable e) {
                    f.complete(e);
                }
            }, "adopt-race-" + t.nodeId());
            th.start();
        }
        go.countDown();
        Object ra = results.get(0).get(30, TimeUnit.SECONDS);
        Object rb = results.get(1).get(30, TimeUnit.SECONDS);
        int adopted = 0;
        int winner = 0;
        for (Object res : List.of(ra, rb)) {
            if (res instanceof List<?> l) {
                adopted++;
                assertEquals(2, l.size(), "both segments of node 2: " + l);
            }
        }
        assertEquals(1, adopted, "exactly one survivor adopts: " + ra + " / " + rb);
        ShmTransport w = ra instanceof List ? a : b;
        Object loser = ra instanceof List ? rb : ra;
        NotPrimaryException np = assertInstanceOf(NotPrimaryException.class, loser);
        assertEquals(w.nodeId(), np.primaryHint(), "the loser is told who won");
        assertFalse(np.mayHaveRun());
        assertEquals(Optional.of(new ShmAdoption.Claim(w.nodeId(), w.incarnation())), a.adopter(dead(2)));
        assertEquals(a.adopter(dead(2)), b.adopter(dead(2)));
        // a late call of either gives the same answer
        ShmTransport l = w == a ? b : a;
        assertEquals(w.nodeId(), assertThrows(NotPrimaryException.class, () -> l.adopt(dead(2), deadline())).primaryHint());
        assertEquals(2, w.adopt(dead(2), deadline()).size());
        assertEquals(2, w.hostedSegments().size());
    }

    @Test
    void adoptedMemoryHasEveryByteAndIsReachedByTheLogicalPointer() throws Exception {
        Object[] gone = exitedProcess();
        SplittableRandom r = Seeds.random("membus.test.seed", "adoptedMemoryHasEveryByteAndIsReachedByTheLogicalPointer");
        byte[] d0 = random(r, (int) SIZE);
        byte[] d1 = random(r, 8192);
        leaveBehind(2, (long) gone[0], (Instant) gone[1], Map.of(0, d0, 1, d1), Map.of());
        Map<Integer, Long> keys = new TreeMap<>();
        for (int s : List.of(0, 1)) {
            keys.put(s, Segment.readHeader(dir.resolve("node-2-seg-" + s + ".seg")).remoteKey());
        }

        ShmTransport adopter = node(1);
        adopter.export(SegmentSpec.of(0, SIZE));
        List<SegmentDescriptor> adopted = adopter.adopt(dead(2), deadline());
        assertEquals(2, adopted.size());
        for (SegmentDescriptor d : adopted) {
            assertEquals(2, d.nodeId(), "the logical identity stays: " + d);
            assertEquals(DEAD_INCARNATION, d.incarnation());
            assertEquals(keys.get(d.index()), d.remoteKey(), "the remote key is the group's");
        }
        // the files are the adopter's now, and listed as hosted
        assertTrue(Files.exists(dir.resolve("node-1-hosted-2-0.seg")));
        assertFalse(Files.exists(dir.resolve("node-2-seg-0.seg")));
        assertEquals(Map.of(GroupId.of(2, 0), "node-1-hosted-2-0.seg", GroupId.of(2, 1), "node-1-hosted-2-1.seg"),
                ShmRegistry.read(dir, 1).hosted());
        // on the adopter itself
        byte[] local = new byte[d1.length];
        adopter.hosted(2).readInto(RemotePtr.pack(2, 1, 0), keys.get(1), local, 0, local.length);
        assertArrayEquals(d1, local);

        // a new initiator: a connection to the adopter, logical pointers of node 2
        ShmTransport initiator = node(4);
        Connection c = initiator.connect(peer(adopter)).get(10, TimeUnit.SECONDS);
        assertArrayEquals(d0, c.read(RemotePtr.pack(2, 0, 0), keys.get(0), (int) SIZE).get(10, TimeUnit.SECONDS),
                "every byte the dead node wrote");
        assertArrayEquals(d1, c.read(RemotePtr.pack(2, 1, 0), keys.get(1), d1.length).get(10, TimeUnit.SECONDS));
        long ptr = RemotePtr.pack(2, 0, 64);
        long before = c.fetchAndAdd(ptr, keys.get(0), 5).get(10, TimeUnit.SECONDS);
        assertEquals(before + 5, c.compareAndSwap(ptr, keys.get(0), before + 5, 99).get(10, TimeUnit.SECONDS));
        BlockingVerbs now = c.blockingNow();
        assertNotNull(now);
        assertEquals(99, now.readLong(ptr, keys.get(0)));
        // the adopter's own segment still works on the same connection, and wrong keys are refused typed
        c.write(RemotePtr.pack(1, 0, 0), adopter.table().get(0).remoteKey(), new byte[] {7}).get(10, TimeUnit.SECONDS);
        ExecutionException wrongKey = assertThrows(ExecutionException.class,
                () -> c.read(RemotePtr.pack(2, 0, 0), keys.get(0) ^ 1, 8).get(10, TimeUnit.SECONDS));
        assertInstanceOf(WrongRemoteKeyException.class, wrongKey.getCause());
        ExecutionException notServed = assertThrows(ExecutionException.class,
                () -> c.read(RemotePtr.pack(9, 0, 0), 1, 8).get(10, TimeUnit.SECONDS));
        assertInstanceOf(InvalidPointerException.class, notServed.getCause());
        // the adopted memory is the adopter's: what the initiator wrote is on the adopter's mapping
        assertEquals(99, adopter.hosted(2).readLong(ptr, keys.get(0)));
    }

    @Test
    void aConnectionOpenedBeforeTheAdoptionSeesTheAdoptedSegments() throws Exception {
        Object[] gone = exitedProcess();
        leaveBehind(2, (long) gone[0], (Instant) gone[1], Map.of(0, new byte[] {1, 2, 3, 4, 5, 6, 7, 8}), Map.of());
        long key = Segment.readHeader(dir.resolve("node-2-seg-0.seg")).remoteKey();
        ShmTransport adopter = node(1);
        ShmTransport initiator = node(4);
        Connection c = initiator.connect(peer(adopter)).get(10, TimeUnit.SECONDS);
        adopter.adopt(dead(2), deadline());
        assertArrayEquals(new byte[] {1, 2, 3, 4, 5, 6, 7, 8},
                c.read(RemotePtr.pack(2, 0, 0), key, 8).get(10, TimeUnit.SECONDS));
    }

    @Test
    void aReusedPidIsNeverKilled() throws Exception {
        Process other = sleeper();
        Instant itsStart = other.toHandle().info().startInstant().orElseThrow();
        leaveBehind(2, other.pid(), itsStart.minusSeconds(3600), Map.of(0, new byte[] {42}), Map.of());
        ShmTransport adopter = node(1);
        AtomicInteger kills = new AtomicInteger();
        adopter.processControl(h -> {
            kills.incrementAndGet();
            return ShmAdoption.KILL.destroyForcibly(h);
        });
        assertEquals(1, adopter.adopt(dead(2), deadline()).size());
        assertEquals(0, kills.get(), "a process with the pid but another start instant is not signalled");
        assertTrue(other.isAlive(), "the process that reuses the pid still runs");
    }

    @Test
    void aProcessThatCannotBeKilledIsNotAdoptedUntilItExits() throws Exception {
        Process owner = sleeper();
        Instant start = owner.toHandle().info().startInstant().orElseThrow();
        leaveBehind(2, owner.pid(), start, Map.of(0, new byte[] {42}, 3, new byte[] {43}), Map.of());
        ShmTransport adopter = node(1);
        adopter.processControl(h -> false); // as the kernel answers EPERM for another user's process
        PrintCapture log = new PrintCapture();
        NodeUnavailableException e;
        try {
            e = assertThrows(NodeUnavailableException.class, () -> adopter.adopt(dead(2), deadline()));
        } finally {
            log.close();
        }
        // the state letter is the process's at that moment (S while it sleeps; R for an instant as it starts)
        String line = "replication: cannot adopt segment 2/0, 2/3: node 2's process " + owner.pid() + " (state ";
        assertTrue(e.getMessage().contains(line), e.getMessage());
        assertTrue(e.getMessage().contains("cannot be killed by this user; it will be adopted when it exits"),
                e.getMessage());
        assertFalse(e.mayHaveRun());
        assertTrue(log.text().contains(line), "the line is logged: " + log.text());
        assertTrue(adopter.hostedSegments().isEmpty(), "nothing adopted");
        assertTrue(Files.exists(dir.resolve("node-2-seg-0.seg")), "the files stay where they are");
        assertEquals(Optional.of(new ShmAdoption.Claim(1, adopter.incarnation())), adopter.adopter(dead(2)),
                "the claim stays: it is adopted here once it can be");

        owner.destroyForcibly();
        assertTrue(owner.waitFor(10, TimeUnit.SECONDS));
        assertEquals(2, adopter.adopt(dead(2), deadline()).size(), "adopted once the process exited");
    }

    @Test
    void pidOneIsNeverSignalled() throws Exception {
        Instant initStart = ProcessHandle.of(1).flatMap(h -> h.info().startInstant()).orElse(null);
        org.junit.jupiter.api.Assumptions.assumeTrue(initStart != null, "pid 1's start instant is readable");
        leaveBehind(2, 1, initStart, Map.of(0, new byte[] {1}), Map.of());
        ShmTransport adopter = node(1);
        adopter.processControl(h -> {
            throw new AssertionError("asked to kill pid " + h.pid());
        });
        NodeUnavailableException e = assertThrows(NodeUnavailableException.class, () -> adopter.adopt(dead(2), deadline()));
        assertTrue(e.getMessage().contains("replication: cannot adopt segment 2/0: node 2's process 1 ("), e.getMessage());
        assertTrue(e.getMessage().contains("never signalled"), e.getMessage());
        assertTrue(adopter.hostedSegments().isEmpty());
    }

    @Test
    void anAdopterThatDiesIsAdoptedWithWhatItHadAdopted() throws Exception {
        // node 2 died long ago and node 5 adopted it; now node 5 died too: both sets of files are in 5's registry
        Object[] gone = exitedProcess();
        Segment own = Segment.createOrOpenFile(dir.resolve("node-5-seg-0.seg"), 5, DEAD_INCARNATION, 0, SIZE,
                Access.ALL, true, PrivateFiles.ownerOnly());
        own.writeLong(0, 555);
        long ownKey = own.remoteKey();
        own.close(true);
        Segment adopted = Segment.createOrOpenFile(dir.resolve("node-5-hosted-2-1.seg"), 2, 3, 1, SIZE,
                Access.ALL, true, PrivateFiles.ownerOnly());
        adopted.writeLong(8, 222);
        long adoptedKey = adopted.remoteKey();
        adopted.close(true);
        new ShmRegistry(5, DEAD_INCARNATION, (long) gone[0], (Instant) gone[1], Map.of(0, "node-5-seg-0.seg"), null, 0, 0,
                Map.of(GroupId.of(2, 1), "node-5-hosted-2-1.seg")).write(dir, PrivateFiles.ownerOnly());
        // 5's own claim on 2 is what routes 2 to whoever adopts 5
        assertEquals(new ShmAdoption.Claim(5, DEAD_INCARNATION), ShmAdoption.race(dir, PrivateFiles.ownerOnly(), 2, 3,
                new ShmAdoption.Claim(5, DEAD_INCARNATION)));

        ShmTransport next = node(1);
        List<SegmentDescriptor> got = next.adopt(dead(5), deadline());
        assertEquals(2, got.size(), "node 5's own segment and the one it had adopted: " + got);
        Connection c = node(4).connect(peer(next)).get(10, TimeUnit.SECONDS);
        assertEquals(555, c.blockingNow().readLong(RemotePtr.pack(5, 0, 0), ownKey));
        assertEquals(222, c.blockingNow().readLong(RemotePtr.pack(2, 1, 8), adoptedKey));
        assertEquals(Optional.of(new ShmAdoption.Claim(1, next.incarnation())),
                next.adopter(new PeerInfo(2, 3, dir.toString())), "node 2's adopter, followed through node 5");
    }

    @Test
    void anAdopterThatDiedBeforeServingWhatItWonLeavesItToItsOwnAdopter() throws Exception {
        // node 5 won node 2's race, renamed one of its files and died before listing them as hosted
        Object[] gone = exitedProcess();
        leaveBehind(2, (long) gone[0], (Instant) gone[1], Map.of(0, new byte[] {20}, 1, new byte[] {21}), Map.of());
        leaveBehind(5, (long) gone[0], (Instant) gone[1], Map.of(0, new byte[] {50}), Map.of());
        ShmAdoption.race(dir, PrivateFiles.ownerOnly(), 2, DEAD_INCARNATION, new ShmAdoption.Claim(5, DEAD_INCARNATION));
        Files.move(dir.resolve("node-2-seg-1.seg"), dir.resolve("node-5-hosted-2-1.seg"));

        ShmTransport next = node(1);
        List<SegmentDescriptor> got = next.adopt(dead(5), deadline());
        assertEquals(3, got.size(), "node 5's own segment and both of node 2's: " + got);
        assertEquals(20, next.hosted(2).get(0).readLong(0) & 0xFF);
        assertEquals(21, next.hosted(2).get(1).readLong(0) & 0xFF);
        assertEquals(50, next.hosted(5).get(0).readLong(0) & 0xFF);
        assertEquals(Optional.of(new ShmAdoption.Claim(1, next.incarnation())), next.adopter(dead(2)));
        assertEquals(2, next.adopt(dead(2), deadline()).size(), "asked for node 2 itself: what came from it");
    }

    @Test
    void badRequestsAreRefusedTyped() {
        ShmTransport t = node(1);
        assertThrows(DsmConfigException.class, () -> t.adopt(peer(t), deadline()));
        assertThrows(DsmConfigException.class, () -> t.adopt(new PeerInfo(2, 1, "/elsewhere"), deadline()));
        assertTrue(t.adopt(dead(2), deadline()).isEmpty(), "a node that left no registry left nothing to adopt");
        Transport local = Transports.create("local", TransportConfig.builder(7).property("local.fabric", "adopt-test-" + System.nanoTime()).build());
        nodes.add(local);
        assertThrows(TransportUnavailableException.class,
                () -> ((io.membus.core.transport.AbstractTransport) local).adopt(dead(2), deadline()));
    }

    /** What is printed to System.err meanwhile (slf4j-simple logs there); restores it on close. */
    static final class PrintCapture implements AutoCloseable {
        private final java.io.PrintStream old = System.err;
        private final java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();

        PrintCapture() {
            System.setErr(new java.io.PrintStream(out, true, java.nio.charset.StandardCharsets.UTF_8));
        }

        String text() {
            return out.toString(java.nio.charset.StandardCharsets.UTF_8);
        }

        @Override
        public void close() {
            System.setErr(old);
            old.print(text());
        }
    }
}
