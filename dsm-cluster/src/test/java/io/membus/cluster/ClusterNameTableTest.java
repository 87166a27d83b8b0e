package io.membus.cluster;

import io.membus.cluster.names.NameTable;
import io.membus.cluster.names.NameTableSettings;
import io.membus.core.RemotePtr;
import io.membus.core.error.NameTableFullException;
import io.membus.core.test.Seeds;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The name registry as a table in remote memory on a Pekko cluster of {@code local}
 * nodes ({@code membus.replication.backups = 1}, the table by default): the founder's system segment and register,
 * binds through {@link ClusterNames} on every node, and the arbiter hand-over window
 * closed: registries that each decide binds by themselves (as two nodes that each
 * believe they are the arbiter would) still let exactly one binder of a name win.
 */
@Tag("slow") // a Pekko cluster of three nodes in this JVM
class ClusterNameTableTest {
    private final List<DsmNode> nodes = new ArrayList<>();
    private final String fabric = "names-cluster-" + System.nanoTime();

    @AfterEach
    void closeAll() {
        for (DsmNode n : nodes) {
            n.close();
        }
    }

    private DsmNode start(int id, int port, int seedPort, String extra) {
        DsmNode n = DsmNode.start(NodeConfig.parse(TestClusters.config(id, port, seedPort, "local",
                "membus.transports.local.fabric = \"" + fabric + "\"\n"
                        + "membus.heap { segments = [1], chunk-size = 4KiB }\n" + extra)));
        nodes.add(n);
        return n;
    }

    private List<DsmNode> threeNodes(String extra) {
        int p1 = TestClusters.freePort();
        DsmNode n1 = start(1, p1, p1, extra);
        DsmNode n2 = start(2, 0, p1, extra);
        DsmNode n3 = start(3, 0, p1, extra);
        for (DsmNode n : List.of(n1, n2, n3)) {
            n.awaitMembers(3, Duration.ofSeconds(20));
        }
        return List.of(n1, n2, n3);
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void bindsGoThroughTheTableOfTheFounderAndTheHandOverWindowIsClosed() throws Exception {
        SplittableRandom random = Seeds.random("membus.names.seed", "ClusterNameTableTest");
        // the default switch (table = auto): replication on a transport that forwards changes chooses the table
        List<DsmNode> all = threeNodes("membus.replication.backups = 1\nmembus.names.capacity = 256\n");
        long table = RemotePtr.pack(1, NameTableSettings.SYSTEM_SEGMENT, 0);
        for (DsmNode n : all) {
            assertTrue(n.directory().segment(1, NameTableSettings.SYSTEM_SEGMENT).isPresent(),
                    "the founder's system segment is in every node's directory");
            assertFalse(n.directory().segment(2, NameTableSettings.SYSTEM_SEGMENT).isPresent(), "one founder");
        }
        long p1 = all.get(0).directory().segment(1, 1).orElseThrow().pointer(64);
        long p2 = all.get(1).directory().segment(2, 1).orElseThrow().pointer(64);
        assertEquals(p1, all.get(0).names().bind("settings", p1));
        assertEquals(p1, all.get(1).names().bind("settings", p2), "the first binder wins");
        for (DsmNode n : all) {
            assertEquals(Optional.of(p1), n.names().lookup("settings"));
            assertEquals(table, ((ClusterNames) n.names()).table().orElseThrow().pointer(),
                    "node " + n.nodeId() + " follows the register to the founder's table");
            assertEquals("table in replicated memory", ((ClusterNames) n.names()).status().get("registry"));
        }
        assertEquals(java.util.Map.of("settings", p1), all.get(2).names().bindings());
        assertFalse(all.get(2).names().unbind("settings", p2), "compare-and-unbind of another pointer");
        assertTrue(all.get(2).names().unbind("settings", p1));
        assertEquals(Optional.empty(), all.get(0).names().lookup("settings"));
        assertEquals(p2, all.get(1).names().bind("settings", p2), "bound again after the unbind");
        assertTrue(all.get(0).names().unbind("settings"));

        // the hand-over window: before, two agents that each saw themselves as the oldest member could both
        // acknowledge a bind of one name; here every node's registry decides its binds itself, concurrently
        // (the worst case of "two arbiters"), plus a second registry instance on node 2 wired to the same
        // register: every binder of a name still returns the one winner
        DsmNode n2 = all.get(1);
        org.apache.pekko.actor.ActorSystem system2 = field(n2, "system");
        ClusterMacs macs2 = field(n2, "macs");
        var dd2 = org.apache.pekko.cluster.ddata.DistributedData.get(system2);
        ClusterNames second = new ClusterNames(system2, dd2.replicator(),
                new java.util.concurrent.atomic.AtomicReference<>(java.util.Map.of()), Duration.ofSeconds(2), macs2);
        second.useSystemRoot(new SystemRoot(dd2.replicator(), dd2.selfUniqueAddress(), macs2, Duration.ofSeconds(2)),
                ptr -> NameTable.open(n2.remoteMemory(), n2::allocator, ptr, (name, root) -> {
                    ClusterMacs.Tag t = macs2.bind(name, root);
                    return new long[]{t.hi(), t.lo()};
                }, Duration.ofSeconds(2)), java.util.concurrent.ForkJoinPool.commonPool());
        List<io.membus.core.directory.NameRegistry> registries = List.of(all.get(0).names(), n2.names(), second,
                all.get(2).names());
        for (int round = 0; round < 20; round++) {
            String name = "race-" + round;
            List<CompletableFuture<Long>> binds = new ArrayList<>();
            Set<Long> offered = new HashSet<>();
            for (int r = 0; r < registries.size(); r++) {
                long mine = RemotePtr.pack(1 + (r % 3), 1, 8L * (1 + random.nextInt(4096)));
                offered.add(mine);
                binds.add(registries.get(r).bindAsync(name, mine).toCompletableFuture());
            }
            Set<Long> returned = new HashSet<>();
            for (CompletableFuture<Long> f : binds) {
                returned.add(f.get(30, TimeUnit.SECONDS));
            }
            assertEquals(1, returned.size(), name + ": every binder returns the one winner " + returned);
            assertTrue(offered.contains(returned.iterator().next()));
        }
        assertEquals(20, all.get(0).names().bindings().size());
        // a full table fails typed through the registry too
        NameTableFullException full = assertThrows(NameTableFullException.class, () -> {
            for (int i = 0; i < 300; i++) {
                all.get(2).names().bind("fill-" + i, p1);
            }
        });
        assertTrue(full.getMessage().contains("membus.names.capacity"), full.getMessage());
    }

    @SuppressWarnings("unchecked")
    private static <T> T field(DsmNode n, String name) throws ReflectiveOperationException {
        var f = DsmNode.class.getDeclaredField(name);
        f.setAccessible(true);
        return (T) f.get(n);
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void withoutReplicationTheFounderChoosesTheArbiterAndEveryNodeFollows() {
        List<DsmNode> all = threeNodes("membus.replication.backups = 0\n"); // auto, backups 0: the arbiter
        for (DsmNode n : all) {
            assertFalse(n.directory().segment(1, NameTableSettings.SYSTEM_SEGMENT).isPresent(), "no system segment");
        }
        long p1 = all.get(0).directory().segment(1, 1).orElseThrow().pointer(64);
        assertEquals(p1, all.get(1).names().bind("settings", p1));
        for (DsmNode n : all) {
            assertEquals(Optional.of(p1), n.names().lookup("settings"));
            assertEquals(Optional.empty(), ((ClusterNames) n.names()).table(), "the arbiter, not a table");
            assertEquals("arbiter (Distributed Data, membus-names)", ((ClusterNames) n.names()).status().get("registry"));
        }
    }
}
