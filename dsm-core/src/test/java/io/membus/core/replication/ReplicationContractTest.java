package io.membus.core.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.Words;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.SegmentLostException;
import io.membus.core.test.Seeds;
import io.membus.core.transport.Connection;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The replication contract (docs/replication.md, "As built"): what every transport that
 * replicates by forwarding ({@link ReplicationSupport#FORWARDING}) must do, run by a
 * subclass per transport over nodes in this JVM on one {@link StaticDirectory} (which is
 * also every node's {@link ClaimPublisher}). Verbs go to the group's primary explicitly
 * (its connection or its table): routing is {@code RemoteMemory}'s.
 *
 * <p>"Removing" a node here is what membership does after downing it: its
 * {@link Replicator} and transport are closed (a crash) and it leaves the directory.
 * Randomized tests print their seed ({@code -Dmembus.test.seed=...} replays one).
 * Quiescence is awaited under deadlines; no assertion is on time.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
public abstract class ReplicationContractTest {
    protected static final Duration OP_TIMEOUT = Duration.ofSeconds(20);
    protected static final long SIZE = 256 * 1024;
    private static final long SETTLE_NANOS = TimeUnit.SECONDS.toNanos(90);

    protected String testId;
    protected StaticDirectory directory;
    private final Map<Integer, Node> nodes = new LinkedHashMap<>();
    private ExecutorService pool;

    /** The transport's name, as {@link Transports#create} takes it. */
    protected abstract String transportName();

    /** Transport properties of node {@code nodeId} in this test ({@link #testId} is unique per test). */
    protected abstract Map<String, String> nodeProperties(int nodeId);

    /** One node of a test: its transport, memory, replication and its exported segment 0. */
    protected static final class Node {
        final int id;
        final Transport transport;
        final RemoteMemory memory;
        final Replicator replicator;
        final Segment segment;
        boolean alive = true;

        Node(int id, Transport transport, RemoteMemory memory, Replicator replicator, Segment segment) {
            this.id = id;
            this.transport = transport;
            this.memory = memory;
            this.replicator = replicator;
            this.segment = segment;
        }

        long ptr(long offset) {
            return segment.pointer(offset);
        }

        long key() {
            return segment.remoteKey();
        }

        int group() {
            return GroupId.of(id, 0);
        }
    }

    @BeforeEach
    void setUp(TestInfo info) {
        testId = getClass().getSimpleName() + "-" + info.getTestMethod().map(m -> m.getName()).orElse("test") + "-"
                + ProcessHandle.current().pid() + "-" + System.nanoTime();
        directory = new StaticDirectory();
        pool = Executors.newFixedThreadPool(4);
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS), "test threads end");
        for (Node n : nodes.values()) {
            if (n.alive) {
                n.replicator.close();
                n.transport.close();
            }
        }
        nodes.clear();
    }

    /** Starts nodes 1..count, each a memory node exporting segment 0, all with {@code backups}. */
    protected List<Node> start(int count, int backups) {
        return start(count, ReplicationConfig.DEFAULT.withBackups(backups));
    }

    /** Starts nodes 1..count with {@code config}. */
    protected List<Node> start(int count, ReplicationConfig config) {
        List<Node> started = new ArrayList<>();
        for (int id = 1; id <= count; id++) {
            started.add(startNode(id, config));
        }
        return started;
    }

    /** Starts node {@code id}, a memory node exporting segment 0. */
    protected Node startNode(int id, ReplicationConfig config) {
        TransportConfig tc = TransportConfig.builder(id).operationTimeout(OP_TIMEOUT)
                .connectTimeout(Duration.ofSeconds(10)).properties(nodeProperties(id)).build();
        Transport t = Transports.create(transportName(), tc);
        directory.addMember(t.self());
        RemoteMemory mem = new RemoteMemory(t, directory, OP_TIMEOUT);
        Replicator r = new Replicator(t, mem, directory, directory, config);
        r.start();
        Segment s = t.export(SegmentSpec.of(0, SIZE));
        directory.addSegment(s.descriptor());
        r.exported(s);
        Node n = new Node(id, t, mem, r, s);
        nodes.put(id, n);
        return n;
    }

    protected Node node(int id) {
        return nodes.get(id);
    }

    /** A crash followed by the downing: the node stops, then membership removes it. */
    protected void crash(Node... crashed) {
        for (Node n : crashed) {
            n.alive = false;
            n.replicator.close();
            n.transport.close();
        }
        for (Node n : crashed) {
            directory.removeMember(n.id, "crashed (test)");
        }
    }

    protected static void waitFor(String what, BooleanSupplier condition) {
        waitFor(what, condition, () -> "");
    }

    /** {@link #waitFor(String, BooleanSupplier)}, saying {@code state} when it fails. */
    protected static void waitFor(String what, BooleanSupplier condition, java.util.function.Supplier<String> state) {
        long deadline = System.nanoTime() + SETTLE_NANOS;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                fail("not reached within the test's deadline: " + what + " " + state.get());
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                fail("interrupted waiting for: " + what);
            }
        }
    }

    protected ReplicaGroupView view(int group) {
        return directory.group(GroupId.node(group), GroupId.index(group)).orElse(null);
    }

    /** The group is served with {@code copies} in-sync copies and every change is acknowledged by all. */
    protected boolean settled(int group, int copies) {
        ReplicaGroupView v = view(group);
        if (v == null || v.state() != ReplicaGroupView.State.SERVING || v.inSync().length != copies) {
            return false;
        }
        Node p = node(v.primary());
        ReplicaGroup g = p == null ? null : p.replicator.primary(group);
        if (g == null || g.watermark() != g.lastSeq() || g.joining().length != 0 || g.inSync().length != copies) {
            return false;
        }
        for (int c : v.inSync()) {
            CopyReplica copy = node(c).replicator.copy(group);
            if (copy == null || !copy.inSync() || copy.applied() != g.lastSeq()) {
                return false;
            }
            if (directory.claims(c).stream().noneMatch(k -> k.group() == group && k.role() == GroupClaim.Role.COPY)) {
                return false; // the directory must know it as a copy (what a promotion counts on)
            }
        }
        return true;
    }

    protected void awaitSettled(int group, int copies) {
        waitFor("segment " + GroupId.toString(group) + " served with " + copies + " in-sync copies, all acknowledged",
                () -> settled(group, copies));
    }

    protected Node primaryOf(int group) {
        ReplicaGroupView v = view(group);
        assertEquals(ReplicaGroupView.State.SERVING, v.state(), v::toString);
        return node(v.primary());
    }

    protected static byte[] bytes(Segment s) {
        byte[] b = new byte[(int) s.size()];
        s.read(0, b, 0, b.length);
        return b;
    }

    /** Every in-sync copy of {@code group} equals its primary byte for byte. */
    protected void assertCopiesEqual(int group) {
        ReplicaGroupView v = view(group);
        byte[] primary = bytes(node(v.primary()).replicator.primary(group).memory());
        for (int c : v.inSync()) {
            byte[] copy = bytes(node(c).replicator.copy(group).memory());
            if (!Arrays.equals(primary, copy)) {
                int at = Arrays.mismatch(primary, copy);
                fail("copy on node " + c + " of segment " + GroupId.toString(group) + " differs from its primary (node "
                        + v.primary() + ") first at offset " + at);
            }
        }
    }

    /**
     * Verbs on a node's own table that return once the group acknowledged what they changed
     * or saw: the table runs a verb and never waits; its caller waits on the gate (what
     * {@code RemoteMemory}'s own-segment path and a verb executor do).
     */
    protected static Acked table(Node n) {
        return new Acked(n.transport.table());
    }

    protected static final class Acked {
        private final SegmentTable t;

        Acked(SegmentTable t) {
            this.t = t;
        }

        void write(long ptr, long key, byte[] b, int off, int len) {
            t.write(ptr, key, b, off, len);
            acked(ptr);
        }

        void writeLong(long ptr, long key, long v) {
            t.writeLong(ptr, key, v);
            acked(ptr);
        }

        long readLong(long ptr, long key) {
            long v = t.readLong(ptr, key);
            acked(ptr);
            return v;
        }

        long compareAndSwap(long ptr, long key, long expected, long update) {
            long v = t.compareAndSwap(ptr, key, expected, update);
            acked(ptr);
            return v;
        }

        long fetchAndAdd(long ptr, long key, long delta) {
            long v = t.fetchAndAdd(ptr, key, delta);
            acked(ptr);
            return v;
        }

        private void acked(long ptr) {
            AckGate g = t.gate(ptr);
            if (g != null) {
                long need = g.need();
                if (!g.acked(need)) {
                    g.await(need, System.nanoTime() + OP_TIMEOUT.toNanos());
                }
            }
        }
    }

    protected Connection connect(Node from, Node to) {
        return RemoteMemory.await(from.transport.connect(to.transport.self()), Duration.ofSeconds(30));
    }

    protected static <T> T await(CompletableFuture<T> f) {
        return RemoteMemory.await(f, OP_TIMEOUT.plusSeconds(5));
    }

    // ------------------------------------------------------------------ the contract

    @Test
    void copiesEqualThePrimaryAfterEveryKindOfChange() throws Exception {
        List<Node> ns = start(3, 2);
        Node p = ns.get(0);
        awaitSettled(p.group(), 2);
        long seed = Seeds.seed("membus.test.seed", "copiesEqualThePrimaryAfterEveryKindOfChange");
        List<Future<?>> workers = new ArrayList<>();
        for (int w = 0; w < 3; w++) {
            Node from = ns.get(w);
            long workerSeed = seed + w;
            workers.add(pool.submit(() -> {
                SplittableRandom rnd = new SplittableRandom(workerSeed);
                Connection c = from == p ? null : connect(from, p);
                for (int i = 0; i < 300; i++) {
                    int op = rnd.nextInt(10);
                    if (op < 4) {
                        int len = rnd.nextInt(10) == 0 ? 70_000 + rnd.nextInt(60_000) : rnd.nextInt(300);
                        long off = rnd.nextLong(SIZE - len);
                        byte[] b = new byte[len];
                        rnd.nextBytes(b);
                        if (c == null) {
                            table(p).write(p.ptr(off), p.key(), b, 0, len);
                        } else {
                            await(c.write(p.ptr(off), p.key(), b, 0, len));
                        }
                    } else {
                        long off = rnd.nextLong(SIZE / 8) * 8;
                        if (op < 7) {
                            long expected = rnd.nextBoolean() ? 0 : p.segment.readLong(off);
                            long update = rnd.nextLong();
                            if (c == null) {
                                table(p).compareAndSwap(p.ptr(off), p.key(), expected, update);
                            } else {
                                await(c.compareAndSwap(p.ptr(off), p.key(), expected, update));
                            }
                        } else if (op < 9) {
                            if (c == null) {
                                table(p).fetchAndAdd(p.ptr(off), p.key(), rnd.nextLong(1000));
                            } else {
                                await(c.fetchAndAdd(p.ptr(off), p.key(), rnd.nextLong(1000)));
                            }
                        } else {
                            if (c == null) {
                                table(p).writeLong(p.ptr(off), p.key(), rnd.nextLong());
                            } else {
                                byte[] word = new byte[8];
                                Words.putLong(word, 0, rnd.nextLong());
                                await(c.write(p.ptr(off), p.key(), word));
                            }
                        }
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : workers) {
            f.get(150, TimeUnit.SECONDS);
        }
        awaitSettled(p.group(), 2);
        assertCopiesEqual(p.group());
        ReplicaGroup g = p.replicator.primary(p.group());
        assertTrue(g.lastSeq() > 0, "changes were sequenced");
    }

    @Test
    void aChangeCompletesOnlyOnceEveryInSyncCopyHasIt() {
        List<Node> ns = start(3, 1);
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        int copyNode = view(p.group()).inSync()[0];
        Node other = ns.stream().filter(n -> n != p && n.id != copyNode).findFirst().orElseThrow();
        Connection c = connect(other, p);
        p.transport.faults().stream(copyNode).hold();
        byte[] b = {1, 2, 3, 4, 5, 6, 7, 8};
        CompletableFuture<Void> write = c.write(p.ptr(4096), p.key(), b);
        CompletableFuture<Long> faa = c.fetchAndAdd(p.ptr(8192), p.key(), 5);
        waitFor("the primary applied the change", () -> p.segment.readLong(8192) == 5);
        assertFalse(write.isDone(), "a write is not answered while its copy does not have it");
        assertFalse(faa.isDone(), "a fetch-and-add is not answered while its copy does not have it");
        byte[] onCopy = new byte[8];
        node(copyNode).replicator.copy(p.group()).memory().read(4096, onCopy, 0, 8);
        assertArrayEquals(new byte[8], onCopy, "the held copy does not have it");
        p.transport.faults().stream(copyNode).release();
        await(write);
        assertEquals(0L, await(faa));
        node(copyNode).replicator.copy(p.group()).memory().read(4096, onCopy, 0, 8);
        assertArrayEquals(b, onCopy, "once answered, the copy has it");
        assertEquals(5, node(copyNode).replicator.copy(p.group()).memory().readLong(8192));
    }

    @Test
    void aReadOfAChangedBlockWaitsForItsAcks() {
        List<Node> ns = start(3, 1);
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        int copyNode = view(p.group()).inSync()[0];
        Node other = ns.stream().filter(n -> n != p && n.id != copyNode).findFirst().orElseThrow();
        Connection c = connect(other, p);
        p.transport.faults().stream(copyNode).hold();
        byte[] b = new byte[64];
        Arrays.fill(b, (byte) 7);
        CompletableFuture<Void> write = c.write(p.ptr(1024), p.key(), b);
        CompletableFuture<byte[]> read = c.read(p.ptr(1024), p.key(), 64);
        assertFalse(write.isDone(), "the write waits for its copy");
        assertFalse(read.isDone(), "a read that may see an unacknowledged change is not answered");
        // a blocking caller on the primary's own table waits on the gate too (RemoteMemory's own-segment path);
        // on a transport whose verbs are asynchronous, the write must have reached the primary first
        ReplicaGroup g = p.replicator.primary(p.group());
        waitFor("the write applied at the primary, unacknowledged", () -> g.lastSeq() > g.watermark());
        java.util.concurrent.atomic.AtomicReference<Thread> reader = new java.util.concurrent.atomic.AtomicReference<>();
        CompletableFuture<Long> blocking = CompletableFuture.supplyAsync(() -> {
            reader.set(Thread.currentThread());
            return table(p).readLong(p.ptr(1024), p.key());
        }, pool);
        waitFor("the blocking read parked, waiting for the copy", () -> reader.get() != null
                && reader.get().getState() == Thread.State.TIMED_WAITING);
        assertFalse(blocking.isDone());
        p.transport.faults().stream(copyNode).release();
        await(write);
        assertArrayEquals(b, await(read), "the read answers the change once the copy has it");
        assertEquals(Words.getLong(b, 0), await(blocking));
        assertArrayEquals(b, c.read(p.ptr(1024), p.key(), 64).join(), "a read with nothing unacknowledged answers");
    }

    @Test
    void promotionAfterThePrimaryIsRemovedKeepsEveryAcknowledgedChange() throws Exception {
        List<Node> ns = start(3, 1);
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        int copyNode = view(p.group()).inSync()[0];
        Node writerNode = ns.stream().filter(n -> n != p && n.id != copyNode).findFirst().orElseThrow();
        int slots = 4;
        AtomicLongArray acked = new AtomicLongArray(slots);
        AtomicLongArray issued = new AtomicLongArray(slots);
        AtomicBoolean stop = new AtomicBoolean();
        List<Future<?>> writers = new ArrayList<>();
        Connection c = connect(writerNode, p);
        for (int s = 0; s < slots; s++) {
            int slot = s;
            writers.add(pool.submit(() -> {
                for (long v = 1; !stop.get(); v++) {
                    issued.set(slot, v);
                    try {
                        await(c.fetchAndAdd(p.ptr(slot * 8L), p.key(), 1));
                    } catch (DsmException e) {
                        return null; // the primary is gone: this change's outcome is unknown
                    }
                    acked.set(slot, v);
                }
                return null;
            }));
        }
        waitFor("some changes acknowledged", () -> acked.get(0) > 50 && acked.get(slots - 1) > 50);
        crash(p);
        stop.set(true);
        for (Future<?> f : writers) {
            f.get(60, TimeUnit.SECONDS);
        }
        waitFor("segment 1/0 promoted", () -> view(p.group()).state() == ReplicaGroupView.State.SERVING
                && view(p.group()).primary() == copyNode);
        Node np = node(copyNode);
        Segment promoted = np.replicator.primary(p.group()).memory();
        for (int s = 0; s < slots; s++) {
            long v = promoted.readLong(s * 8L);
            assertTrue(v >= acked.get(s) && v <= issued.get(s), "slot " + s + ": value " + v
                    + " holds every acknowledged change (" + acked.get(s) + ") and no more than issued (" + issued.get(s)
                    + ")");
        }
        // the new primary serves the logical pointers and re-replicates to the remaining node
        assertEquals(ReplicaGroupView.State.SERVING, view(p.group()).state());
        Connection toNew = connect(writerNode, np);
        long before = await(toNew.fetchAndAdd(p.ptr(0), p.key(), 1));
        assertEquals(promoted.readLong(0) - 1, before);
        awaitSettled(p.group(), 1);
        assertCopiesEqual(p.group());
    }

    @Test
    void cutTheStreamsAtRandomPointsThenPromote() throws Exception {
        List<Node> ns = start(4, 2);
        Node p = ns.get(0);
        awaitSettled(p.group(), 2);
        SplittableRandom rnd = Seeds.random("membus.test.seed", "cutTheStreamsAtRandomPointsThenPromote");
        int[] copiesBefore = view(p.group()).inSync();
        Node client = ns.stream().filter(n -> n != p && !Arrays.stream(copiesBefore).anyMatch(c -> c == n.id))
                .findFirst().orElseThrow();
        int slots = 3;
        AtomicLongArray acked = new AtomicLongArray(slots);
        AtomicLongArray issued = new AtomicLongArray(slots);
        List<Future<?>> writers = new ArrayList<>();
        Connection c = connect(client, p);
        for (int s = 0; s < slots; s++) {
            int slot = s;
            writers.add(pool.submit(() -> {
                for (long v = 1; ; v++) {
                    issued.set(slot, v);
                    try {
                        // a large write for slot 0 (split into parts), word changes for the others
                        if (slot == 0) {
                            byte[] b = new byte[100_000];
                            Arrays.fill(b, (byte) v);
                            Words.putLong(b, 0, v);
                            await(c.write(p.ptr(4096), p.key(), b));
                        } else {
                            await(c.fetchAndAdd(p.ptr(slot * 8L), p.key(), 1));
                        }
                    } catch (DsmException e) {
                        return null; // the primary is gone: this change ran or not (mayHaveRun says which may be)
                    }
                    acked.set(slot, v);
                }
            }));
        }
        waitFor("changes acknowledged", () -> acked.get(0) > 3 && acked.get(1) > 20 && acked.get(2) > 20);
        int k1 = rnd.nextInt(6);
        int k2 = rnd.nextInt(6);
        p.transport.faults().stream(copiesBefore[0]).cutAfter(k1);
        p.transport.faults().stream(copiesBefore[1]).cutAfter(k2);
        ReplicaGroup g = p.replicator.primary(p.group());
        waitFor("changes waiting for the cut copies", () -> g.lastSeq() > g.watermark());
        crash(p);
        for (Future<?> f : writers) {
            f.get(60, TimeUnit.SECONDS);
        }
        waitFor("segment 1/0 promoted", () -> view(p.group()).state() == ReplicaGroupView.State.SERVING);
        awaitSettled(p.group(), 2);
        assertCopiesEqual(p.group());
        Segment now = primaryOf(p.group()).replicator.primary(p.group()).memory();
        long big = now.readLong(4096);
        assertTrue(big >= acked.get(0) && big <= issued.get(0), "the large write: " + big + " within [" + acked.get(0)
                + ", " + issued.get(0) + "]");
        byte[] whole = new byte[100_000];
        now.read(4096, whole, 0, whole.length);
        for (int i = 8; i < whole.length; i++) {
            if (whole[i] != (byte) big) {
                fail("the large write is torn at byte " + i + " (cut after " + k1 + " and " + k2 + " messages)");
            }
        }
        for (int s = 1; s < slots; s++) {
            long v = now.readLong(s * 8L);
            assertTrue(v >= acked.get(s) && v <= issued.get(s), "slot " + s + ": " + v + " within [" + acked.get(s)
                    + ", " + issued.get(s) + "] (cut after " + k1 + " and " + k2 + " messages)");
        }
    }

    @Test
    void aCopyAheadOfTheCoordinatorIsDroppedAndRebuiltFromIt() {
        List<Node> ns = start(4, 2);
        Node p = ns.get(0);
        awaitSettled(p.group(), 2);
        int[] inSync = view(p.group()).inSync();
        int coordinator = inSync[0];
        int ahead = inSync[1];
        Node client = ns.stream().filter(n -> n != p && n.id != coordinator && n.id != ahead).findFirst().orElseThrow();
        Connection c = connect(client, p);
        assertEquals(0L, await(c.fetchAndAdd(p.ptr(0), p.key(), 10)), "an acknowledged change before the hold");
        p.transport.faults().stream(coordinator).hold();
        List<CompletableFuture<Long>> held = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            held.add(c.fetchAndAdd(p.ptr(0), p.key(), 1));
        }
        ReplicaGroup g = p.replicator.primary(p.group());
        waitFor("the copy that is not held has every change", () -> node(ahead).replicator.copy(p.group()).applied()
                == g.lastSeq() && g.lastSeq() >= 6);
        long coordinatorApplied = node(coordinator).replicator.copy(p.group()).applied();
        assertTrue(coordinatorApplied < g.lastSeq(), "the coordinator is behind");
        crash(p);
        for (CompletableFuture<Long> f : held) {
            DsmException e = assertThrows(DsmException.class, () -> await(f));
            assertTrue(e.mayHaveRun(), "a change that was not acknowledged: outcome unknown (" + e + ")");
        }
        waitFor("promoted at the coordinator", () -> view(p.group()).state() == ReplicaGroupView.State.SERVING
                && view(p.group()).primary() == coordinator);
        awaitSettled(p.group(), 2);
        Segment promoted = node(coordinator).replicator.primary(p.group()).memory();
        assertEquals(10, promoted.readLong(0), "the coordinator's state: the acknowledged change, none of the held ones");
        assertCopiesEqual(p.group()); // the copy that was ahead was dropped and rebuilt from the coordinator
    }

    @Test
    void verbsThroughRemoteMemoryFollowThePromotion() throws Exception {
        List<Node> ns = start(3, 1);
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        int copyNode = view(p.group()).inSync()[0];
        Node client = ns.stream().filter(n -> n != p && n.id != copyNode).findFirst().orElseThrow();
        long word = p.ptr(128);
        AtomicLongArray counts = new AtomicLongArray(2); // [0] acknowledged, [1] unknown outcome
        AtomicBoolean stop = new AtomicBoolean();
        Future<?> adder = pool.submit(() -> {
            while (!stop.get()) {
                try {
                    client.memory.fetchAndAdd(word, 1); // routed by the group's view: the primary, then the promoted copy
                    counts.incrementAndGet(0);
                } catch (DsmException e) {
                    if (e.mayHaveRun()) {
                        counts.incrementAndGet(1);
                    }
                }
            }
            return null;
        });
        waitFor("increments acknowledged", () -> counts.get(0) > 100);
        crash(p);
        waitFor("segment 1/0 promoted", () -> view(p.group()).state() == ReplicaGroupView.State.SERVING
                && view(p.group()).primary() == copyNode);
        long before = counts.get(0);
        waitFor("increments acknowledged by the new primary", () -> counts.get(0) > before + 100);
        stop.set(true);
        adder.get(60, TimeUnit.SECONDS);
        awaitSettled(p.group(), 1);
        long value = client.memory.readLong(word);
        assertTrue(value >= counts.get(0) && value <= counts.get(0) + counts.get(1), "the word (" + value
                + ") has every acknowledged increment (" + counts.get(0) + ") and at most the unknown ones ("
                + counts.get(1) + ")");
        assertCopiesEqual(p.group());
    }

    @Test
    void anOldPrimarysLateChangeIsRefusedAfterAPromotion() {
        List<Node> ns = start(3, 1);
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        int copyNode = view(p.group()).inSync()[0];
        // downed as membership sees it, but its process still runs (cut off)
        directory.removeMember(p.id, "cut off (test)");
        waitFor("segment 1/0 promoted", () -> view(p.group()).state() == ReplicaGroupView.State.SERVING
                && view(p.group()).primary() == copyNode);
        byte[] late = {9, 9, 9, 9, 9, 9, 9, 9};
        NodeUnavailableException refused = assertThrows(NodeUnavailableException.class,
                () -> table(p).write(p.ptr(512), p.key(), late, 0, 8));
        assertTrue(refused.mayHaveRun(), "a change sequenced before the refusal may be anywhere: outcome unknown");
        NotPrimaryException after = assertThrows(NotPrimaryException.class,
                () -> table(p).write(p.ptr(512), p.key(), late, 0, 8));
        assertFalse(after.mayHaveRun());
        assertEquals(copyNode, after.primaryHint(), "the refusal names the new primary");
        byte[] onNew = new byte[8];
        node(copyNode).replicator.primary(p.group()).memory().read(512, onNew, 0, 8);
        assertArrayEquals(new byte[8], onNew, "the late change never reached the new primary");
    }

    @Test
    void reReplicationUnderTrafficEndsWithAnEqualCopyThatCanBePromoted() throws Exception {
        reReplicateUnderTraffic(0, "reReplicationUnderTrafficEndsWithAnEqualCopyThatCanBePromoted");
    }

    /**
     * The same under {@code rereplication-rate}: 256 KiB/s with 4 KiB chunks lets 64 chunks a
     * second through, so the 64 chunks wait on the shared timer between steps (counted: the
     * rate is applied; the pacer's bound itself is checked on a fake clock by
     * {@code CopyPacerTest}); the copy still ends equal and promotable.
     */
    @Test
    void reReplicationPacedByARateEndsWithAnEqualCopyThatCanBePromoted() throws Exception {
        reReplicateUnderTraffic(256L << 10, "reReplicationPacedByARateEndsWithAnEqualCopyThatCanBePromoted");
    }

    private void reReplicateUnderTraffic(long rate, String name) throws Exception {
        // small chunks: the copy is built in 64 steps while the writers change every part of the segment
        List<Node> ns = start(4, new ReplicationConfig(1, 4096, 64L << 20, 4096, rate));
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        int firstCopy = view(p.group()).inSync()[0];
        long seed = Seeds.seed("membus.test.seed", name);
        AtomicBoolean stop = new AtomicBoolean();
        int slots = 3;
        AtomicLongArray acked = new AtomicLongArray(slots);
        List<Future<?>> writers = new ArrayList<>();
        for (int w = 0; w < slots; w++) {
            int slot = w;
            writers.add(pool.submit(() -> {
                SplittableRandom rnd = new SplittableRandom(seed + slot);
                for (long v = 1; !stop.get(); v++) {
                    // a counter word per writer, and random bytes all over the segment (below, at and above the cursor)
                    table(p).writeLong(p.ptr(slot * 8L), p.key(), v);
                    acked.set(slot, v);
                    int len = 1 + rnd.nextInt(2000);
                    long off = 64 + rnd.nextLong(SIZE - 64 - len);
                    byte[] b = new byte[len];
                    rnd.nextBytes(b);
                    table(p).write(p.ptr(off), p.key(), b, 0, len);
                }
                return null;
            }));
        }
        waitFor("writers running", () -> acked.get(0) > 20);
        crash(node(firstCopy));
        waitFor("a new copy of segment 1/0 in sync", () -> {
            ReplicaGroupView v = view(p.group());
            return v.inSync().length == 1 && v.inSync()[0] != firstCopy;
        });
        waitFor("more changes after the new copy joined", () -> acked.get(0) > 200);
        if (rate == 0) {
            assertEquals(0, p.replicator.rereplicationPacedWaits(), "no rate: no chunk waits for one");
        } else {
            assertTrue(p.replicator.rereplicationPacedWaits() > 0, "the rate held chunks back");
        }
        stop.set(true);
        for (Future<?> f : writers) {
            f.get(60, TimeUnit.SECONDS);
        }
        awaitSettled(p.group(), 1);
        assertCopiesEqual(p.group());
        int newCopy = view(p.group()).inSync()[0];
        long[] ackedNow = new long[slots];
        for (int s = 0; s < slots; s++) {
            ackedNow[s] = acked.get(s);
        }
        crash(p);
        waitFor("the re-replicated copy promoted", () -> view(p.group()).state() == ReplicaGroupView.State.SERVING
                && view(p.group()).primary() == newCopy);
        Segment promoted = node(newCopy).replicator.primary(p.group()).memory();
        for (int s = 0; s < slots; s++) {
            assertEquals(ackedNow[s], promoted.readLong(s * 8L), "slot " + s + " has its last acknowledged value");
        }
    }

    @Test
    void aCopyLeavesTheInSyncSetOnlyWhenRemoved() {
        List<Node> ns = start(3, 1);
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        int copyNode = view(p.group()).inSync()[0];
        Node other = ns.stream().filter(n -> n != p && n.id != copyNode).findFirst().orElseThrow();
        Connection c = connect(other, p);
        p.transport.faults().stream(copyNode).hold();
        CompletableFuture<Long> first = c.fetchAndAdd(p.ptr(0), p.key(), 1);
        List<CompletableFuture<Long>> more = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            more.add(c.fetchAndAdd(p.ptr(0), p.key(), 1));
        }
        // the primary has every change applied and buffered for the held copy, and keeps waiting for it
        waitFor("51 changes buffered for the held copy", () -> p.segment.readLong(0) == 51);
        assertFalse(first.isDone(), "a slow copy holds the change back");
        assertArrayEquals(new int[]{copyNode}, view(p.group()).inSync(), "the slow copy stays in sync");
        assertArrayEquals(new int[]{copyNode}, p.replicator.primary(p.group()).inSync());
        crash(node(copyNode));
        assertEquals(0L, await(first), "removing the copy releases the changes that waited for it");
        for (CompletableFuture<Long> f : more) {
            await(f);
        }
        awaitSettled(p.group(), 1);
        assertNotEquals(copyNode, view(p.group()).inSync()[0], "re-replicated elsewhere");
        assertCopiesEqual(p.group());
    }

    @Test
    void twoFailuresAtOnceLoseTheGroupTyped() {
        List<Node> ns = start(3, 1);
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        int copyNode = view(p.group()).inSync()[0];
        Node survivor = ns.stream().filter(n -> n != p && n.id != copyNode).findFirst().orElseThrow();
        awaitSettled(survivor.group(), 1);
        crash(p, node(copyNode));
        waitFor("segment 1/0 lost", () -> view(p.group()).state() == ReplicaGroupView.State.LOST);
        SegmentLostException lost = assertThrows(SegmentLostException.class,
                () -> Replicator.primaryOf(directory, p.ptr(0)));
        assertEquals(p.group(), lost.group());
        assertFalse(lost.mayHaveRun());
        // the survivor's own group keeps working (short of copies: there is no memory node left to hold one)
        assertEquals(ReplicaGroupView.State.SERVING, view(survivor.group()).state());
        assertEquals(survivor.id, Replicator.primaryOf(directory, survivor.ptr(0)));
        table(survivor).writeLong(survivor.ptr(0), survivor.key(), 42);
        assertEquals(42, table(survivor).readLong(survivor.ptr(0), survivor.key()));
        // a copy it may have started on the second node before that node's removal was known is given up
        String shortOfCopies = "segment " + GroupId.toString(survivor.group()) + ": 0 of 1 backups";
        waitFor("the survivor reports its group short of copies", () -> survivor.replicator.status().stream()
                .anyMatch(s -> s.group() == survivor.group() && s.state().equals(shortOfCopies)));
    }

    @Test
    void aPlantedSkipIsVisibleAsACopyThatDiffers() {
        List<Node> ns = start(2, 1);
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        int copyNode = view(p.group()).inSync()[0];
        long next = p.replicator.primary(p.group()).lastSeq() + 1;
        node(copyNode).transport.faults().stream(p.id).skip(next);
        table(p).writeLong(p.ptr(2048), p.key(), 0x5eedL);
        table(p).writeLong(p.ptr(4096), p.key(), 0x600dL);
        awaitSettled(p.group(), 1);
        Segment copy = node(copyNode).replicator.copy(p.group()).memory();
        assertEquals(0, copy.readLong(2048), "the skipped effect is missing on the copy although acknowledged");
        assertEquals(0x600dL, copy.readLong(4096), "the effects after it are applied");
        AssertionError differs = assertThrows(AssertionError.class, () -> assertCopiesEqual(p.group()));
        assertTrue(differs.getMessage().contains("offset 2048"), differs.getMessage());
    }

    @Test
    void aShortGroupGetsItsCopyWhenAMemoryNodeJoins() {
        ReplicationConfig config = ReplicationConfig.DEFAULT.withBackups(1);
        Node p = startNode(1, config);
        waitFor("the lone primary reports its group short", () -> p.replicator.status().stream()
                .anyMatch(s -> s.state().equals("segment 1/0: 0 of 1 backups")));
        table(p).writeLong(p.ptr(64), p.key(), 64);
        Node joiner = startNode(2, config);
        awaitSettled(p.group(), 1);
        assertEquals(joiner.id, view(p.group()).inSync()[0]);
        assertEquals(64, joiner.replicator.copy(p.group()).memory().readLong(64), "the copy has what came before");
        awaitSettled(joiner.group(), 1);
        assertCopiesEqual(p.group());
        assertCopiesEqual(joiner.group());
    }

    @Test
    void unexportingDropsTheCopies() {
        List<Node> ns = start(2, 1);
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        Node copy = node(view(p.group()).inSync()[0]);
        p.replicator.unexported(0);
        p.transport.unexport(0, false);
        directory.removeSegment(p.id, 0);
        waitFor("the copy dropped", () -> copy.replicator.copy(p.group()) == null
                && copy.transport.table().hosted(p.group()) == null, () -> "copy: " + copy.replicator.status()
                + ", hosted: " + copy.transport.table().hosted(p.group()) + ", primary: " + p.replicator.status());
        assertTrue(p.replicator.status().stream().noneMatch(s -> s.group() == p.group()));
        waitFor("no claim of the group left", () -> directory.claims(p.id).stream().noneMatch(c -> c.group() == p.group())
                && directory.claims(copy.id).stream().noneMatch(c -> c.group() == p.group()));
    }

    @Test
    void noBackupsMeansNoGroupAndNoStream() {
        List<Node> ns = start(2, 0);
        Node p = ns.get(0);
        assertTrue(p.replicator.status().isEmpty(), "no group with backups = 0");
        assertEquals(null, p.transport.table().gate(p.ptr(0)), "nothing to wait for");
        table(p).writeLong(p.ptr(0), p.key(), 7);
        assertEquals(7, table(p).readLong(p.ptr(0), p.key()));
        assertTrue(directory.groups().isEmpty(), "no claim published");
    }

    @Test
    void aCopyRefusesVerbsAndNamesItsPrimary() {
        List<Node> ns = start(2, 1);
        Node p = ns.get(0);
        awaitSettled(p.group(), 1);
        Node copy = node(view(p.group()).inSync()[0]);
        NotPrimaryException e = assertThrows(NotPrimaryException.class,
                () -> table(copy).readLong(p.ptr(0), p.key()));
        assertEquals(p.id, e.primaryHint());
        assertFalse(e.mayHaveRun());
        Connection c = connect(p, copy);
        assertInstanceOf(NotPrimaryException.class, assertThrows(DsmException.class,
                () -> await(c.write(p.ptr(0), p.key(), new byte[8]))));
        assertEquals(0, p.segment.readLong(0), "nothing ran");
    }
}
