package io.membus.transport.shm;

import io.membus.core.Access;
import io.membus.core.PrivateFiles;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.replication.AdoptionReplicator;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupClaim;
import io.membus.core.replication.GroupId;
import io.membus.core.replication.ReplicationConfig;
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
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link AdoptionReplicator} over shm in one JVM, on a {@link StaticDirectory}: the dead
 * node is what a crashed process leaves (its segment files and its registry, made by hand
 * as in {@link ShmAdoptionTest}). The cluster's own run (child JVMs, kill -9, SIGSTOP) is
 * {@code ShmAdoptionClusterTest} in the facade.
 */
class AdoptionReplicatorTest {
    private static final long SIZE = 64 * 1024;
    private static final long DEAD_INCARNATION = 77;
    private static final Duration TIMEOUT = Duration.ofSeconds(5);

    private Path dir;
    private final StaticDirectory directory = new StaticDirectory();
    private final List<Transport> nodes = new ArrayList<>();
    private final List<AdoptionReplicator> services = new ArrayList<>();

    @BeforeEach
    void dir() throws IOException {
        Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
        dir = root.resolve("membus-adopt-service-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        Files.createDirectories(dir);
    }

    @AfterEach
    void cleanUp() throws IOException {
        services.forEach(AdoptionReplicator::close);
        nodes.forEach(Transport::close);
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    /** A live node: its transport, one exported segment, its member entry, its adoption service. */
    private ShmTransport node(int id) {
        ShmTransport t = (ShmTransport) Transports.create("shm", TransportConfig.builder(id)
                .property("shm.dir", dir.toString()).build());
        nodes.add(t);
        Segment own = t.export(new SegmentSpec(0, SIZE, Access.ALL, null));
        directory.addSegment(own.descriptor());
        directory.addMember(new PeerInfo(id, t.incarnation(), t.localAddress()));
        AdoptionReplicator a = new AdoptionReplicator(t, directory, directory, ReplicationConfig.DEFAULT, TIMEOUT);
        services.add(a);
        a.start();
        a.exported(own);
        return t;
    }

    /** What a crashed node 2 leaves (files holding {@code 8 * s + 1} at offset 0), its claims published as it did. */
    private void deadNodeTwo(long pid, Instant start) {
        Map<Integer, String> files = new java.util.TreeMap<>();
        List<GroupClaim> claims = new ArrayList<>();
        for (int s = 0; s < 2; s++) {
            String name = "node-2-seg-" + s + ".seg";
            Segment seg = Segment.createOrOpenFile(dir.resolve(name), 2, DEAD_INCARNATION, s, SIZE, Access.ALL, true,
                    PrivateFiles.ownerOnly());
            seg.writeLong(0, 8L * s + 1);
            directory.addSegment(seg.descriptor());
            claims.add(new GroupClaim(GroupId.of(2, s), Ballot.initial(2), GroupClaim.Role.PRIMARY, SIZE, Access.ALL,
                    seg.remoteKey(), new int[0], 0));
            seg.close(true); // a crash leaves the header ready
            files.put(s, name);
        }
        new ShmRegistry(2, DEAD_INCARNATION, pid, start, files, null, 0, 0, Map.of()).write(dir, PrivateFiles.ownerOnly());
        directory.addMember(new PeerInfo(2, DEAD_INCARNATION, dir.toString()));
        directory.publish(2, claims);
    }

    private static Object[] exitedProcess() throws IOException, InterruptedException {
        Process p = new ProcessBuilder("sleep", "600").start();
        Instant start = p.toHandle().info().startInstant().orElseThrow();
        p.destroyForcibly();
        assertTrue(p.waitFor(10, TimeUnit.SECONDS));
        return new Object[] {p.pid(), start};
    }

    /** Membership downs node 2: every survivor fences it, then the directory removes it. */
    private void down(int node) {
        nodes.forEach(t -> t.fence(node, "downed by the test"));
        directory.removeMember(node, "downed by the test");
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out waiting for: " + what);
            }
            Thread.sleep(10);
        }
    }

    private boolean servedBySurvivor() {
        for (int s = 0; s < 2; s++) {
            ReplicaGroupView v = directory.group(2, s).orElse(null);
            if (v == null || v.state() != ReplicaGroupView.State.SERVING || v.primary() == 2) {
                return false;
            }
        }
        return true;
    }

    @Test
    void exportedSegmentsAreClaimedAtTheInitialBallotWithNoCopies() throws Exception {
        node(1);
        await("node 1's claim published (on the service's thread)", () -> !directory.claims(1).isEmpty());
        List<GroupClaim> claims = directory.claims(1);
        assertEquals(1, claims.size());
        GroupClaim c = claims.get(0);
        assertEquals(GroupId.of(1, 0), c.group());
        assertEquals(Ballot.initial(1), c.epoch());
        assertEquals(GroupClaim.Role.PRIMARY, c.role());
        assertEquals(0, c.inSync().length);
        ReplicaGroupView v = directory.group(1, 0).orElseThrow();
        assertEquals(ReplicaGroupView.State.SERVING, v.state());
        assertEquals(1, v.primary());
        assertEquals(AdoptionReplicator.NOTE, services.get(0).status().get(0).state());
    }

    @Test
    void oneSurvivorAdoptsADownedNodeAndVerbsReachItsMemoryThroughRouting() throws Exception {
        Object[] gone = exitedProcess();
        ShmTransport one = node(1);
        ShmTransport three = node(3);
        deadNodeTwo((long) gone[0], (Instant) gone[1]);
        down(2);
        await("node 2's segments served by a survivor", this::servedBySurvivor);
        int adopter = directory.group(2, 0).orElseThrow().primary();
        assertTrue(adopter == 1 || adopter == 3, "adopter " + adopter);
        AdoptionReplicator winner = services.get(adopter == 1 ? 0 : 1);
        AdoptionReplicator loser = services.get(adopter == 1 ? 1 : 0);
        assertTrue(winner.adopted(GroupId.of(2, 0)) && winner.adopted(GroupId.of(2, 1)));
        assertFalse(loser.adopted(GroupId.of(2, 0)), "the loser claims nothing");
        assertEquals(1, directory.claims(adopter == 1 ? 3 : 1).size(), "the loser's claims are its own segment's");
        assertEquals(Ballot.next(Ballot.initial(2), adopter), directory.group(2, 1).orElseThrow().epoch());

        // the adopter's own verbs (its table's hosted map) and the other's (its connection), routed by the directory
        ShmTransport adopterT = adopter == 1 ? one : three;
        ShmTransport otherT = adopter == 1 ? three : one;
        RemoteMemory local = new RemoteMemory(adopterT, directory, TIMEOUT);
        RemoteMemory remote = new RemoteMemory(otherT, directory, TIMEOUT);
        long p0 = RemotePtr.pack(2, 0, 0);
        long p1 = RemotePtr.pack(2, 1, 0);
        assertTrue(local.runsDirect(p0), "the adopter runs verbs on adopted memory on its own table");
        assertEquals(1, local.readLong(p0));
        assertEquals(9, remote.readLong(p1));
        assertEquals(1, local.fetchAndAdd(p0, 10));
        assertEquals(11, remote.fetchAndAdd(p0, 100));
        assertEquals(111, local.readLong(p0));
        assertEquals(9, remote.compareAndSwap(p1, 9, 42));
        assertEquals(42, local.readLong(p1));
    }

    @Test
    void aMemberThatLeftGracefullyIsNotAdopted() throws Exception {
        Object[] gone = exitedProcess();
        node(1);
        deadNodeTwo((long) gone[0], (Instant) gone[1]);
        directory.removeMember(2, "left the cluster"); // not fenced: a graceful leave
        Thread.sleep(300); // nothing may happen: give the service's thread its chance to do something wrong
        assertFalse(services.get(0).adopted(GroupId.of(2, 0)));
        assertFalse(Files.exists(ShmAdoption.claimFile(dir, 2, DEAD_INCARNATION)), "no adoption race was run");
    }

    @Test
    void aBlockedAdoptionIsRetriedUntilTheProcessCanBeKilled() throws Exception {
        ShmTransport one = node(1);
        // node 2's registry names this process (which its adopter never kills): blocked
        deadNodeTwo(ProcessHandle.current().pid(), ProcessHandle.current().info().startInstant().orElseThrow());
        down(2);
        await("the adoption is blocked", () -> services.get(0).blocked().contains(2));
        assertFalse(services.get(0).adopted(GroupId.of(2, 0)));
        assertEquals(ReplicaGroupView.State.LOST, directory.group(2, 0).orElseThrow().state());
        // the process "exits": the registry now names one that did; a retry on the timer adopts
        Object[] gone = exitedProcess();
        ShmRegistry reg = ShmRegistry.readAny(dir, 2);
        new ShmRegistry(2, DEAD_INCARNATION, (long) gone[0], (Instant) gone[1], reg.segments(), null, 0, 0, Map.of())
                .write(dir, PrivateFiles.ownerOnly());
        await("node 2's segments served by node 1 after a retry", this::servedBySurvivor);
        assertEquals(1, directory.group(2, 0).orElseThrow().primary());
        assertTrue(services.get(0).blocked().isEmpty());
        assertEquals(9, new RemoteMemory(one, directory, TIMEOUT).readLong(RemotePtr.pack(2, 1, 0)));
    }
}
