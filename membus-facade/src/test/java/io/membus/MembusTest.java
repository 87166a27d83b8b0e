package io.membus;

import com.typesafe.config.ConfigFactory;
import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmLock;
import io.membus.collections.QueueOptions;
import io.membus.collections.QueueSlotSizeMismatchException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** Two real nodes (Pekko membership, local transport) in one JVM reach the same named structures. */
@Tag("slow") // over 20 s: the slow tier (failsafe, mvn verify), so that mvn test stays under 4 minutes
class MembusTest {
    static final String FAST = """
            membus.start-timeout = 30s
            membus.operation-timeout = 5s
            membus.connect-timeout = 5s
            membus.failure-detection {
              heartbeat-interval = 200ms
              acceptable-heartbeat-pause = 3s
              threshold = 8.0
              stable-after = 2s
              gossip-interval = 200ms
            }
            pekko.cluster.seed-node-timeout = 1s
            pekko.cluster.retry-unsuccessful-join-after = 500ms
            pekko.remote.artery.advanced.test-mode = on
            pekko.coordinated-shutdown.run-by-jvm-shutdown-hook = off
            """;

    static int freePort() {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Where a multi-process test keeps its files (segment files, shm rings, node configs):
     * a fresh directory under /dev/shm for {@code shm} where there is one, else under the
     * temp directory. The test removes it ({@link io.membus.core.test.TestFiles#deleteTree}).
     */
    static Path processDir(String transport, String prefix) throws IOException {
        Path root = transport.equals("shm") && Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm")
                : Path.of(System.getProperty("java.io.tmpdir"));
        return Files.createTempDirectory(root, prefix);
    }

    /**
     * The lines every node of a multi-process test starts with: node {@code id} of cluster
     * {@code cluster} on loopback {@code port}, seeded at {@code seed}, over {@code tcp} (with
     * the cluster's secret) or {@code shm} (its files under {@code dir}); the test adds its
     * segments' and role's lines.
     */
    static String processConfig(String cluster, int id, int port, int seed, String transport, Path dir) {
        String transportLines = transport.equals("shm")
                ? "membus.transports.shm.dir = \"" + dir + "\"\n"
                : "membus.secret = \"" + cluster + "-secret-0123456789\"\n"
                        + "membus.transports.tcp { port = 0, handshake-timeout = 30s }\n";
        return FAST + "membus.node-id = " + id + "\n"
                + "membus.cluster-name = " + cluster + "\n"
                + "membus.host = \"127.0.0.1\"\n"
                + "membus.port = " + port + "\n"
                + "membus.seed-nodes = [\"127.0.0.1:" + seed + "\"]\n"
                + "membus.transport = " + transport + "\n"
                + transportLines;
    }

    static String config(int id, int port, int seedPort, String fabric) {
        return FAST + "membus.node-id = " + id + "\n"
                + "membus.cluster-name = facade-test\n"
                + "membus.host = \"127.0.0.1\"\n"
                + "membus.port = " + port + "\n"
                + "membus.seed-nodes = [\"127.0.0.1:" + seedPort + "\"]\n"
                + "membus.transport = local\n"
                + "membus.transports.local.fabric = \"" + fabric + "\"\n"
                + "membus.segments.count = 2\n"
                + "membus.segments.size = 4MiB\n"
                + "membus.heap.segments = [1]\n";
    }

    @Test
    void twoNodesCountOnOneNamedCounter() {
        int seed = freePort();
        String fabric = "facade-" + System.nanoTime();
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed, fabric)));
             Membus two = Membus.start(ConfigFactory.parseString(config(2, freePort(), seed, fabric)))) {
            one.awaitMembers(2, Duration.ofSeconds(30));
            two.awaitMembers(2, Duration.ofSeconds(30));
            DsmAtomicLong a = one.atomicLong("hits");
            DsmAtomicLong b = two.atomicLong("hits");
            assertSame(a, one.atomicLong("hits"));
            for (int i = 0; i < 100; i++) {
                a.incrementAndGet();
                b.addAndGet(2);
            }
            assertEquals(300, a.get());
            assertEquals(300, b.get());
            assertEquals(a.address(), b.address());
            one.longArray("arr", 10).addAll(new long[] {1, 2, 3});
            assertEquals(3, two.longArray("arr", 10).get(2));
            two.doubleArray("d", 4).set(1, 2.5);
            assertEquals(2.5, one.doubleArray("d", 4).get(1));
            long t = one.lock("ledger").lockWithToken();
            assertEquals(1, two.lock("ledger").holderNode());
            one.lock("ledger").unlock();
            assertEquals(t + 1, two.lock("ledger").lockWithToken());
            two.lock("ledger").unlock();
            one.queue("jobs", String.class, 8).add("job-1");
            assertEquals("job-1", two.queue("jobs", String.class, 8).poll());
            // the slot size through the facade: kept in the queue, another one refused naming both
            assertEquals(1024, one.queue("frames", String.class, QueueOptions.capacity(4).inlineBytes(1024))
                    .inlineBytes());
            assertEquals(1032, two.queue("frames", String.class, 4).slotBytes());
            QueueSlotSizeMismatchException slot = assertThrows(QueueSlotSizeMismatchException.class,
                    () -> two.queue("frames", String.class, QueueOptions.capacity(4).slotBytes(264)));
            assertEquals(1032, slot.existingSlotBytes());
            assertEquals(264, slot.requestedSlotBytes());
            assertNull(one.map("orders", String.class, Long.class).put("order-42", 42L));
            assertEquals(42L, two.map("orders", String.class, Long.class).get("order-42"));
            assertSame(two.map("orders", String.class, Long.class), two.map("orders", String.class, Long.class));
            assertEquals(1, one.node().nodeId());
            assertSame(one.node().allocator(), one.allocator());
            assertSame(two.node().remoteMemory(), two.remoteMemory());
        }
    }

    /**
     * The lock's holder node leaves the cluster (its membership ends, as when it is
     * downed): a waiter on the other node breaks the lock with a larger token.
     */
    @Test
    void aLockHeldByANodeThatLeftIsTakenOverWithALargerToken() throws Exception {
        int seed = freePort();
        String fabric = "facade-" + System.nanoTime();
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed, fabric)));
             Membus two = Membus.start(ConfigFactory.parseString(config(2, freePort(), seed, fabric)))) {
            one.awaitMembers(2, Duration.ofSeconds(30));
            two.awaitMembers(2, Duration.ofSeconds(30));
            // a lock whose root lives on the node that stays
            String name = null;
            for (int i = 0; i < 64 && name == null; i++) {
                if (two.lock("ledger-" + i).root().block().nodeId() == 2) {
                    name = "ledger-" + i;
                }
            }
            assertNotNull(name, "no name placed on node 2 among 64");
            long held = one.lock(name).lockWithToken();
            assertFalse(two.lock(name).tryLock(), "held by node 1");
            one.close();
            DsmLock lock = two.lock(name);
            assertTrue(lock.tryLock(60, TimeUnit.SECONDS), "the lock of a node that left is broken");
            assertTrue(lock.token() > held, "token " + lock.token() + " after " + held);
            lock.unlock();
        }
    }

    @Test
    void theCoherentHeapIsConfiguredFromMembusCoherenceAndSharedByEveryNode() {
        int seed = freePort();
        String fabric = "facade-heap-" + System.nanoTime();
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed, fabric)
                + "membus.coherence { clock-bound = 2ms, max-lease = 1s }\n"));
             Membus two = Membus.start(ConfigFactory.parseString(config(2, freePort(), seed, fabric)))) {
            one.awaitMembers(2, Duration.ofSeconds(30));
            two.awaitMembers(2, Duration.ofSeconds(30));
            assertEquals(Duration.ofMillis(2), one.heap().config().clockBound());
            assertEquals(Duration.ofMillis(5), two.heap().config().clockBound(), "the default");
            io.membus.coherence.RemoteRef<String> a = one.create(io.membus.codec.Codecs.strings(), "v1",
                    io.membus.alloc.Placement.node(2));
            io.membus.coherence.RemoteRef<String> b = two.heap().open(a.ptr(), a.generationHeader(),
                    io.membus.codec.Codecs.strings());
            assertEquals("v1", b.get());
            a.set("v2");
            assertEquals("v2", b.get(), "node 2's cached copy was invalidated by node 1's write");
            assertEquals("v2!", b.update(v -> v + "!"));
            assertEquals("v2!", a.get());
        }
        io.membus.core.error.DsmConfigException bad = org.junit.jupiter.api.Assertions.assertThrows(
                io.membus.core.error.DsmConfigException.class, () -> Membus.coherenceConfig(ConfigFactory.parseString(
                        "membus.coherence.min-lease = banana"), Duration.ofSeconds(5)));
        assertTrue(bad.getMessage().contains("membus.coherence.min-lease"), bad.getMessage());
    }

    @org.junit.jupiter.api.Test
    void maxValueSizeComesFromTheConfigAndABadOneIsRefusedNamingTheKey() {
        assertEquals(io.membus.collections.DsmCollections.DEFAULT_MAX_VALUE_SIZE,
                Membus.maxValueSize(ConfigFactory.empty()), "reference.conf's default");
        assertEquals(1L << 20, Membus.maxValueSize(ConfigFactory.parseString(
                "membus.collections.max-value-size = 1MiB")));
        for (String bad : new String[] {"banana", "0", "32MiB"}) {
            io.membus.core.error.DsmConfigException e = org.junit.jupiter.api.Assertions.assertThrows(
                    io.membus.core.error.DsmConfigException.class, () -> Membus.maxValueSize(ConfigFactory.parseString(
                            "membus.collections.max-value-size = " + bad)));
            assertTrue(e.getMessage().contains("membus.collections.max-value-size"), e.getMessage());
        }
    }

    @Test
    void namedStructuresAndCoherentObjectsAreDestroyedAndTheirNamesGivenBack() throws Exception {
        int seed = freePort();
        String fabric = "facade-life-" + System.nanoTime();
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed, fabric)));
             Membus two = Membus.start(ConfigFactory.parseString(config(2, freePort(), seed, fabric)
                     + "membus.collections.max-value-size = 1KiB\n"))) {
            one.awaitMembers(2, Duration.ofSeconds(30));
            two.awaitMembers(2, Duration.ofSeconds(30));
            assertEquals(Duration.ofSeconds(30), one.collections().destroyGrace(), "reference.conf's default");

            // a named coherent object: created once, found by name on the other node
            io.membus.coherence.RemoteRef<String> a = one.ref("config", String.class, () -> "v1");
            io.membus.coherence.RemoteRef<String> b = two.ref("config", io.membus.codec.Codecs.strings());
            assertEquals("v1", b.get());
            assertEquals("v1", two.ref("config", String.class, () -> "ignored: exists").get());
            a.set("v2");
            assertEquals("v2", b.get());
            assertTrue(two.destroy("config"));
            org.junit.jupiter.api.Assertions.assertThrows(io.membus.alloc.UseAfterFreeException.class, a::get,
                    "the object is freed at once: every handle fails typed");
            org.junit.jupiter.api.Assertions.assertThrows(io.membus.collections.CollectionArgumentException.class,
                    () -> one.ref("config", io.membus.codec.Codecs.strings()), "the name is free");
            assertEquals("v3", one.ref("config", String.class, () -> "v3").get());

            // a counter destroyed through the facade; the other node's handle fails typed, the name is reusable
            one.atomicLong("hits").addAndGet(3);
            io.membus.collections.DsmAtomicLong old = two.atomicLong("hits");
            assertEquals(3, old.get());
            assertTrue(one.destroy("hits"));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (true) {
                try {
                    old.get();
                } catch (io.membus.collections.StructureGoneException e) {
                    assertTrue(e.getMessage().contains("name=hits"), e.getMessage());
                    break;
                }
                assertTrue(System.nanoTime() < deadline, "the old handle still works 5 s after the destroy");
                Thread.sleep(10);
            }
            assertEquals(0, two.atomicLong("hits").get());

            // node 2's own limit (1 KiB) refuses a larger value before anything is claimed
            io.membus.core.error.ValueTooLargeException big = org.junit.jupiter.api.Assertions.assertThrows(
                    io.membus.core.error.ValueTooLargeException.class,
                    () -> two.map("blobs", String.class, byte[].class).put("k", new byte[2000]));
            assertEquals(1024, big.limit());
            one.map("blobs", String.class, byte[].class).put("k", new byte[2000]);
        }
    }

    /**
     * Unknown keys are refused at a client's start as at a memory node's (issue 29): the
     * facade's own sections (membus.codec, membus.collections, membus.coherence) are known to
     * the check, and a misspelt key there is named with the closest known key and the file
     * and line before anything starts.
     */
    @Test
    void aClientsMisspeltKeysAreRefusedAtStartWithTheClosestKeyAndTheFile(@org.junit.jupiter.api.io.TempDir
            java.nio.file.Path dir) throws Exception {
        java.nio.file.Path f = dir.resolve("client.conf");
        String client = """
                membus {
                  node-id = 100
                  role = client
                  segments.count = 0
                  codec.clases = ["java.util.UUID"]
                  collections.max-value-sise = 1MiB
                }
                """;
        java.nio.file.Files.writeString(f, client);
        io.membus.core.error.DsmConfigException e = assertThrows(io.membus.core.error.DsmConfigException.class,
                () -> Membus.start(f));
        assertEquals("membus.codec.clases", e.key(), e.getMessage());
        assertTrue(e.allowed().contains("closest known key: membus.codec.classes;"), e.getMessage());
        assertTrue(e.allowed().contains("client.conf: 5"), "names the file and line: " + e.getMessage());
        assertTrue(e.allowed().contains("also unknown: membus.collections.max-value-sise (closest:"
                + " membus.collections.max-value-size"), e.getMessage());
        assertFalse(e.mayHaveRun());
        // spelt right, the same keys pass the check: the client's config is read
        java.nio.file.Files.writeString(f, client.replace("clases", "classes").replace("sise", "size"));
        io.membus.cluster.NodeConfig ok = io.membus.cluster.NodeConfig.load(f);
        assertTrue(ok.isClient());
        assertEquals(1L << 20, Membus.maxValueSize(ok.raw()));
    }

    @Test
    void theCoherentHeapsCacheBoundIsReadFromTheConfigAndABadOneNamesItsKey() {
        io.membus.coherence.CoherenceConfig c = Membus.coherenceConfig(ConfigFactory.parseString(
                "membus.coherence { cache-max-entries = 100, cache-max-bytes = 1MiB }"), Duration.ofSeconds(5));
        assertEquals(100, c.cacheMaxEntries());
        assertEquals(1L << 20, c.cacheMaxBytes());
        io.membus.coherence.CoherenceConfig d = Membus.coherenceConfig(ConfigFactory.empty(), Duration.ofSeconds(5));
        assertEquals(io.membus.coherence.CoherenceConfig.DEFAULT_CACHE_MAX_ENTRIES, d.cacheMaxEntries());
        assertEquals(io.membus.coherence.CoherenceConfig.DEFAULT_CACHE_MAX_BYTES, d.cacheMaxBytes());
        for (String[] bad : new String[][] {{"cache-max-entries", "0"}, {"cache-max-entries", "lots"},
                {"cache-max-bytes", "-1"}, {"cache-max-bytes", "banana"}}) {
            io.membus.core.error.DsmConfigException e = org.junit.jupiter.api.Assertions.assertThrows(
                    io.membus.core.error.DsmConfigException.class, () -> Membus.coherenceConfig(
                            ConfigFactory.parseString("membus.coherence." + bad[0] + " = " + bad[1]),
                            Duration.ofSeconds(5)));
            assertEquals("membus.coherence." + bad[0], e.key(), e.getMessage());
        }
    }
}
