package io.membus;

import com.typesafe.config.ConfigFactory;
import io.membus.alloc.Placement;
import io.membus.codec.CodecRegistry;
import io.membus.codec.RegistrationMismatchException;
import io.membus.codec.UnregisteredClassException;
import io.membus.coherence.RemoteRef;
import io.membus.collections.DsmMap;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static io.membus.MembusTest.config;
import static io.membus.MembusTest.freePort;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Codec registrations on real nodes (Pekko membership, local transport, one JVM): a
 * record holding List.of/Set.of/Map.of, an enum and a nested record is stored by one
 * node and read by another whose list came from code rather than config; a node whose
 * list differs is refused at start with the first difference; a memory node that
 * registers nothing is not compared.
 */
@Tag("slow") // in-JVM but over 20 s: the slow tier (failsafe, mvn verify)
class MembusCodecsTest {

    enum Status { NEW, PAID, SHIPPED }

    record Address(String city, Status lastSeen) {
    }

    record Shipment(String id, Status status, Address to, List<String> items, Set<String> tags,
                    Map<String, Integer> counts) {
    }

    record Other(int x) {
    }

    record Unlisted(int y) {
    }

    @Test
    void registeredRecordsTravelThroughMapsAndRefsAndADifferentListIsRefused() {
        int seed = freePort();
        String fabric = "facade-codecs-" + System.nanoTime();
        String listed = "membus.codec.classes = [\"" + Shipment.class.getName() + "\"]\n";
        try (Membus memory = Membus.start(ConfigFactory.parseString(config(1, seed, seed, fabric)));
             Membus two = Membus.start(ConfigFactory.parseString(config(2, freePort(), seed, fabric) + listed));
             Membus three = Membus.start(ConfigFactory.parseString(config(3, freePort(), seed, fabric)),
                     CodecRegistry.builder().register(Shipment.class))) {
            three.awaitMembers(3, Duration.ofSeconds(30));
            assertEquals(two.codecs().lines(), three.codecs().lines(), "config list and code list give the same ids");
            assertTrue(!memory.codecs().hasUserClasses());

            Shipment s = new Shipment("s-1", Status.SHIPPED, new Address("Oslo", Status.PAID),
                    List.of("a", "b", "c"), Set.of("fragile", "rush"), Map.of("a", 1, "b", 2));
            DsmMap<String, Shipment> written = two.map("shipments", String.class, Shipment.class);
            written.put("s-1", s);
            Shipment read = three.map("shipments", String.class, Shipment.class).get("s-1");
            assertEquals(s, read);
            assertSame(Status.SHIPPED, read.status());
            assertThrows(UnsupportedOperationException.class, () -> read.items().add("d"));
            assertThrows(UnsupportedOperationException.class, () -> read.tags().add("x"));
            assertThrows(UnsupportedOperationException.class, () -> read.counts().put("c", 3));

            RemoteRef<Shipment> ref = two.create(two.codec(Shipment.class), s, Placement.node(1));
            RemoteRef<Shipment> seen = three.heap().open(ref.ptr(), ref.generationHeader(), three.codec(Shipment.class));
            assertEquals(s, seen.get());
            Shipment paid = new Shipment("s-1", Status.PAID, s.to(), List.copyOf(s.items()), Set.of(), Map.of());
            ref.set(paid);
            assertEquals(paid, seen.get());

            UnregisteredClassException unlisted = assertThrows(UnregisteredClassException.class,
                    () -> two.map("others", String.class, Unlisted.class));
            assertTrue(unlisted.getMessage().contains("add \"" + Unlisted.class.getName() + "\" to membus.codec.classes"),
                    unlisted.getMessage());

            // a fourth node listing another class first: refused at start, naming the first difference
            RegistrationMismatchException e = assertThrows(RegistrationMismatchException.class,
                    () -> Membus.start(ConfigFactory.parseString(config(4, freePort(), seed, fabric) + listed),
                            CodecRegistry.builder().register(Other.class)));
            assertEquals("100 " + Other.class.getName() + " RecordSerializer", e.here());
            assertEquals("100 " + Shipment.class.getName() + " RecordSerializer", e.there());
            assertTrue(e.otherNode().equals("node 2") || e.otherNode().equals("node 3"), e.otherNode());
            assertTrue(e.getMessage().contains("index=" + CodecRegistry.jdkOnly().lines().size()), e.getMessage());
            assertEquals(s, three.map("shipments", String.class, Shipment.class).get("s-1"), "the cluster carries on");
        }
    }
    @Test
    void ofTwoNodesStartedAtOnceWithDifferentListsAtLeastOneIsRefused() throws Exception {
        int seed = freePort();
        String fabric = "facade-codecs-race-" + System.nanoTime();
        try (Membus memory = Membus.start(ConfigFactory.parseString(config(1, seed, seed, fabric)))) {
            java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(2);
            try {
                var a = pool.submit(() -> Membus.start(ConfigFactory.parseString(config(2, freePort(), seed, fabric)),
                        CodecRegistry.builder().register(Shipment.class)));
                var b = pool.submit(() -> Membus.start(ConfigFactory.parseString(config(3, freePort(), seed, fabric)),
                        CodecRegistry.builder().register(Other.class)));
                int refused = 0;
                for (var f : List.of(a, b)) {
                    try {
                        f.get(60, java.util.concurrent.TimeUnit.SECONDS).close();
                    } catch (java.util.concurrent.ExecutionException e) {
                        assertTrue(e.getCause() instanceof RegistrationMismatchException, String.valueOf(e.getCause()));
                        refused++;
                    }
                }
                assertTrue(refused >= 1, "both nodes started with different lists");
            } finally {
                pool.shutdownNow();
            }
        }
    }
    @Test
    void aDepartedNodesListNoLongerCounts() throws Exception {
        int seed = freePort();
        String fabric = "facade-codecs-left-" + System.nanoTime();
        try (Membus memory = Membus.start(ConfigFactory.parseString(config(1, seed, seed, fabric)))) {
            try (Membus old = Membus.start(ConfigFactory.parseString(config(2, freePort(), seed, fabric)),
                    CodecRegistry.builder().register(Shipment.class))) {
                old.awaitMembers(2, Duration.ofSeconds(30));
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (memory.node().status().members().contains(2)) { // node 2 left: wait until the cluster knows it
                assertTrue(System.nanoTime() < deadline, "node 2 still a member after 30 s");
                Thread.sleep(50);
            }
            try (Membus changed = Membus.start(ConfigFactory.parseString(config(3, freePort(), seed, fabric)),
                    CodecRegistry.builder().register(Other.class))) {
                assertEquals(Other.class, changed.codecs().registrations().keySet().iterator().next());
            }
        }
    }
}
