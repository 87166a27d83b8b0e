package io.membus;

import com.typesafe.config.ConfigFactory;
import io.membus.alloc.HeapUsage;
import io.membus.alloc.Placement;
import io.membus.alloc.PlacementException;
import io.membus.codec.Codecs;
import io.membus.coherence.RemoteRef;
import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmLock;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmMapOptions;
import io.membus.collections.DsmQueue;
import io.membus.core.RemotePtr;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A client (no segments, {@code membus.role = client}) uses every structure through
 * {@link Membus}, as the memory nodes do, and holds none of it: every block it makes
 * (named roots, map entries, queue elements, coherent objects) lies on a memory node,
 * and a placement that names the client is refused with a typed error that says where
 * blocks may go instead.
 */
class ClientTest {
    static final int CLIENT = 7;

    static String clientConfig(int id, int port, int seedPort, String fabric) {
        return MembusTest.config(id, port, seedPort, fabric) + "membus.role = client\n"
                + "membus.segments.count = 0\n" + "membus.heap.segments = []\n";
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aClientUsesEveryStructureThroughMembusAndNoBlockLandsOnIt() throws Exception {
        int seed = MembusTest.freePort();
        String fabric = "facade-client-" + System.nanoTime();
        try (Membus one = Membus.start(ConfigFactory.parseString(MembusTest.config(1, seed, seed, fabric)));
             Membus two = Membus.start(ConfigFactory.parseString(MembusTest.config(2, MembusTest.freePort(), seed,
                     fabric)));
             Membus client = Membus.start(ConfigFactory.parseString(clientConfig(CLIENT, MembusTest.freePort(), seed,
                     fabric)))) {
            for (Membus m : List.of(one, two, client)) {
                m.awaitMembers(3, Duration.ofSeconds(30));
            }
            assertTrue(client.node().config().isClient());
            List<Long> made = new ArrayList<>(); // pointers of blocks the client made

            DsmAtomicLong hits = client.atomicLong("hits");
            for (int i = 0; i < 10; i++) {
                hits.incrementAndGet();
            }
            one.atomicLong("hits").addAndGet(5);
            assertEquals(15, hits.get());
            assertEquals(15, two.atomicLong("hits").get());
            made.add(hits.address());

            client.longArray("arr", 100).addAll(new long[] {1, 2, 3});
            assertEquals(3, one.longArray("arr", 100).get(2));
            made.add(client.longArray("arr", 100).root().block().ptr());
            client.doubleArray("w", 8).set(7, 0.5);
            assertEquals(0.5, two.doubleArray("w", 8).get(7));
            made.add(client.doubleArray("w", 8).root().block().ptr());

            DsmMap<String, Long> orders = client.map("orders", String.class, Long.class);
            for (int i = 0; i < 50; i++) {
                assertNull(orders.put("order-" + i, (long) i));
            }
            assertEquals(49L, one.map("orders", String.class, Long.class).get("order-49"));
            two.map("orders", String.class, Long.class).put("order-0", 100L);
            assertEquals(100L, orders.get("order-0"));
            made.add(orders.root().block().ptr());

            DsmMap<String, String> leased = client.map("leased", String.class, String.class,
                    DsmMapOptions.defaults().leasedReads(true));
            leased.put("k", "v1");
            assertEquals("v1", leased.get("k"));
            assertEquals("v1", leased.get("k"), "a leased read, served from the client's cache");
            one.map("leased", String.class, String.class, DsmMapOptions.defaults().leasedReads(true)).put("k", "v2");
            assertEquals("v2", leased.get("k"), "the memory node's put invalidated the client's copy first");
            made.add(leased.root().block().ptr());

            DsmQueue<String> jobs = client.queue("jobs", String.class, 16);
            jobs.add("from-client");
            assertEquals("from-client", one.queue("jobs", String.class, 16).poll());
            two.queue("jobs", String.class, 16).add("from-node-2");
            assertEquals("from-node-2", jobs.poll(10, TimeUnit.SECONDS));
            made.add(jobs.root().block().ptr());

            DsmLock lock = client.lock("ledger");
            long token = lock.lockWithToken();
            assertEquals(CLIENT, one.lock("ledger").holderNode());
            assertFalse(two.lock("ledger").tryLock());
            lock.unlock();
            assertTrue(two.lock("ledger").tryLock(10, TimeUnit.SECONDS));
            assertTrue(two.lock("ledger").token() > token);
            two.lock("ledger").unlock();
            made.add(lock.root().block().ptr());

            RemoteRef<String> byDefault = client.create(Codecs.strings(), "d1");
            RemoteRef<String> byKey = client.create(Codecs.strings(), "k1", Placement.byKey("object-1"));
            RemoteRef<String> onTwo = client.create(Codecs.strings(), "n1", Placement.node(2));
            assertEquals(2, RemotePtr.nodeId(onTwo.ptr()));
            RemoteRef<String> seen = one.heap().open(byDefault.ptr(), byDefault.generationHeader(), Codecs.strings());
            assertEquals("d1", seen.get());
            assertEquals("d1", byDefault.get());
            seen.set("d2");
            assertEquals("d2", byDefault.get(), "node 1's write invalidated the client's cached copy");
            assertEquals("k1!", byKey.update(v -> v + "!"));
            made.add(byDefault.ptr());
            made.add(byKey.ptr());
            made.add(onTwo.ptr());
            // the client's own allocations, default placement: round robin over the memory nodes only
            for (int i = 0; i < 8; i++) {
                made.add(client.allocator().allocate(64).ptr());
            }

            for (long ptr : made) {
                assertTrue(Set.of(1, 2).contains(RemotePtr.nodeId(ptr)), "block " + RemotePtr.toString(ptr)
                        + " made by the client lies on a memory node");
            }
            assertEquals(Set.of(1, 2), made.stream().map(RemotePtr::nodeId).collect(java.util.stream.Collectors.toSet()),
                    "spread over both memory nodes");
            assertTrue(client.node().transport().table().all().isEmpty(), "the client exports no segment");
            for (Membus m : List.of(one, two, client)) {
                assertTrue(m.node().directory().segments().stream().noneMatch(d -> d.nodeId() == CLIENT));
            }
            for (HeapUsage.SegmentUsage row : one.allocator().usage().segments()) {
                assertTrue(row.nodeId() == 1 || row.nodeId() == 2, "heap row of node " + row.nodeId());
            }

            PlacementException local = assertThrows(PlacementException.class,
                    () -> client.allocator().allocate(64, Placement.local()));
            assertTrue(local.getMessage().contains("node " + CLIENT + " is a client"), local.getMessage());
            assertTrue(local.getMessage().contains("Placement.roundRobin()"), local.getMessage());
            PlacementException named = assertThrows(PlacementException.class,
                    () -> one.create(Codecs.strings(), "x", Placement.node(CLIENT)));
            assertEquals(CLIENT, named.nodeId());
            assertTrue(named.getMessage().contains("node " + CLIENT + " is a client")
                    && named.getMessage().contains("[1, 2]"), named.getMessage());
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aClientWithoutAnyMemoryNodeHeapGetsATypedErrorAndSucceedsOnceOneRuns() {
        int seed = MembusTest.freePort();
        String fabric = "facade-client-early-" + System.nanoTime();
        String noHeap = MembusTest.config(1, seed, seed, fabric) + "membus.heap.segments = []\n";
        try (Membus one = Membus.start(ConfigFactory.parseString(noHeap));
             Membus client = Membus.start(ConfigFactory.parseString(clientConfig(CLIENT, MembusTest.freePort(), seed,
                     fabric)))) {
            client.awaitMembers(2, Duration.ofSeconds(30));
            PlacementException e = assertThrows(PlacementException.class, () -> client.atomicLong("early"));
            assertTrue(e.getMessage().contains("no live member exports an allocator heap"), e.getMessage());
            try (Membus two = Membus.start(ConfigFactory.parseString(MembusTest.config(2, MembusTest.freePort(), seed,
                    fabric)))) {
                client.awaitMembers(3, Duration.ofSeconds(30));
                assertEquals(1, client.atomicLong("early").incrementAndGet());
                assertEquals(2, RemotePtr.nodeId(client.atomicLong("early").address()), "the only node with a heap");
                assertEquals(1, two.atomicLong("early").get());
            }
        }
    }
}
