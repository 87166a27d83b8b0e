package io.membus.cluster;

import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupClaim;
import io.membus.core.replication.GroupId;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static io.membus.cluster.TestClusters.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Replica groups in the cluster (docs/replication.md §1, §2.2, §10): claims published by
 * the nodes make the same group views on every node's directory, across a primary's
 * leave and a promotion; {@code membus.replication.backups} is compared at join and
 * refused on a transport that cannot replicate. In-JVM nodes over {@code local}.
 */
@Tag("slow") // in-JVM nodes, several starts: the slow tier (failsafe, mvn verify)
class ReplicationClusterTest {
    private final List<DsmNode> nodes = new ArrayList<>();
    private final String fabric = "replication-test-" + System.nanoTime();

    @AfterEach
    void closeAll() {
        for (DsmNode n : nodes) {
            n.close();
        }
    }

    private DsmNode start(int id, int port, int seedPort, String transport, String extra) {
        DsmNode n = DsmNode.start(NodeConfig.parse(TestClusters.config(id, port, seedPort, transport,
                "membus.transports.local.fabric = \"" + fabric + "\"\n" + extra)));
        nodes.add(n);
        return n;
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aMemoryNodeWhoseBackupsDifferIsRefusedAtJoinAndAClientIgnoresTheSetting() {
        int p1 = TestClusters.freePort();
        DsmNode one = start(1, p1, p1, "local", "membus.replication.backups = 0\n");
        DsmConfigException e = assertThrows(DsmConfigException.class,
                () -> start(2, 0, p1, "local", "membus.replication.backups = 1\n"));
        assertEquals("membus.replication.backups", e.key(), e.getMessage());
        assertEquals("1", e.value(), e.getMessage());
        assertTrue(e.getMessage().contains("node 1 has membus.replication.backups = 0 and node 2 has 1"),
                e.getMessage());
        DsmNode client = start(11, 0, p1, "local", "membus.role = client\nmembus.segments.count = 0\n"
                + "membus.replication.backups = 3\n");
        DsmNode three = start(3, 0, p1, "local", "membus.replication.backups = 0\n"); // node 1's value: it joins
        for (DsmNode n : List.of(one, client, three)) {
            n.awaitMembers(3, Duration.ofSeconds(20));
        }
        assertTrue(one.directory().member(2).isEmpty(), "the refused node is not a member");
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void backupsOnATransportThatCannotReplicateAreRefusedAtStartAndZeroIsNot() {
        int p = TestClusters.freePort();
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> start(1, p, p,
                NoReplicationTestTransportProvider.NAME, "membus.replication.backups = 1\n"));
        assertEquals("bad config: key=membus.replication.backups, value=1, allowed=0 on transport "
                + NoReplicationTestTransportProvider.NAME + " (replication over " + NoReplicationTestTransportProvider.NAME
                + " is not built: a NIC cannot forward changes; see docs/replication.md)", e.getMessage());
        int q = TestClusters.freePort();
        DsmNode off = start(1, q, q, NoReplicationTestTransportProvider.NAME, "membus.replication.backups = 0\n");
        assertEquals(NoReplicationTestTransportProvider.NAME, off.transport().name());
    }

    /** Waits until every node in {@code on} sees group {@code node/index} served by {@code primary} with {@code copies} in sync. */
    private static ReplicaGroupView awaitServed(List<DsmNode> on, int node, int index, java.util.function.IntPredicate primary,
                                                int copies) {
        for (DsmNode n : on) {
            await("node " + n.nodeId() + " sees group " + node + "/" + index + " served with " + copies + " in sync",
                    Duration.ofSeconds(30), () -> n.directory().group(node, index).filter(v -> v.state()
                            == ReplicaGroupView.State.SERVING && primary.test(v.primary())
                            && v.inSyncCount() == copies).isPresent());
        }
        return on.get(0).directory().group(node, index).orElseThrow();
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aRestartedNodeDoesNotExportAnIndexWhoseGroupAnotherNodeServes() throws Exception {
        int p1 = TestClusters.freePort();
        DsmNode one = start(1, p1, p1, "local", "membus.replication.backups = 1\n");
        DsmNode two = start(2, 0, p1, "local", "membus.replication.backups = 1\n");
        DsmNode three = start(3, 0, p1, "local", "membus.replication.backups = 1\n");
        for (DsmNode n : List.of(one, two, three)) {
            n.awaitMembers(3, Duration.ofSeconds(20));
        }
        // the engine places a copy of each of node 3's segments on node 1 or 2 and publishes the groups
        long key0 = awaitServed(List.of(one, two), 3, 0, p -> p == 3, 1).logical().remoteKey();
        awaitServed(List.of(one, two), 3, 1, p -> p == 3, 1);
        long ptr = io.membus.core.RemotePtr.pack(3, 1, 65536 - 8);
        one.remoteMemory().writeLong(ptr, 4242L); // acknowledged: in node 3's copy holder too

        three.close(); // a graceful leave: its groups are promoted on their copies, never lost
        ReplicaGroupView zero = awaitServed(List.of(one, two), 3, 0, p -> p == 1 || p == 2, 1);
        awaitServed(List.of(one, two), 3, 1, p -> p == 1 || p == 2, 1);
        assertEquals(4242L, one.remoteMemory().readLong(ptr), "the acknowledged write survives the leave");

        DsmNode again = start(3, 0, p1, "local", "membus.replication.backups = 1\n");
        assertTrue(again.transport().table().get(0) == null, "index 0 is a group another node serves: not exported again");
        assertTrue(again.transport().table().get(1) == null, "index 1 likewise");
        one.awaitMembers(3, Duration.ofSeconds(20));
        SegmentDescriptor logical = one.directory().segment(3, 0).orElseThrow();
        assertEquals(key0, logical.remoteKey(), "the group's descriptor, not a new export");
        int server = zero.primary();
        assertEquals((server == 1 ? one : two).incarnation(), logical.incarnation());
        await("node 1 sees the restarted node 3's entry", Duration.ofSeconds(20),
                () -> ((ClusterDirectory) one.directory()).entries().containsKey(3)
                        && ((ClusterDirectory) one.directory()).entries().get(3).incarnation() == again.incarnation());
        assertEquals(0, ((ClusterDirectory) one.directory()).entries().get(3).segments().size(),
                "no own segment: both indices are groups served elsewhere");
        assertEquals(4242L, again.remoteMemory().readLong(ptr), "the restarted node reads its old segment at its new primary");
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void theEnginesClaimsMakeTheSameGroupViewOnEveryNodeAcrossAPrimarysLeaveAndAPromotion() throws Exception {
        int p1 = TestClusters.freePort();
        DsmNode one = start(1, p1, p1, "local", "membus.replication.backups = 1\n");
        DsmNode two = start(2, 0, p1, "local", "membus.replication.backups = 1\n");
        one.awaitMembers(2, Duration.ofSeconds(20));
        two.awaitMembers(2, Duration.ofSeconds(20));
        int g = GroupId.of(1, 0);
        List<String> changes = new CopyOnWriteArrayList<>();
        two.directory().addListener(new DirectoryListener() {
            @Override
            public void groupChanged(ReplicaGroupView before, ReplicaGroupView after) {
                if ((before != null ? before.group() : after.group()) == g) {
                    changes.add((before == null ? "-" : before.state().toString()) + " -> "
                            + (after == null ? "-" : after.state() + "@" + Ballot.toString(after.epoch())));
                }
            }
        });

        // the engine on each node makes its exported segments groups, each with a copy on the other node
        SegmentDescriptor exported = one.localSegment(0).descriptor();
        long first = Ballot.initial(1);
        awaitServed(List.of(one, two), 1, 0, p -> p == 1, 1);
        awaitServed(List.of(one, two), 1, 1, p -> p == 1, 1);
        awaitServed(List.of(one, two), 2, 0, p -> p == 2, 1);
        awaitServed(List.of(one, two), 2, 1, p -> p == 2, 1);
        for (DsmNode n : List.of(one, two)) {
            assertEquals(exported, n.directory().segment(1, 0).orElseThrow(),
                    "the group's logical descriptor is the exported segment's");
        }
        assertArrayEquals(new int[] {2}, two.directory().group(1, 0).orElseThrow().inSync());
        assertEquals(first, two.directory().group(1, 0).orElseThrow().epoch());
        assertTrue(((ClusterDirectory) one.directory()).entries().get(1).claims().stream()
                .anyMatch(c -> c.group() == g && c.role() == GroupClaim.Role.PRIMARY), "the claims are in node 1's own entry");
        long ptr = io.membus.core.RemotePtr.pack(1, 1, 65536 - 8);
        two.remoteMemory().writeLong(ptr, 77L);

        // membus status: the engine's row for the groups node 1 serves, the directory's view for the others
        ClusterMessage.StatusReply reply = ClusterStatus.query("127.0.0.1:" + p1, "test", "127.0.0.1",
                Duration.ofSeconds(15), one.config());
        assertTrue(reply.groups().contains(new ClusterMessage.GroupRow(g, ReplicaGroupView.State.SERVING, 1, first,
                List.of(2), List.of(), 1, "segment 1/0: 1 of 1 backups")), reply.groups().toString());
        assertTrue(reply.groups().stream().noneMatch(ClusterMessage.GroupRow::needsAttention), reply.groups().toString());
        assertEquals(0, one.status().groupsShort());
        one.heldGroupStatus(() -> List.of(new ClusterMessage.GroupRow(g, ReplicaGroupView.State.SERVING, 1, first,
                List.of(2), List.of(new ClusterMessage.JoiningCopy(3, 12)), 1, "engine's row")));
        ClusterMessage.GroupRow fromEngine = ClusterStatus.query("127.0.0.1:" + p1, "test", "127.0.0.1",
                Duration.ofSeconds(15), one.config()).groups().stream().filter(r -> r.group() == g).findFirst()
                .orElseThrow();
        assertEquals("engine's row", fromEngine.note());
        assertTrue(fromEngine.needsAttention(), "a copy being built");

        ExecutionException other = assertThrows(ExecutionException.class,
                () -> one.claimPublisher().publish(2, List.of()).get(10, TimeUnit.SECONDS));
        assertInstanceOf(DsmException.class, other.getCause());
        assertTrue(other.getCause().getMessage().contains("publishes only its own claims"), other.getCause().getMessage());

        // the primary leaves gracefully: it hands its groups over to node 2's in-sync copies; nothing is lost, a
        // pointer still resolves
        one.close();
        assertTrue(two.directory().member(1).isEmpty());
        for (int index : new int[] {0, 1, 255}) {
            awaitServed(List.of(two), 1, index, p -> p == 2, 0); // 0 of 1 backups: no other memory node
        }
        assertEquals(exported.remoteKey(), two.directory().segment(1, 0).orElseThrow().remoteKey());
        assertEquals(two.incarnation(), two.directory().segment(1, 0).orElseThrow().incarnation());
        assertTrue(two.directory().groups().stream().noneMatch(v -> v.state() == ReplicaGroupView.State.LOST),
                two.directory().groups().toString());
        assertEquals(77L, two.remoteMemory().readLong(ptr), "the acknowledged write survives its primary's leave");
        // node 2's view of group 1/0: served by node 1, then by node 2 at a higher epoch, handed over while node 1
        // was still a member (docs/replication.md §17.9): never without a primary
        assertTrue(changes.stream().noneMatch(c -> c.contains("PROMOTING") || c.contains("LOST")), changes.toString());
        assertEquals("SERVING -> SERVING@2.2", changes.get(changes.size() - 1), changes.toString());

        ExecutionException closed = assertThrows(ExecutionException.class,
                () -> one.claimPublisher().publish(1, List.of()).get(10, TimeUnit.SECONDS));
        assertInstanceOf(DsmClosedException.class, closed.getCause());
    }
}
