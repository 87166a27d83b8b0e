package io.membus.cluster;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.error.DsmException;
import io.membus.core.replication.GroupId;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static io.membus.cluster.TestClusters.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A graceful leave of a memory node under replication (docs/replication.md §17.9): it hands
 * its groups over to their copies (waiting for a copy that is still joining) and its copies
 * back to their primaries, so no group is ever PROMOTING or LOST on the node that stays, no
 * replication line is a warning, and every acknowledged change of the leaving primary is
 * served afterwards. In-JVM nodes over {@code local}, {@code backups = 1}.
 */
@Tag("slow") // in-JVM cluster starts: the slow tier (failsafe, mvn verify)
class GracefulLeaveTest {
    private final TestClusters.LocalNodes nodes = new TestClusters.LocalNodes("graceful-leave-test",
            "membus.replication.backups = 1\n");

    @AfterEach
    void closeAll() {
        nodes.close();
    }

    private DsmNode start(int id, int port, int seedPort, String extra) {
        return nodes.start(id, port, seedPort, extra);
    }

    /** Every group view of node {@code owner}'s segments that {@code n} saw, as "state@primary". */
    private static List<String> watch(DsmNode n, int owner) {
        List<String> seen = new CopyOnWriteArrayList<>();
        n.directory().addListener(new DirectoryListener() {
            @Override
            public void groupChanged(ReplicaGroupView before, ReplicaGroupView after) {
                if (after != null && GroupId.node(after.group()) == owner) {
                    seen.add(GroupId.toString(after.group()) + " " + after.state() + "@" + after.primary());
                }
            }
        });
        return seen;
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aCleanStopRightAfterATwoNodeStartLosesNothingAndWarnsNothing() throws Exception {
        int p1 = TestClusters.freePort();
        // segments large and chunks small: node 2's copies on node 1 are most likely still joining when it stops
        String big = "membus.segments.size = 8MiB\nmembus.replication.chunk = 4KiB\n";
        DsmNode one = start(1, p1, p1, big);
        List<String> views = watch(one, 2);
        DsmNode two = start(2, 0, p1, big);
        one.awaitMembers(2, Duration.ofSeconds(30));
        two.awaitMembers(2, Duration.ofSeconds(30));
        long ptr = RemotePtr.pack(2, 1, (8L << 20) - 8);
        one.remoteMemory().writeLong(ptr, 4711L); // acknowledged by node 2 (its copy, if joining, gets it by chunk)

        Tee err = Tee.install();
        try {
            two.close();
            await("node 1 saw node 2 leave", Duration.ofSeconds(30), () -> one.directory().member(2).isEmpty());
            for (int index : new int[] {0, 1}) {
                await("segment 2/" + index + " served by node 1", Duration.ofSeconds(30), () -> one.directory()
                        .group(2, index).filter(v -> v.state() == ReplicaGroupView.State.SERVING && v.primary() == 1)
                        .isPresent());
            }
            assertEquals(4711L, one.remoteMemory().readLong(ptr), "the acknowledged write survives the leave");
            Thread.sleep(500); // what node 1 says after the removal
        } finally {
            err.uninstall();
        }
        assertTrue(views.stream().noneMatch(v -> v.contains("LOST") || v.contains("PROMOTING")),
                "node 2's groups went from node 2 to node 1 without a window: " + views);
        assertTrue(one.directory().groups().stream().noneMatch(v -> v.state() == ReplicaGroupView.State.LOST),
                one.directory().groups().toString());
        List<String> warnings = err.lines().stream().filter(l -> l.contains("WARN") || l.contains("ERROR"))
                .filter(l -> l.contains("replication") || l.contains("LOST")).toList();
        assertEquals(List.of(), warnings, "replication warnings on a clean stop:\n" + err.text());
        assertTrue(err.text().contains("leaves gracefully") && err.text().contains("took segment 2/"), err.text());
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aPrimarysAcknowledgedIncrementsSurviveItsGracefulLeaveUnderTraffic() throws Exception {
        List<DsmNode> all = nodes.startConverged(new int[] {1, 2, 3});
        DsmNode one = all.get(0);
        DsmNode three = all.get(2);
        List<String> views = watch(one, 3);
        for (int index : new int[] {0, 1}) {
            await("segment 3/" + index + " has its copy", Duration.ofSeconds(30), () -> one.directory()
                    .group(3, index).filter(v -> v.primary() == 3 && v.inSync().length == 1).isPresent());
        }
        long counter = RemotePtr.pack(3, 1, 64);
        RemoteMemory mem = one.remoteMemory();
        AtomicLong acknowledged = new AtomicLong();
        AtomicLong unknown = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        List<Throwable> unexpected = new CopyOnWriteArrayList<>();
        Thread writer = new Thread(() -> {
            while (!stop.get()) {
                try {
                    mem.fetchAndAdd(counter, 1);
                    acknowledged.incrementAndGet();
                } catch (DsmException e) {
                    if (e.mayHaveRun()) {
                        unknown.incrementAndGet();
                    }
                } catch (Throwable t) {
                    unexpected.add(t);
                    return;
                }
            }
        }, "graceful-leave-writer");
        writer.start();
        try {
            await("increments flow", Duration.ofSeconds(30), () -> acknowledged.get() > 200);
            three.close();
            long after = acknowledged.get();
            await("increments flow again after the hand-over", Duration.ofSeconds(30),
                    () -> acknowledged.get() > after + 200);
        } finally {
            stop.set(true);
            writer.join(30_000);
        }
        assertEquals(List.of(), unexpected);
        long value = mem.readLong(counter);
        assertTrue(value >= acknowledged.get() && value <= acknowledged.get() + unknown.get(),
                "every acknowledged increment is kept: value " + value + ", acknowledged " + acknowledged.get()
                        + ", outcome unknown " + unknown.get());
        assertTrue(views.stream().noneMatch(v -> v.contains("LOST") || v.contains("PROMOTING")),
                "node 3's groups moved without a window: " + views);
        for (int index : new int[] {0, 1}) {
            ReplicaGroupView v = one.directory().group(3, index).orElseThrow();
            assertTrue(v.state() == ReplicaGroupView.State.SERVING && (v.primary() == 1 || v.primary() == 2),
                    v.toString());
        }
    }

    /**
     * The whole cluster stops cleanly, one node after the other (the end of {@code membus demo}):
     * node 1 hands its groups to node 2, node 2 then leaves with no memory node staying, so its
     * groups go with it, and the client that stays last sees them LOST. That loss is the
     * operator's choice, not a fault: no node logs a replication warning (the CleanLogTest rule);
     * the LOST lines are INFO.
     */
    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aWholeClusterStopLogsNoWarning() throws Exception {
        List<DsmNode> all = nodes.startConverged(new int[] {1, 2, 11}, "", "", "membus.segments.count = 0\n");
        DsmNode one = all.get(0);
        DsmNode two = all.get(1);
        DsmNode client = all.get(2);
        for (int node : new int[] {1, 2}) {
            for (int index : new int[] {0, 1}) {
                await("segment " + node + "/" + index + " has its copy", Duration.ofSeconds(30), () -> client
                        .directory().group(node, index).filter(v -> v.inSync().length == 1).isPresent());
            }
        }
        Tee err = Tee.install();
        try {
            one.close();
            await("the client saw node 1 leave", Duration.ofSeconds(30), () -> client.directory().member(1).isEmpty());
            two.close();
            await("the client saw node 2 leave", Duration.ofSeconds(30), () -> client.directory().member(2).isEmpty());
            await("the client saw node 2's groups go", Duration.ofSeconds(30), () -> client.directory().groups()
                    .stream().anyMatch(v -> v.state() == ReplicaGroupView.State.LOST));
            Thread.sleep(500); // what the client says after the removal
            client.close();
        } finally {
            err.uninstall();
        }
        // replication's lines only: in one JVM, Pekko's own (a stream of one actor system seeing another's close) are
        // not told apart by system; CleanLogTest checks every line of separate JVMs
        List<String> warnings = err.lines().stream().filter(l -> l.contains("WARN") || l.contains("ERROR"))
                .filter(l -> l.contains("replication") || l.contains("LOST")).toList();
        assertEquals(List.of(), warnings, "replication warnings on a clean stop of the whole cluster:\n" + err.text());
        assertTrue(err.text().contains("is LOST"), "the client says the groups went:\n" + err.text());
    }

    /** Copies System.err (where slf4j-simple writes, looked up at each line) into a buffer while installed. */
    private static final class Tee extends OutputStream {
        private final PrintStream original;
        private final ByteArrayOutputStream copy = new ByteArrayOutputStream();

        private Tee(PrintStream original) {
            this.original = original;
        }

        static Tee install() {
            Tee t = new Tee(System.err);
            System.setErr(new PrintStream(t, true, StandardCharsets.UTF_8));
            return t;
        }

        void uninstall() {
            System.setErr(original);
        }

        @Override
        public synchronized void write(int b) {
            original.write(b);
            copy.write(b);
        }

        @Override
        public synchronized void write(byte[] b, int off, int len) {
            original.write(b, off, len);
            copy.write(b, off, len);
        }

        synchronized String text() {
            return copy.toString(StandardCharsets.UTF_8);
        }

        List<String> lines() {
            return text().lines().toList();
        }
    }
}
