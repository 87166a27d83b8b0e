package io.membus.samples.stress;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.replication.CopyReplica;
import io.membus.core.replication.GroupId;
import io.membus.core.replication.ReplicaGroup;
import io.membus.core.replication.ReplicationConfig;
import io.membus.core.replication.Replicator;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import io.membus.test.check.CheckResult;
import io.membus.test.check.LinearizabilityChecker;
import io.membus.test.check.Models;
import io.membus.test.check.Verdict;
import io.membus.test.history.HistoryRecorder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The planted fault of {@code membus stress --plant skip-effect} (docs/replication.md
 * §15.3), in one JVM over {@code local}: a copy acknowledges one write of a register key
 * without applying it ({@code FaultInjector.stream(primary).skip(seq)}), the key's primary
 * dies, the faulty copy is promoted, and a later read returns the value before the
 * acknowledged write. The stress run's recorder and checker must call the history not
 * linearizable and name that key; the test fails if they say "linearizable". A second
 * key, written only before the fault, must stay linearizable (the checker names the
 * right key, not every key).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PlantedSkipIsCaughtTest {
    private static final Duration OP_TIMEOUT = Duration.ofSeconds(20);
    private static final long SETTLE_NANOS = TimeUnit.SECONDS.toNanos(60);

    private record Node(int id, Transport transport, RemoteMemory memory, Replicator replicator, Segment segment) {
    }

    @Test
    void theCheckerReportsTheSkippedWriteAsANonLinearizableKey() {
        long seed = Long.getLong("membus.seed", System.nanoTime());
        System.out.println("PlantedSkipIsCaughtTest seed=" + seed + " (replay: -Dmembus.seed=" + seed + ")");
        SplittableRandom random = new SplittableRandom(seed);
        String fabric = "planted-skip-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        StaticDirectory directory = new StaticDirectory();
        List<Node> nodes = new ArrayList<>();
        List<Node> alive = new ArrayList<>();
        try {
            for (int id = 1; id <= 3; id++) {
                Node n = start(id, fabric, directory);
                nodes.add(n);
                alive.add(n);
            }
            Node primary = nodes.get(0);
            int group = GroupId.of(primary.id(), 0);
            waitFor("segment 1/0 served with its copy in sync", () -> settled(directory, nodes, group));
            int copyNode = directory.group(primary.id(), 0).orElseThrow().inSync()[0];
            Node client = nodes.stream().filter(n -> n != primary && n.id() != copyNode).findFirst().orElseThrow();
            long[] words = {primary.segment().pointer(0), primary.segment().pointer(8)}; // key 0, key 1

            HistoryRecorder recorder = new HistoryRecorder();
            int ops = 10 + random.nextInt(20);
            for (int i = 0; i < ops; i++) {
                int key = random.nextInt(2);
                if (random.nextBoolean()) {
                    write(recorder, client, key, words[key], 1 + random.nextInt(4));
                } else {
                    read(recorder, client, key, words[key]);
                }
            }
            long before = read(recorder, client, 0, words[0]);

            // the plant: the copy acknowledges the next effect of node 1's group without applying it
            ReplicaGroup g = primary.replicator().primary(group);
            long next = g.lastSeq() + 1;
            nodes.get(copyNode - 1).transport().faults().stream(primary.id()).skip(next);
            write(recorder, client, 0, words[0], 7); // acknowledged: every in-sync copy "has" it
            assertEquals(next, g.lastSeq(), "the planted write is the effect skipped");

            // the nemesis' part: kill the key's primary, so the faulty copy is promoted
            primary.replicator().close();
            primary.transport().close();
            alive.remove(primary);
            directory.removeMember(primary.id(), "killed (planted skip-effect)");
            waitFor("segment 1/0 promoted to node " + copyNode, () -> {
                ReplicaGroupView v = directory.group(primary.id(), 0).orElse(null);
                return v != null && v.state() == ReplicaGroupView.State.SERVING && v.primary() == copyNode;
            });
            long after = read(recorder, client, 0, words[0]);
            read(recorder, client, 1, words[1]);
            assertEquals(before, after, "the promoted copy lacks the acknowledged write of 7 (the plant took)");
            assertNotEquals(7L, after);

            CheckResult result = new LinearizabilityChecker().check(recorder.history(), Models.register(0L));
            System.out.println("checker: " + result.summary());
            if (result.verdict() == Verdict.LINEARIZABLE) {
                fail("the checker called a history linearizable in which an acknowledged write (7 on key 0) was lost"
                        + " by a promoted copy that skipped it: " + result.summary());
            }
            assertEquals(Verdict.VIOLATION, result.verdict(), result::summary);
            assertEquals(List.of("0"), result.keysWith(Verdict.VIOLATION), "the key of the skipped write, only it: "
                    + result.summary());
            assertEquals(Verdict.LINEARIZABLE, result.keys().get("1").verdict(), "key 1 was written before the fault");
        } finally {
            for (Node n : alive) {
                n.replicator().close();
                n.transport().close();
            }
        }
    }

    private static Node start(int id, String fabric, StaticDirectory directory) {
        TransportConfig tc = TransportConfig.builder(id).operationTimeout(OP_TIMEOUT)
                .connectTimeout(Duration.ofSeconds(10)).properties(Map.of("local.fabric", fabric)).build();
        Transport t = Transports.create("local", tc);
        directory.addMember(t.self());
        RemoteMemory mem = new RemoteMemory(t, directory, OP_TIMEOUT);
        Replicator r = new Replicator(t, mem, directory, directory, ReplicationConfig.DEFAULT.withBackups(1));
        r.start();
        Segment s = t.export(SegmentSpec.of(0, 64 * 1024));
        directory.addSegment(s.descriptor());
        r.exported(s);
        return new Node(id, t, mem, r, s);
    }

    /** Node 1's group is served with one in-sync copy that acknowledged every change. */
    private static boolean settled(StaticDirectory directory, List<Node> nodes, int group) {
        ReplicaGroupView v = directory.group(GroupId.node(group), GroupId.index(group)).orElse(null);
        if (v == null || v.state() != ReplicaGroupView.State.SERVING || v.inSync().length != 1) {
            return false;
        }
        ReplicaGroup g = nodes.get(v.primary() - 1).replicator().primary(group);
        CopyReplica copy = nodes.get(v.inSync()[0] - 1).replicator().copy(group);
        return g != null && g.watermark() == g.lastSeq() && g.inSync().length == 1 && copy != null && copy.inSync()
                && directory.claims(v.inSync()[0]).stream().anyMatch(c -> c.group() == group
                && c.role() == io.membus.core.replication.GroupClaim.Role.COPY);
    }

    private static void write(HistoryRecorder recorder, Node client, int key, long word, long value) {
        HistoryRecorder.Call c = recorder.invoke(1, Integer.toString(key), "write", value);
        client.memory().writeLong(word, value); // a failure fails the test: nothing here is expected to fail
        c.ok(null);
    }

    private static long read(HistoryRecorder recorder, Node client, int key, long word) {
        HistoryRecorder.Call c = recorder.invoke(1, Integer.toString(key), "read", null);
        long v = client.memory().readLong(word);
        c.ok(v);
        return v;
    }

    private static void waitFor(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + SETTLE_NANOS;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                fail("not reached within the test's deadline: " + what);
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                fail("interrupted waiting for: " + what);
            }
        }
    }
}
