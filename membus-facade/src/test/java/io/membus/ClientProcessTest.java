package io.membus;

import io.membus.core.test.TestFiles;
import com.typesafe.config.ConfigFactory;
import io.membus.codec.Codecs;
import io.membus.collections.DsmLock;
import io.membus.collections.DsmQueue;
import io.membus.core.RemotePtr;
import io.membus.core.test.TestJvm;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Clients in their own JVM use every structure through {@link Membus}, hold none of it,
 * and never count in the split-brain decision.
 *
 * <p>Memory nodes 1 and 2 run in this JVM; clients 11, 12 and 13 (no segments) run in
 * one child JVM ({@link ClientsProcess}). Each client uses a counter, both arrays, a
 * map, a map with leased reads, a queue, a lock and coherent objects; every block they
 * made lies on node 1 or 2, and the memory nodes read what the clients wrote. Then the
 * child is killed with SIGKILL while client 11 holds a lock: three of five members lost
 * at once, which would be a lost majority if clients counted. The memory nodes stay
 * up, remove the clients, break the dead client's lock with a larger token and keep
 * serving every structure.
 */
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
class ClientProcessTest {
    private static final List<Integer> CLIENTS = List.of(11, 12, 13);

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "shm"})
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void clientsInAnotherJvmUseEveryStructureHoldNoneAndNeverCountInTheSplitBrainDecision(String transport)
            throws Exception {
        Path dir = MembusTest.processDir(transport, "membus-client-process-test-");
        try {
            run(transport, dir);
        } finally {
            TestFiles.deleteTree(dir);
        }
    }

    private static String config(int id, int port, int seed, String transport, Path dir) {
        return MembusTest.processConfig("client-process-test", id, port, seed, transport, dir)
                + (CLIENTS.contains(id) ? "membus.role = client\nmembus.segments.count = 0\n"
                : "membus.segments.count = 2\nmembus.segments.size = 4MiB\nmembus.heap.segments = [1]\n");
    }

    private void run(String transport, Path dir) throws Exception {
        int seed = MembusTest.freePort();
        List<String> args = new ArrayList<>(List.of("5"));
        for (int id : CLIENTS) {
            Path conf = dir.resolve("client-" + id + ".conf");
            Files.writeString(conf, config(id, MembusTest.freePort(), seed, transport, dir));
            args.add(conf.toString());
        }
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed, transport, dir)));
             Membus two = Membus.start(ConfigFactory.parseString(config(2, MembusTest.freePort(), seed, transport, dir)));
             TestJvm jvm = new TestJvm()) {
            Process child = jvm.start(ClientsProcess.class, args);
            await(jvm, "the clients' work", Duration.ofSeconds(120), () -> jvm.output(0).contains("DONE")
                    || !child.isAlive());
            String out = jvm.output(0);
            assertTrue(out.contains("DONE"), "child output:\n" + out);

            Set<Integer> placedOn = new TreeSet<>();
            List<String> refs = new ArrayList<>();
            long token = -1;
            Set<Integer> reported = new HashSet<>();
            for (String line : out.lines().toList()) {
                String[] f = line.split(" ");
                switch (f[0]) {
                    case "SEGMENTS" -> {
                        assertEquals("0", f[2], line);
                        reported.add(Integer.parseInt(f[1]));
                    }
                    case "PTR" -> {
                        int node = RemotePtr.nodeId(Long.parseUnsignedLong(f[2], 16));
                        assertTrue(node == 1 || node == 2, "a block the clients made lies on node " + node + ": " + line);
                        placedOn.add(node);
                    }
                    case "REF" -> refs.add(line);
                    case "LOCKED" -> token = Long.parseLong(f[1]);
                    default -> { }
                }
            }
            assertEquals(Set.copyOf(CLIENTS), reported, "every client reported its segments");
            assertEquals(Set.of(1, 2), placedOn, "the clients' blocks are spread over both memory nodes");
            for (int id : CLIENTS) {
                assertTrue(one.node().directory().member(id).isPresent(), "client " + id + " is a member");
                assertTrue(one.node().directory().segments().stream().noneMatch(d -> d.nodeId() == id));
            }

            // what the clients wrote, read by the memory nodes
            assertEquals(30, one.atomicLong("mp-hits").get());
            assertEquals(3, two.longArray("mp-arr", 64).get(2));
            assertEquals(12.0, one.doubleArray("mp-w", 8).get(12 % 8));
            assertEquals(60, two.map("mp-map", String.class, Long.class).size());
            assertEquals(1307L, one.map("mp-map", String.class, Long.class).get("client-13-7"));
            assertEquals("v12", two.map("mp-leased", String.class, String.class,
                    io.membus.collections.DsmMapOptions.defaults().leasedReads(true)).get("client-12"));
            DsmQueue<String> jobs = two.queue("mp-jobs", String.class, 64);
            Set<String> taken = new TreeSet<>();
            for (int i = 0; i < 3; i++) {
                taken.add(jobs.poll(10, TimeUnit.SECONDS));
            }
            assertEquals(Set.of("job-from-11", "job-from-12", "job-from-13"), taken);
            assertEquals(3, refs.size());
            String[] ref = refs.get(0).split(" ");
            assertEquals("object-of-11", one.heap().open(Long.parseUnsignedLong(ref[1], 16),
                    Long.parseUnsignedLong(ref[2], 16), Codecs.strings()).get());
            DsmLock lock = two.lock("mp-lock");
            assertEquals(11, lock.holderNode());
            assertFalse(lock.tryLock(), "held by client 11");

            // every client dies at once: three of five members
            child.destroyForcibly();
            assertTrue(child.waitFor(10, TimeUnit.SECONDS));
            await(jvm, "the killed clients are removed", Duration.ofSeconds(60),
                    () -> one.node().directory().members().size() == 2 && two.node().directory().members().size() == 2);
            // past the resolver's stable-after (2 s here): a decision counting clients would have downed 1 and 2
            Thread.sleep(4_000);
            assertNull(one.node().downReason(), "node 1 stays up");
            assertNull(two.node().downReason(), "node 2 stays up");
            assertTrue(lock.tryLock(30, TimeUnit.SECONDS), "the dead client's lock is broken");
            assertTrue(lock.token() > token, "token " + lock.token() + " after the client's " + token);
            lock.unlock();
            assertEquals(31, two.atomicLong("mp-hits").incrementAndGet(), "and the memory nodes keep serving");
            assertNull(one.map("mp-map", String.class, Long.class).putIfAbsent("after", 1L));
            assertEquals(61, two.map("mp-map", String.class, Long.class).size());
        }
    }

    /** Polls every 20 ms; fails with the child's output at the deadline. */
    private static void await(TestJvm jvm, String what, Duration timeout, BooleanSupplier condition)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out after " + timeout.toMillis() + " ms waiting for: " + what
                        + "; child output:\n" + jvm.output(0));
            }
            Thread.sleep(20);
        }
    }
}
