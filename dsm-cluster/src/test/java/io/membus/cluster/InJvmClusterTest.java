package io.membus.cluster;

import io.membus.alloc.BlockRef;
import io.membus.alloc.Placement;
import io.membus.alloc.UseAfterFreeException;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.directory.PeerInfo;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Address;
import org.apache.pekko.remote.artery.ArteryTransport;
import org.apache.pekko.remote.transport.ThrottlerTransportAdapter;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import static io.membus.cluster.TestClusters.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Three nodes in one JVM over the local transport: formation, directory, names, duplicates, partition. */
@Tag("slow") // in-JVM but over 20 s: the slow tier (failsafe, mvn verify)
class InJvmClusterTest {
    private final List<DsmNode> nodes = new ArrayList<>();
    private final String fabric = "cluster-test-" + System.nanoTime();

    @AfterEach
    void closeAll() {
        for (DsmNode n : nodes) {
            n.close();
        }
    }

    private DsmNode start(String transport, int id, int port, int seedPort) {
        String props = transport.equals("local")
                ? "membus.transports.local.fabric = \"" + fabric + "\"\n"
                // tcp, the default transport: peers authenticate with the cluster secret, ephemeral ports
                : "membus.secret = \"in-jvm-test-secret\"\nmembus.transports.tcp.port = \"0\"\n";
        // node 3 exports its meters as JMX MBeans (membus.metrics.jmx, off by default: nodes 1 and 2 do not)
        DsmNode n = DsmNode.start(NodeConfig.parse(TestClusters.config(id, port, seedPort, transport,
                props + "membus.heap { segments = [1], chunk-size = 4KiB }\n"
                        + (id == 3 ? "membus.metrics.jmx = true\n" : ""))));
        nodes.add(n);
        return n;
    }

    private List<DsmNode> threeNodes() {
        return threeNodes("local");
    }

    private List<DsmNode> threeNodes(String transport) {
        int p1 = TestClusters.freePort();
        long t0 = System.nanoTime();
        DsmNode n1 = start(transport, 1, p1, p1);
        DsmNode n2 = start(transport, 2, 0, p1);
        DsmNode n3 = start(transport, 3, 0, p1);
        for (DsmNode n : List.of(n1, n2, n3)) {
            n.awaitMembers(3, Duration.ofSeconds(20));
        }
        System.out.printf("MEASURE three nodes started one after another, directory converged on all: %d ms%n",
                (System.nanoTime() - t0) / 1_000_000);
        return List.of(n1, n2, n3);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void threeNodesOverTcpFormTheDirectoryConvergesVerbsReachEveryNodeAndTheyCloseCleanly() throws Exception {
        List<DsmNode> all = threeNodes("tcp");
        for (DsmNode n : all) {
            assertEquals("tcp", n.transport().name());
        }
        for (DsmNode n : all) {
            // 2 per node, and with replication on (the default) the founder's system segment holding the name table
            assertEquals(6, n.directory().segments().stream()
                    .filter(d -> d.index() != io.membus.cluster.names.NameTableSettings.SYSTEM_SEGMENT).count(),
                    n.status().toString());
            for (int id = 1; id <= 3; id++) {
                SegmentDescriptor d = n.directory().segment(id, 1).orElseThrow();
                assertEquals(65536, d.size());
                assertEquals(all.get(id - 1).incarnation(), d.incarnation());
                assertEquals(all.get(id - 1).localSegment(1).remoteKey(), d.remoteKey());
            }
            assertEquals(3, n.status().members().size(), n.status().toString());
        }
        // every node adds to a counter on node 3 and on node 1
        long counter3 = all.get(2).directory().segment(3, 0).orElseThrow().pointer(8);
        long counter1 = all.get(2).directory().segment(1, 0).orElseThrow().pointer(16);
        for (DsmNode n : all) {
            for (int i = 0; i < 10; i++) {
                n.remoteMemory().fetchAndAdd(counter3, 1);
                n.remoteMemory().fetchAndAdd(counter1, 2);
            }
        }
        assertEquals(30, all.get(2).localSegment(0).readLong(8));
        assertEquals(60, all.get(0).localSegment(0).readLong(16));

        // two-sided messages by node id: node 1 asks node 3, node 2 tells it, a stranger is unavailable
        all.get(2).messaging().register((short) 40, "test-echo", (from, p) -> new byte[]{(byte) from, p[0]});
        org.junit.jupiter.api.Assertions.assertArrayEquals(new byte[]{1, 9},
                all.get(0).messaging().request(3, (short) 40, new byte[]{9}));
        all.get(1).messaging().send(3, (short) 40, new byte[]{8});
        assertThrows(NodeUnavailableException.class, () -> all.get(0).messaging().send(77, (short) 40, new byte[1]));

        // the allocator: node 1 allocates on node 3, node 2 reads it, node 3 frees it
        BlockRef block = all.get(0).allocator().allocate(100, Placement.node(3));
        assertEquals(3, block.nodeId());
        all.get(0).allocator().writeLong(block, 0, 0xfeedL);
        BlockRef shared = BlockRef.of(block.ptr(), block.header(), block.capacity());
        assertEquals(0xfeedL, all.get(1).allocator().readLong(shared, 0));
        all.get(2).allocator().free(shared);
        assertThrows(UseAfterFreeException.class, () -> all.get(1).allocator().readLong(shared, 0));
        BlockRef large = all.get(1).allocator().allocate(3 * 4096, Placement.node(1));
        assertTrue(large.isLarge());
        assertEquals(30, all.get(0).remoteMemory().readLong(counter3));

        // membus status: ask node 2 from outside the cluster
        String seed = all.get(1).memberAddress().replaceAll("^.*@", "");
        ClusterMessage.StatusReply reply = ClusterStatus.query(seed, "test", "127.0.0.1", Duration.ofSeconds(10),
                all.get(1).config());
        assertEquals(2, reply.fromNode());
        assertEquals(3, reply.members().size());
        System.out.println(reply); // the table of this data: samples' StatusTextTest
        for (DsmNode n : all) {
            assertTrue(reply.members().stream().anyMatch(m -> m.address().equals(n.memberAddress())
                    && m.entry() != null && m.entry().incarnation() == n.incarnation()), reply.toString());
        }
        assertEquals(3, reply.members().stream().filter(m -> m.status().equals("Up")).count(), reply.toString());
        assertEquals(6, reply.members().stream().flatMap(m -> m.entry().segments().stream())
                .filter(d -> d.index() != io.membus.cluster.names.NameTableSettings.SYSTEM_SEGMENT).count());
        assertEquals(384L << 10, reply.members().stream().flatMap(m -> m.entry().segments().stream())
                .filter(d -> d.index() != io.membus.cluster.names.NameTableSettings.SYSTEM_SEGMENT)
                .mapToLong(SegmentDescriptor::size).sum(), "384 KiB exported besides the name table");
        assertEquals(3, all.get(0).directory().members().size(), "the status query did not join the cluster");
        assertEquals("", reply.heapProblem(), "heap segments (global allocator) read by node 2");
        assertEquals(3, reply.heap().stream().filter(h -> h.segment() == 1 && h.chunkSize() == 4096
                && h.nodeId() >= 1 && h.nodeId() <= 3).count(), reply.heap().toString());
        // node 3's message counters: the echo channel handled one request and one one-way message,
        // and a status section a layer above registered (asked afresh for every reply)
        java.util.concurrent.atomic.AtomicInteger asked = new java.util.concurrent.atomic.AtomicInteger();
        all.get(2).statusSection("test-layer", () -> java.util.Map.of("asked", Integer.toString(asked.incrementAndGet())));
        ClusterMessage.StatusReply three = ClusterStatus.query(all.get(2).memberAddress().replaceAll("^.*@", ""), "test",
                "127.0.0.1", Duration.ofSeconds(10), all.get(2).config());
        ClusterMessage.ChannelRow echo = three.channels().stream().filter(c -> c.name().equals("test-echo"))
                .findFirst().orElseThrow(() -> new AssertionError("no test-echo channel in " + three.channels()));
        assertEquals(40, echo.channel());
        assertEquals(2, echo.messagesIn(), echo.toString());
        assertEquals(3, three.fromNode(), "message channels of node 3");
        assertEquals(List.of(new StatusSection("test-layer", java.util.Map.of("asked", "1"))), three.sections().stream()
                .filter(sec -> sec.name().equals("test-layer")).toList());
        // node 3's verb metrics: its ten blocking fetch-and-adds on node 1 crossed the tcp transport
        java.util.Map<String, String> verbs = three.sections().stream().filter(sec -> sec.name().equals("verbs"))
                .findFirst().orElseThrow(() -> new AssertionError("no verbs section in " + three.sections())).facts();
        assertEquals("tcp", verbs.get("transport"), verbs.toString());
        assertTrue(verbs.getOrDefault("node-1", "").matches(".*faa [1-9][0-9]*.* timeouts=0 errors=0 .*latency p50=\\d.*"),
                verbs.toString());
        long faaToOne = all.get(2).verbMetrics().snapshot(1).verbs()[io.membus.core.transport.VerbObserver.FAA];
        assertTrue(faaToOne >= 10, "fetch-and-adds of node 3 on node 1 counted: " + faaToOne);
        // and the same meters as JMX MBeans under membus.node3, which asked for them; none of node 1's (the default)
        javax.management.MBeanServer jmx = java.lang.management.ManagementFactory.getPlatformMBeanServer();
        java.util.Set<javax.management.ObjectName> mbeans = jmx.queryNames(new javax.management.ObjectName(
                "membus.node3:*"), null);
        assertTrue(mbeans.stream().anyMatch(o -> o.toString().toLowerCase(java.util.Locale.ROOT).contains("verbs")),
                mbeans.toString());
        assertEquals(java.util.Set.of(), jmx.queryNames(new javax.management.ObjectName("membus.node1:*"), null),
                "JMX export is off by default");
        assertTrue(reply.heap().stream().anyMatch(h -> h.nodeId() == 1 && h.segment() == 1
                && h.chunksByOwner().containsKey(2)), "node 2 holds chunks of node 1 for its large object:\n"
                + reply.heap());
        assertEquals(3, reply.members().stream().filter(m -> m.address().matches("pekko://test@127\\.0\\.0\\.1:\\d+")
                && m.status().equals("Up") && m.reachable() && m.entry().transport().equals("tcp")).count(),
                "one Up tcp row per node:\n" + reply.members());
        all.get(1).allocator().free(large);

        // they close cleanly: every node leaves, its tcp threads and actor system stop, nobody was downed
        for (DsmNode n : all) {
            n.close();
        }
        for (DsmNode n : all) {
            assertEquals(null, n.downReason(), "node " + n.nodeId() + " left, it was not downed");
            for (int other = 1; other <= 3; other++) {
                // members that left gracefully, and peers seen 'removed' while this node exits, are never fenced
                assertTrue(!n.transport().isFenced(other), "node " + n.nodeId() + " fenced node " + other);
            }
        }
        await("no tcp transport or actor system threads left", Duration.ofSeconds(20), () -> Thread.getAllStackTraces()
                .keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .noneMatch(t -> t.startsWith("membus-tcp-") || t.startsWith("test-pekko")));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void namesAreReplicatedAndTheFirstBinderWins() throws Exception {
        List<DsmNode> all = threeNodes();
        long p2 = RemotePtr.pack(2, 0, 64);
        long p3 = RemotePtr.pack(3, 0, 128);
        assertEquals(p2, all.get(1).names().bind("queue", p2));
        assertEquals(p2, all.get(2).names().bind("queue", p3), "second binder gets the first binding");
        for (DsmNode n : all) {
            assertEquals(p2, n.names().lookup("queue").orElseThrow());
            await("name replicated to node " + n.nodeId(), Duration.ofSeconds(10),
                    () -> n.names().bindings().containsKey("queue"));
        }
        assertTrue(all.get(0).names().lookup("nothing-here").isEmpty());
        // the async forms agree with the blocking ones
        assertEquals(p2, all.get(0).names().bindAsync("queue", p3).toCompletableFuture().get(20, TimeUnit.SECONDS));
        assertEquals(p2, all.get(2).names().lookupAsync("queue").toCompletableFuture().get(20, TimeUnit.SECONDS)
                .orElseThrow());
        assertTrue(all.get(1).names().unbindAsync("never-bound").toCompletableFuture().get(20, TimeUnit.SECONDS)
                .equals(Boolean.FALSE));

        // concurrent binds of one name from every node, several threads each: exactly one pointer wins everywhere
        List<java.util.concurrent.CompletableFuture<Long>> binds = new ArrayList<>();
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(9);
        try {
            java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
            for (DsmNode n : all) {
                for (int t = 0; t < 3; t++) {
                    long mine = RemotePtr.pack(n.nodeId(), 0, 8L * (t + 1));
                    binds.add(java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                        try {
                            go.await();
                        } catch (InterruptedException e) {
                            throw new IllegalStateException(e);
                        }
                        return n.names().bind("race", mine);
                    }, pool));
                }
            }
            go.countDown();
            long winner = binds.get(0).join();
            for (var b : binds) {
                assertEquals(winner, b.join(), "every concurrent binder is told the same winner");
            }
            for (DsmNode n : all) {
                assertEquals(winner, n.names().lookup("race").orElseThrow());
            }
        } finally {
            pool.shutdownNow();
        }
        // only the oldest Up member arbitrates: another agent refuses a bind instead of becoming a second arbiter
        Object refused = org.apache.pekko.pattern.Patterns.ask(systemOf(all.get(2)).actorSelection(
                        all.get(2).memberAddress() + "/user/" + ClusterAgent.NAME),
                new ClusterMessage.Bind("elsewhere", p3, 0, 0), Duration.ofSeconds(10)).toCompletableFuture()
                .get(15, TimeUnit.SECONDS);
        assertTrue(((ClusterMessage.NameReply) refused).error().contains("node 3 is not the name arbiter"),
                refused.toString());
        assertTrue(all.get(0).names().lookup("elsewhere").isEmpty());
        assertThrows(InvalidNameException.class, () -> all.get(0).names().bind("", p2),
                "an empty name is refused with a typed error");
        assertTrue(all.get(2).names().unbind("queue"));
        assertTrue(all.get(1).names().lookup("queue").isEmpty() || !all.get(1).names().unbind("queue"));
        assertEquals(p3, all.get(0).names().bind("queue", p3));
        // compare-and-unbind: a binding to another pointer is left alone; the expected one is removed
        assertFalse(all.get(1).names().unbind("queue", p2), "decided on the majority's bindings: bound to p3");
        assertTrue(all.get(1).names().unbindAsync("queue", p3).toCompletableFuture().get(20, TimeUnit.SECONDS));
        assertEquals(p2, all.get(2).names().bind("queue", p2), "the name is free again");
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aSecondNodeWithATakenIdIsRefused() {
        List<DsmNode> all = threeNodes();
        int seed = Integer.parseInt(all.get(0).memberAddress().replaceAll(".*:", ""));
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> DsmNode.start(NodeConfig.parse(
                TestClusters.config(2, 0, seed, "local", "membus.transports.local.fabric = \""
                        + fabric + "-other\"\n"))));
        assertEquals("membus.node-id", e.key());
        assertTrue(e.getMessage().contains("node 2 is member pekko://test@127.0.0.1:"), e.getMessage());
        // the running node 2 is untouched
        for (DsmNode n : all) {
            assertEquals(3, n.directory().members().size());
        }
        all.get(0).remoteMemory().writeLong(all.get(0).directory().segment(2, 0).orElseThrow().pointer(0), 42);
        assertEquals(42, all.get(1).localSegment(0).readLong(0));
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void aPartitionedMinorityIsDownedAndTheMajorityKeepsWorking() throws Exception {
        List<DsmNode> all = threeNodes();
        DsmNode n1 = all.get(0);
        DsmNode n2 = all.get(1);
        DsmNode n3 = all.get(2);
        List<String> removed = new CopyOnWriteArrayList<>();
        n1.directory().addListener(new DirectoryListener() {
            @Override
            public void memberRemoved(PeerInfo member, String reason) {
                removed.add(member.nodeId() + ": " + reason);
            }
        });
        long onThree = n1.directory().segment(3, 0).orElseThrow().pointer(0);
        n1.remoteMemory().writeLong(onThree, 7);
        // the copy must be known in sync on both sides before the cut: a claim still on its way when node 3 is cut off
        // leaves the group with no in-sync copy in the majority's view (LOST, not promoted; seen under load)
        for (DsmNode n : List.of(n1, n2)) {
            await("node 3's segment 0 has an in-sync copy in node " + n.nodeId() + "'s view", Duration.ofSeconds(30),
                    () -> n.directory().group(3, 0).filter(v -> v.inSync().length == 1).isPresent());
        }

        long cut = System.nanoTime();
        blackhole(n3, n1);
        blackhole(n3, n2);

        await("node 3 downed by the split-brain resolver", Duration.ofSeconds(30), n3::isDown);
        System.out.printf("MEASURE partition -> minority node 3 downs itself: %d ms%n", (System.nanoTime() - cut) / 1_000_000);
        assertTrue(n3.downReason().contains("downed"), n3.downReason());
        assertTrue(n3.status().isDown() && n3.status().nodeId() == 3, n3.status().toString());
        await("node 3 gone from node 1's and node 2's directory", Duration.ofSeconds(30),
                () -> n1.directory().member(3).isEmpty() && n2.directory().member(3).isEmpty());
        await("node 3 fenced on nodes 1 and 2", Duration.ofSeconds(10),
                () -> n1.transport().isFenced(3) && n2.transport().isFenced(3));
        System.out.printf("MEASURE partition -> node 3 fenced and gone from the majority's directory: %d ms%n",
                (System.nanoTime() - cut) / 1_000_000);
        assertTrue(removed.stream().anyMatch(r -> r.startsWith("3: ")), removed.toString());

        // with replication (the default) node 3's segment lives on: its copy on node 1 or 2 is promoted and serves
        // it, with the write acknowledged before the partition
        await("node 3's segment 0 served by its promoted copy", Duration.ofSeconds(30), () -> n1.directory()
                .group(3, 0).filter(v -> v.state() == io.membus.core.directory.ReplicaGroupView.State.SERVING
                        && v.primary() != 3).isPresent());
        assertEquals(7, n1.remoteMemory().readLong(onThree));
        NodeUnavailableException c = assertThrows(NodeUnavailableException.class, () -> RemoteMemory.await(
                n1.transport().connect(new PeerInfo(3, n3.incarnation(), "local:" + fabric)), Duration.ofSeconds(5)));
        assertTrue(c.getMessage().contains("fenced"), c.getMessage());

        // the majority keeps working: verbs and a majority write
        long onTwo = n1.directory().segment(2, 0).orElseThrow().pointer(8);
        assertEquals(0, n1.remoteMemory().fetchAndAdd(onTwo, 5));
        assertEquals(5, n2.localSegment(0).readLong(8));
        assertEquals(onTwo, n2.names().bind("after-partition", onTwo));
        assertEquals(onTwo, n1.names().lookup("after-partition").orElseThrow());
    }

    /**
     * Drops every Artery message between the two nodes, both ways (Pekko's test-mode
     * blackhole, what its multi-node tests use; the command types still live in the
     * deprecated classic throttler, hence the suppression).
     */
    @SuppressWarnings("deprecation")
    private static void blackhole(DsmNode a, DsmNode b) throws Exception {
        ActorSystem sa = systemOf(a);
        Address to = org.apache.pekko.actor.AddressFromURIString.parse(b.memberAddress());
        ArteryTransport t = (ArteryTransport) ((org.apache.pekko.remote.RemoteActorRefProvider)
                ((org.apache.pekko.actor.ExtendedActorSystem) sa).provider()).transport();
        scala.concurrent.Future<Object> f = t.managementCommand(new ThrottlerTransportAdapter.SetThrottle(to,
                ThrottlerTransportAdapter.bothDirection(), ThrottlerTransportAdapter.blackholeThrottleMode()));
        scala.concurrent.Await.result(f, scala.concurrent.duration.Duration.create(5, TimeUnit.SECONDS));
    }

    private static ActorSystem systemOf(DsmNode n) throws Exception {
        var f = DsmNode.class.getDeclaredField("system");
        f.setAccessible(true);
        return (ActorSystem) f.get(n);
    }
}
