package io.membus;

import io.membus.core.test.TestFiles;
import com.typesafe.config.ConfigFactory;
import io.membus.cluster.ClusterMessage;
import io.membus.cluster.ClusterStatus;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmQueue;
import io.membus.core.RemotePtr;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.test.TestJvm;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Replication end to end over tcp on loopback (docs/replication.md §1): three memory
 * nodes with {@code membus.replication.backups = 1} and a client in its own JVM
 * ({@link ReplicatedClientProcess}) that fills counters, maps and queues through
 * {@link Membus}. Memory nodes 1 and 2 run in this JVM, memory node 3 in a child JVM
 * ({@link CounterNodeProcess}), and some of the structures' blocks lie on node 3. Under
 * the client's load node 3 is killed with SIGKILL and never restarted: the structures
 * answer again (every acknowledged increment, put and offer is there; nothing beyond
 * what the failures that "may have run" allow), the measured unavailability is printed
 * (detection + promotion; no assertion on time), and every group gets back to 1 of 1
 * backups on the two memory nodes left (the {@code membus status} group rows).
 */
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
class ReplicatedClusterTest {
    private static final int CLIENT = 11;

    private static String config(int id, int port, int seed) {
        return MembusTest.processConfig("replicated-cluster-test", id, port, seed, "tcp", null)
                + "membus.replication.backups = 1\n"
                + (id == CLIENT ? "membus.role = client\nmembus.segments.count = 0\n"
                : "membus.segments.count = 2\nmembus.segments.size = 4MiB\nmembus.heap.segments = [1]\n");
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void theStructuresOfAKilledMemoryNodeAnswerAgainWithEveryAcknowledgedChangeAndItsGroupsGetTheirCopiesBack()
            throws Exception {
        Path dir = Files.createTempDirectory(Path.of(System.getProperty("java.io.tmpdir")), "membus-replicated-test-");
        try {
            run(dir);
        } finally {
            TestFiles.deleteTree(dir);
        }
    }

    private void run(Path dir) throws Exception {
        int seed = MembusTest.freePort();
        Path conf3 = dir.resolve("node-3.conf");
        Files.writeString(conf3, config(3, MembusTest.freePort(), seed));
        Path confClient = dir.resolve("client.conf");
        Files.writeString(confClient, config(CLIENT, MembusTest.freePort(), seed));
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed)));
             Membus two = Membus.start(ConfigFactory.parseString(config(2, MembusTest.freePort(), seed)));
             TestJvm jvm = new TestJvm()) {
            Process three = jvm.start(CounterNodeProcess.class, List.of(conf3.toString()));
            await(jvm, 0, "node 3 started", Duration.ofSeconds(90), () -> jvm.output(0).contains("READY")
                    || !three.isAlive());
            assertTrue(three.isAlive(), "node 3 runs:\n" + jvm.output(0));
            Process client = jvm.start(ReplicatedClientProcess.class, List.of(confClient.toString()));
            await(jvm, 1, "the client made its structures", Duration.ofSeconds(90),
                    () -> jvm.output(1).contains("READY") || !client.isAlive());
            assertTrue(client.isAlive(), "the client runs:\n" + jvm.output(1));
            one.awaitMembers(4, Duration.ofSeconds(30));

            Map<String, Integer> placed = new TreeMap<>();
            for (String line : jvm.output(1).lines().toList()) {
                String[] f = line.split(" ");
                if (f[0].equals("PTR") && f.length == 4) {
                    placed.put(f[2], RemotePtr.nodeId(Long.parseUnsignedLong(f[3], 16)));
                }
            }
            System.out.println("placement of the structures' roots: " + placed);
            assertTrue(placed.containsValue(3), "some structure lies on node 3 (the one killed): " + placed);
            // every group of node 3 has its copy before the kill: the engine placed it on node 1 or 2
            awaitGroups(jvm, one, "node 3's groups have their copy", g -> g.group() >> 8 != 3 || g.inSyncCount() == 1);

            OutputStream toClient = client.getOutputStream();
            toClient.write("RUN\n".getBytes(StandardCharsets.UTF_8));
            toClient.flush();
            int rounds = ReplicatedClientProcess.COUNTERS + ReplicatedClientProcess.MAPS + ReplicatedClientProcess.QUEUES;
            await(jvm, 1, "the client's load runs", Duration.ofSeconds(60), () -> count(jvm.output(1), "ACK ") >= 20 * rounds);

            int before = count(jvm.output(1), "ACK ");
            long killed = System.nanoTime();
            three.destroyForcibly(); // kill -9, never restarted
            assertTrue(three.waitFor(10, TimeUnit.SECONDS));
            await(jvm, 1, "node 3 removed", Duration.ofSeconds(60), () -> one.node().directory().member(3).isEmpty()
                    && two.node().directory().member(3).isEmpty());
            long removed = System.nanoTime();
            // two whole rounds after the removal: every structure answered again
            int atRemoval = count(jvm.output(1), "ACK ");
            await(jvm, 1, "the structures answer again", Duration.ofSeconds(90),
                    () -> count(jvm.output(1), "ACK ") >= atRemoval + 2 * rounds);
            long answered = System.nanoTime();
            toClient.write("STOP\n".getBytes(StandardCharsets.UTF_8));
            toClient.flush();
            await(jvm, 1, "the client stopped", Duration.ofSeconds(90), () -> jvm.output(1).contains("STOPPED")
                    || !client.isAlive());
            String out = jvm.output(1);
            assertTrue(out.contains("STOPPED"), "client output:\n" + out);
            System.out.printf("unavailability: node 3 killed; removed from membership after %d ms; the structures"
                            + " answered two whole rounds again %d ms after the kill; %d acknowledged before the kill;"
                            + " the client's slowest operation: %s ms%n", (removed - killed) / 1_000_000,
                    (answered - killed) / 1_000_000, before,
                    out.lines().filter(l -> l.startsWith("SLOWEST ")).findFirst().orElse("SLOWEST ?").substring(8));
            out.lines().filter(l -> l.startsWith("SLOW ") || l.startsWith("OUTAGE "))
                    .forEach(l -> System.out.println("client: " + l));
            System.out.println("client: " + out.lines().filter(l -> l.startsWith("failed ")).count() + " failed operations,"
                    + " the first: " + out.lines().filter(l -> l.startsWith("failed ")).findFirst().orElse("none"));

            // the client leaves: a queue slot it claimed for an offer whose outcome is unknown (the claim reached node
            // 3's group, the publication failed with node 3, its give-up too) stays claimed while it lives and has no
            // operation in flight; once it is gone the slot is recovered (DsmQueue: a dead producer's claim is emptied)
            client.getOutputStream().close();
            assertEquals(0, jvm.await(1, 60), "the client exits cleanly:\n" + jvm.output(1));
            await(jvm, 1, "the client removed", Duration.ofSeconds(60), () -> two.node().directory().member(CLIENT).isEmpty());

            // what the client was told, checked by node 2
            Map<String, Set<Integer>> acked = new HashMap<>();
            Map<String, Set<Integer>> maybe = new HashMap<>();
            for (String line : out.lines().toList()) {
                String[] f = line.split(" ");
                if (f.length == 4 && (f[0].equals("ACK") || f[0].equals("MAYBE"))) {
                    (f[0].equals("ACK") ? acked : maybe).computeIfAbsent(f[2], k -> new HashSet<>())
                            .add(Integer.parseInt(f[3]));
                }
            }
            for (int k = 0; k < ReplicatedClientProcess.COUNTERS; k++) {
                String name = "rc-counter-" + k;
                long a = acked.getOrDefault(name, Set.of()).size();
                long m = maybe.getOrDefault(name, Set.of()).size();
                long v = two.atomicLong(name).get();
                assertTrue(a <= v && v <= a + m, name + " = " + v + ": acknowledged " + a + ", may have run " + m);
            }
            for (int k = 0; k < ReplicatedClientProcess.MAPS; k++) {
                String name = "rc-map-" + k;
                DsmMap<String, Long> map = two.map(name, String.class, Long.class);
                for (int i : acked.getOrDefault(name, Set.of())) {
                    assertEquals(Long.valueOf(i), map.get("key-" + i), name + ": acknowledged put " + i);
                }
                int a = acked.getOrDefault(name, Set.of()).size();
                int m = maybe.getOrDefault(name, Set.of()).size();
                assertTrue(a <= map.size() && map.size() <= a + m, name + " has " + map.size() + " keys: acknowledged "
                        + a + ", may have run " + m);
            }
            for (int k = 0; k < ReplicatedClientProcess.QUEUES; k++) {
                String name = "rc-queue-" + k;
                DsmQueue<String> q = two.queue(name, String.class, ReplicatedClientProcess.CAPACITY);
                Map<Integer, Integer> seen = new HashMap<>();
                for (String e = q.poll(10, TimeUnit.SECONDS); e != null; e = q.poll(10, TimeUnit.SECONDS)) {
                    seen.merge(Integer.parseInt(e.substring(2)), 1, Integer::sum);
                }
                Set<Integer> a = acked.getOrDefault(name, Set.of());
                Set<Integer> m = maybe.getOrDefault(name, Set.of());
                for (int i : a) {
                    assertTrue(seen.containsKey(i), name + ": acknowledged offer " + i + " is missing");
                }
                int duplicates = 0;
                for (Map.Entry<Integer, Integer> e : seen.entrySet()) {
                    assertTrue(a.contains(e.getKey()) || m.contains(e.getKey()), name + ": element " + e.getKey()
                            + " was never offered successfully or with 'may have run'");
                    duplicates += e.getValue() - 1;
                }
                assertTrue(duplicates <= m.size(), name + ": " + duplicates + " duplicates, but only " + m.size()
                        + " offers may have run");
            }

            // membus status: every group back to 1 of 1 backups on the two memory nodes left
            awaitGroups(jvm, one, "every group has 1 of 1 backups again", g -> g.state()
                    == ReplicaGroupView.State.SERVING && g.inSyncCount() == 1 && g.primary() != 3 && g.inSync()[0] != 3);
            await(jvm, 1, "membus status shows no group needing attention", Duration.ofSeconds(60),
                    () -> one.node().status().groupsShort() == 0 && two.node().status().groupsShort() == 0);
            ClusterMessage.StatusReply reply = ClusterStatus.query("127.0.0.1:" + seed, "replicated-cluster-test",
                    "127.0.0.1", Duration.ofSeconds(15), one.node().config());
            reply.groups().forEach(r -> System.out.println("group row: " + r));
            assertFalse(reply.groups().isEmpty());
            for (ClusterMessage.GroupRow r : reply.groups()) {
                assertFalse(r.needsAttention(), r.toString());
                assertEquals(1, r.inSync().size(), r.toString());
            }
            assertTrue(reply.groups().stream().anyMatch(r -> r.group() >> 8 == 3 && r.primary() != 3),
                    "node 3's groups are served by a promoted copy: " + reply.groups());
            assertNotNull(two.atomicLong("rc-counter-0").incrementAndGet() > 0 ? "served" : null);
        }
    }

    private static int count(String out, String prefix) {
        int n = 0;
        for (String l : out.lines().toList()) {
            if (l.startsWith(prefix)) {
                n++;
            }
        }
        return n;
    }

    private static void awaitGroups(TestJvm jvm, Membus node, String what,
                                    java.util.function.Predicate<ReplicaGroupView> each) throws InterruptedException {
        await(jvm, 1, what, Duration.ofSeconds(90), () -> {
            List<ReplicaGroupView> groups = new ArrayList<>(node.node().directory().groups());
            return groups.size() >= 6 && groups.stream().allMatch(each);
        });
    }

    /** Polls every 50 ms; fails with child {@code i}'s output at the deadline. */
    private static void await(TestJvm jvm, int i, String what, Duration timeout, BooleanSupplier condition)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out after " + timeout.toMillis() + " ms waiting for: " + what
                        + "; child " + i + " output:\n" + (i < jvm.size() ? jvm.output(i) : "-"));
            }
            Thread.sleep(50);
        }
    }
}
