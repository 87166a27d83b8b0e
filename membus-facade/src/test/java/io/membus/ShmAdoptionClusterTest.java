package io.membus;

import io.membus.core.test.TestFiles;
import com.typesafe.config.ConfigFactory;
import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmMap;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.test.TestJvm;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * shm adoption driven by the cluster (docs/replication.md §8): with
 * {@code membus.replication.backups = 1} on shm, the structures of a memory node that dies
 * keep working through the survivor that adopts its segment files.
 *
 * <p>Nodes 1 and 2 run in this JVM, node 3 in a child JVM; a {@link DsmAtomicLong} and a
 * {@link DsmMap} have their roots on node 3. Every change is made and acknowledged (node 3
 * counts too) before node 3's process is killed with SIGKILL, or stopped with SIGSTOP (then
 * the adopter must kill it itself before it adopts: the test never kills it). Once node 3
 * is downed and a survivor serves its segments (the directory routes them to it), both
 * nodes of this JVM read every acknowledged change, and change both structures again: the
 * adopter through its own table, the other node through its connection to the adopter.
 */
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
class ShmAdoptionClusterTest {

    enum Fault { KILL, STOP }

    private static final int KEYS = 120;
    private static final int ROUNDS = 100;

    @ParameterizedTest
    @EnumSource(Fault.class)
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void theStructuresOfADeadShmNodeAnswerThroughItsAdopter(Fault fault) throws Exception {
        Path dir = MembusTest.processDir("shm", "membus-adopt-test-");
        try {
            run(fault, dir);
        } finally {
            TestFiles.deleteTree(dir);
        }
        assertFalse(Files.exists(dir), "the shm directory is removed");
    }

    private static String config(int id, int port, int seed, Path dir) {
        return MembusTest.processConfig("adopt-test", id, port, seed, "shm", dir)
                + "membus.replication.backups = 1\n"
                + "membus.segments.count = 2\n"
                + "membus.segments.size = 4MiB\n"
                + "membus.segments.dir = \"" + dir.resolve("segments") + "\"\n"
                + "membus.heap.segments = [1]\n";
    }

    private void run(Fault fault, Path dir) throws Exception {
        int seed = MembusTest.freePort();
        Path conf3 = dir.resolve("node-3.conf");
        Files.writeString(conf3, config(3, MembusTest.freePort(), seed, dir));
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed, dir)));
             Membus two = Membus.start(ConfigFactory.parseString(config(2, MembusTest.freePort(), seed, dir)));
             TestJvm jvm = new TestJvm()) {
            Process third = jvm.start(CounterNodeProcess.class, List.of(conf3.toString()));
            awaitOutput(jvm, "READY", Duration.ofSeconds(90));
            await(jvm, "node 3's segments served by node 3 in both directories", Duration.ofSeconds(60),
                    () -> servedBy(one, 3, 3) && servedBy(two, 3, 3));
            long pid = third.pid();

            String counterName = null;
            String mapName = null;
            for (int i = 0; i < 64 && (counterName == null || mapName == null); i++) {
                if (counterName == null && one.atomicLong("adopt-hits-" + i).root().block().nodeId() == 3) {
                    counterName = "adopt-hits-" + i;
                }
                if (mapName == null && one.map("adopt-map-" + i, String.class, Long.class).root().block().nodeId() == 3) {
                    mapName = "adopt-map-" + i;
                }
            }
            assertNotNull(counterName, "a counter of 64 names placed on node 3");
            assertNotNull(mapName, "a map of 64 names placed on node 3");
            DsmAtomicLong c1 = one.atomicLong(counterName);
            DsmAtomicLong c2 = two.atomicLong(counterName);
            DsmMap<String, Long> m1 = one.map(mapName, String.class, Long.class);
            DsmMap<String, Long> m2 = two.map(mapName, String.class, Long.class);

            // every change acknowledged before the fault
            for (int i = 0; i < ROUNDS; i++) {
                c1.incrementAndGet();
                c2.incrementAndGet();
            }
            for (int i = 0; i < KEYS; i++) {
                (i % 2 == 0 ? m1 : m2).put("k" + i, (long) i);
            }
            send(third, "COUNT " + ROUNDS + " " + counterName);
            awaitOutput(jvm, "COUNT-DONE", Duration.ofSeconds(60));
            long childOk = 0;
            long childMaybe = 0;
            for (String line : jvm.output(0).lines().toList()) {
                String[] f = line.split(" ");
                if (f.length == 4 && f[0].equals("COUNTED") && f[1].equals(counterName)) {
                    childOk = Long.parseLong(f[2]);
                    childMaybe = Long.parseLong(f[3]);
                }
            }
            long acknowledged = 2L * ROUNDS + childOk;
            long counted = c1.get();
            assertTrue(counted >= acknowledged && counted <= acknowledged + childMaybe, "before the fault: counter "
                    + counted + " outside [" + acknowledged + ", " + (acknowledged + childMaybe) + "]");

            long faultAt = System.nanoTime();
            if (fault == Fault.KILL) {
                third.destroyForcibly(); // SIGKILL
                assertTrue(third.waitFor(10, TimeUnit.SECONDS), "node 3's process exits after SIGKILL");
            } else {
                assertEquals(0, new ProcessBuilder("kill", "-STOP", Long.toString(pid)).start().waitFor());
            }
            await(jvm, "node 3 downed in both directories", Duration.ofSeconds(60),
                    () -> one.node().directory().member(3).isEmpty() && two.node().directory().member(3).isEmpty());
            if (fault == Fault.STOP) {
                // nothing here kills it: the adopter does, before it maps the files
                assertTrue(third.waitFor(60, TimeUnit.SECONDS), "the adopter killed the stopped process");
                assertEquals(137, third.exitValue(), "ended by SIGKILL (128 + 9)");
            }
            await(jvm, "node 3's segments served by a survivor in both directories", Duration.ofSeconds(60),
                    () -> servedBySurvivor(one) && servedBySurvivor(two));
            int adopter = one.node().directory().group(3, 1).orElseThrow().primary();
            System.out.printf("MEASURE %s of node 3 -> its segments served by adopter node %d: %d ms%n", fault,
                    adopter, (System.nanoTime() - faultAt) / 1_000_000);

            // every acknowledged change, from both nodes (the adopter's own table, the other's connection)
            for (Membus m : List.of(one, two)) {
                long value = m.atomicLong(counterName).get();
                assertTrue(value >= acknowledged && value <= acknowledged + childMaybe, "node " + m.node().nodeId()
                        + ": counter " + value + " outside [" + acknowledged + ", " + (acknowledged + childMaybe) + "]");
                DsmMap<String, Long> map = m.map(mapName, String.class, Long.class);
                for (int i = 0; i < KEYS; i++) {
                    assertEquals(Long.valueOf(i), map.get("k" + i), "node " + m.node().nodeId() + ": key k" + i);
                }
                assertEquals(KEYS, map.size(), "node " + m.node().nodeId());
            }
            long before = c1.get();

            // and they keep changing through the adopter
            for (int i = 0; i < ROUNDS; i++) {
                c1.incrementAndGet();
                c2.incrementAndGet();
            }
            for (int i = KEYS; i < KEYS + 40; i++) {
                (i % 2 == 0 ? m1 : m2).put("k" + i, (long) i);
            }
            assertEquals(Long.valueOf(7), m1.replace("k7", 700L));
            assertEquals(before + 2L * ROUNDS, c2.get());
            assertEquals(before + 2L * ROUNDS, c1.get());
            for (DsmMap<String, Long> map : List.of(m1, m2)) {
                assertEquals(KEYS + 40, map.size());
                assertEquals(Long.valueOf(700), map.get("k7"));
                assertEquals(Long.valueOf(KEYS + 39), map.get("k" + (KEYS + 39)));
            }
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "node 3's process is gone");
        }
    }

    /** Whether {@code m}'s directory shows node 3's segments served by {@code node}. */
    private static boolean servedBy(Membus m, int owner, int node) {
        for (int s = 0; s < 2; s++) {
            ReplicaGroupView v = m.node().directory().group(owner, s).orElse(null);
            if (v == null || v.state() != ReplicaGroupView.State.SERVING || v.primary() != node) {
                return false;
            }
        }
        return true;
    }

    private static boolean servedBySurvivor(Membus m) {
        return servedBy(m, 3, 1) || servedBy(m, 3, 2);
    }

    private static void send(Process p, String line) throws IOException {
        OutputStream out = p.getOutputStream();
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private static void awaitOutput(TestJvm jvm, String text, Duration timeout) {
        await(jvm, "child printed " + text, timeout, () -> jvm.output(0).contains(text));
    }

    /** Polls every 20 ms; fails with the child's output at the deadline. */
    private static void await(TestJvm jvm, String what, Duration timeout, BooleanSupplier condition) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out after " + timeout.toMillis() + " ms waiting for: " + what
                        + "; child output:\n" + jvm.output(0));
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted waiting for: " + what);
            }
        }
    }
}
