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
        DsmNode three = start(3, 0, p1, "local", "");
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

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aRestartedNodeDoesNotExportAnIndexWhoseGroupAnotherNodeServes() throws Exception {
        int p1 = TestClusters.freePort();
        DsmNode one = start(1, p1, p1, "local", "membus.replication.backups = 1\n");
        DsmNode two = start(2, 0, p1, "local", "membus.replication.backups = 1\n");
        two.awaitMembers(2, Duration.ofSeconds(20));
        // node 2 serves node 3's segment 0: promoted there while node 3 was away
        long epoch = Ballot.of(2, 2);
        two.claimPublisher().publish(2, List.of(new GroupClaim(GroupId.of(3, 0), epoch, GroupClaim.Role.PRIMARY, 65536,
                io.membus.core.Access.ALL, 77, null, System.currentTimeMillis()))).get(10, TimeUnit.SECONDS);
        await("node 1 sees group 3/0 served by node 2", Duration.ofSeconds(20), () -> one.directory().group(3, 0)
                .filter(v -> v.primary() == 2).isPresent());

        DsmNode three = start(3, 0, p1, "local", "membus.replication.backups = 1\n");
        assertTrue(three.transport().table().get(0) == null, "index 0 is a group node 2 serves: not exported again");
        assertTrue(three.transport().table().get(1) != null, "index 1 is exported as before");
        one.awaitMembers(3, Duration.ofSeconds(20));
        SegmentDescriptor zero = one.directory().segment(3, 0).orElseThrow();
        assertEquals(77, zero.remoteKey(), "the group's descriptor, not a new export");
        assertEquals(two.incarnation(), zero.incarnation());
        assertEquals(three.incarnation(), one.directory().segment(3, 1).orElseThrow().incarnation());
        assertEquals(1, ((ClusterDirectory) one.directory()).entries().get(3).segments().size());
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void publishedClaimsMakeTheSameGroupViewOnEveryNodeAcrossAPrimarysLeaveAndAPromotion() throws Exception {
        int p1 = TestClusters.freePort();
        DsmNode one = start(1, p1, p1, "local", "membus.replication.backups = 1\n");
        DsmNode two = start(2, 0, p1, "local", "membus.replication.backups = 1\n");
        one.awaitMembers(2, Duration.ofSeconds(20));
        two.awaitMembers(2, Duration.ofSeconds(20));
        List<String> changes = new CopyOnWriteArrayList<>();
        two.directory().addListener(new DirectoryListener() {
            @Override
            public void groupChanged(ReplicaGroupView before, ReplicaGroupView after) {
                changes.add((before == null ? "-" : before.state().toString()) + " -> "
                        + (after == null ? "-" : after.state() + "@" + Ballot.toString(after.epoch())));
            }
        });

        SegmentDescriptor exported = one.localSegment(0).descriptor();
        int g = GroupId.of(1, 0);
        long first = Ballot.initial(1);
        one.claimPublisher().publish(1, List.of(new GroupClaim(g, first, GroupClaim.Role.PRIMARY, exported.size(),
                exported.flags(), exported.remoteKey(), new int[] {2}, System.currentTimeMillis()))).get(10, TimeUnit.SECONDS);
        two.claimPublisher().publish(2, List.of(new GroupClaim(g, first, GroupClaim.Role.COPY, exported.size(),
                exported.flags(), exported.remoteKey(), null, System.currentTimeMillis()))).get(10, TimeUnit.SECONDS);
        for (DsmNode n : List.of(one, two)) {
            await("node " + n.nodeId() + " sees group 1/0 served by node 1 with node 2 in sync", Duration.ofSeconds(20),
                    () -> n.directory().group(1, 0).filter(v -> v.state() == ReplicaGroupView.State.SERVING
                            && v.primary() == 1 && v.inSyncCount() == 1).isPresent());
            assertEquals(exported, n.directory().segment(1, 0).orElseThrow(),
                    "the group's logical descriptor is the exported segment's");
        }
        assertArrayEquals(new int[] {2}, two.directory().group(1, 0).orElseThrow().inSync());
        assertEquals(1, ((ClusterDirectory) one.directory()).entries().get(1).claims().size(),
                "the claims are in node 1's own entry");

        // membus status: the group's row from the directory's view, replaced by the engine's where it holds the group
        ClusterMessage.StatusReply reply = ClusterStatus.query("127.0.0.1:" + p1, "test", "127.0.0.1",
                Duration.ofSeconds(15), one.config());
        assertEquals(List.of(new ClusterMessage.GroupRow(g, ReplicaGroupView.State.SERVING, 1, first, List.of(2), List.of(),
                1, "")), reply.groups());
        assertEquals(1, one.status().groups());
        assertEquals(0, one.status().groupsShort());
        one.heldGroupStatus(() -> List.of(new ClusterMessage.GroupRow(g, ReplicaGroupView.State.SERVING, 1, first,
                List.of(2), List.of(new ClusterMessage.JoiningCopy(3, 12)), 1, "engine's row")));
        ClusterMessage.GroupRow fromEngine = ClusterStatus.query("127.0.0.1:" + p1, "test", "127.0.0.1",
                Duration.ofSeconds(15), one.config()).groups().get(0);
        assertEquals("engine's row", fromEngine.note());
        assertTrue(fromEngine.needsAttention(), "a copy being built");

        ExecutionException other = assertThrows(ExecutionException.class,
                () -> one.claimPublisher().publish(2, List.of()).get(10, TimeUnit.SECONDS));
        assertInstanceOf(DsmException.class, other.getCause());
        assertTrue(other.getCause().getMessage().contains("publishes only its own claims"), other.getCause().getMessage());

        // the primary leaves: node 2 sees the group promoting, and a pointer into it still resolves
        one.close();
        await("node 2 sees group 1/0 promoting", Duration.ofSeconds(20), () -> two.directory().group(1, 0)
                .filter(v -> v.state() == ReplicaGroupView.State.PROMOTING).isPresent());
        assertTrue(two.directory().member(1).isEmpty());
        assertEquals(exported.remoteKey(), two.directory().segment(1, 0).orElseThrow().remoteKey());

        // node 2 serves it at a higher epoch (what the engine's promotion publishes), once node 1 is removed: while
        // Distributed Data still counts it, no majority of two can answer (the publication would time out, typed)
        await("node 1 removed from node 2's membership", Duration.ofSeconds(20), () -> java.util.stream.StreamSupport
                .stream(org.apache.pekko.cluster.Cluster.get(two.actorSystem()).state().getMembers().spliterator(), false)
                .count() == 1);
        long second = Ballot.next(first, 2);
        two.claimPublisher().publish(2, List.of(new GroupClaim(g, second, GroupClaim.Role.PRIMARY, exported.size(),
                exported.flags(), exported.remoteKey(), null, System.currentTimeMillis()))).get(10, TimeUnit.SECONDS);
        await("node 2 serves group 1/0", Duration.ofSeconds(20), () -> two.directory().group(1, 0)
                .filter(v -> v.state() == ReplicaGroupView.State.SERVING && v.primary() == 2).isPresent());
        assertEquals(two.incarnation(), two.directory().segment(1, 0).orElseThrow().incarnation());
        // node 2's view of group 1/0, in order (its own copy's claim may have been seen before node 1's primary one)
        assertTrue(changes.size() >= 3 && changes.get(changes.size() - 3).endsWith("-> SERVING@1.1"), changes.toString());
        assertEquals(List.of("SERVING -> PROMOTING@1.1", "PROMOTING -> SERVING@2.2"),
                changes.subList(changes.size() - 2, changes.size()), changes.toString());

        ExecutionException closed = assertThrows(ExecutionException.class,
                () -> one.claimPublisher().publish(1, List.of()).get(10, TimeUnit.SECONDS));
        assertInstanceOf(DsmClosedException.class, closed.getCause());
    }
}
