package io.membus.cluster;

import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.core.Access;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupClaim;
import io.membus.core.replication.GroupId;
import io.membus.core.directory.PeerInfo;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ClusterDirectoryTest {

    private static NodeEntry entry(int node, long incarnation, int... segments) {
        List<SegmentDescriptor> list = new java.util.ArrayList<>();
        for (int s : segments) {
            list.add(new SegmentDescriptor(node, incarnation, s, 4096, Access.ALL, incarnation * 31 + s));
        }
        return new NodeEntry(node, incarnation, "pekko://m@h:" + node, incarnation, "local", "local:x", list);
    }

    @Test
    void memoryNodesComeFromTheRolesOnceToldAMemoryNodeWithoutSegmentsCountsAndAClientNever() {
        ClusterDirectory d = new ClusterDirectory();
        d.apply(Map.of(1, entry(1, 10, 0), 2, entry(2, 20), 11, entry(11, 30)), Map.of());
        assertEquals(java.util.Set.of(1), d.memoryNodes(), "before the roles: the members that export a segment");
        d.apply(Map.of(1, entry(1, 10, 0), 2, entry(2, 20), 11, entry(11, 30)), Map.of(), false,
                java.util.Set.of(1, 2, 3));
        assertEquals(java.util.Set.of(1, 2), d.memoryNodes(),
                "node 2 has the role and no segment; node 3 has the role but no entry; client 11 has no role");
    }

    @Test
    void listenersHearJoinsSegmentsRestartsAndRemovalsInOrder() {
        ClusterDirectory d = new ClusterDirectory();
        List<String> events = new CopyOnWriteArrayList<>();
        d.addListener(new DirectoryListener() {
            @Override
            public void memberUp(PeerInfo m) {
                events.add("up " + m.nodeId() + "/" + m.incarnation());
            }

            @Override
            public void memberRemoved(PeerInfo m, String reason) {
                events.add("removed " + m.nodeId() + "/" + m.incarnation() + ": " + reason);
            }

            @Override
            public void segmentAdded(SegmentDescriptor s) {
                events.add("+seg " + s.nodeId() + "." + s.index() + "/" + s.incarnation());
            }

            @Override
            public void segmentRemoved(SegmentDescriptor s) {
                events.add("-seg " + s.nodeId() + "." + s.index() + "/" + s.incarnation());
            }
        });
        d.apply(Map.of(1, entry(1, 10, 0)), Map.of());
        assertEquals(List.of("up 1/10", "+seg 1.0/10"), events);
        events.clear();
        d.apply(Map.of(1, entry(1, 10, 0, 1), 2, entry(2, 20, 0)), Map.of());
        assertTrue(events.containsAll(List.of("+seg 1.1/10", "up 2/20", "+seg 2.0/20")), events.toString());
        assertEquals(3, events.size(), events.toString());
        assertEquals(3, d.segments().size());
        assertEquals(20, d.member(2).orElseThrow().incarnation());
        events.clear();
        d.apply(Map.of(1, entry(1, 11, 0)), Map.of(2, "downed by the cluster"));
        assertEquals(List.of("-seg 1.0/10", "-seg 1.1/10", "removed 1/10: restarted as incarnation 11",
                "-seg 2.0/20", "removed 2/20: downed by the cluster", "up 1/11", "+seg 1.0/11"), sorted(events));
        assertTrue(d.segment(2, 0).isEmpty());
        assertTrue(d.member(2).isEmpty());
        assertEquals(11, d.segment(1, 0).orElseThrow().incarnation());
    }

    @Test
    void lookupsOnTheVerbPathReturnSharedValuesForAnyNodeId() {
        ClusterDirectory d = new ClusterDirectory();
        assertTrue(d.member(7).isEmpty());
        assertTrue(d.segment(-1, 0).isEmpty());
        d.apply(Map.of(300, entry(300, 5, 0, 2), 2, entry(2, 6, 1)), Map.of());
        // the same instances every time: nothing is allocated per verb, also above the Integer cache
        assertSame(d.member(300), d.member(300));
        assertSame(d.segment(300, 2), d.segment(300, 2));
        assertEquals(5, d.member(300).orElseThrow().incarnation());
        assertEquals(2, d.segment(300, 2).orElseThrow().index());
        assertTrue(d.segment(300, 1).isEmpty());
        assertTrue(d.segment(300, 3).isEmpty());
        assertTrue(d.segment(2, 0).isEmpty());
        assertEquals(1, d.segment(2, 1).orElseThrow().index());
        assertTrue(d.member(1).isEmpty());
        assertTrue(d.member(301).isEmpty());
        assertTrue(d.member(65535).isEmpty());
        d.apply(Map.of(2, entry(2, 6, 1)), Map.of(300, "downed"));
        assertTrue(d.member(300).isEmpty());
        assertTrue(d.segment(300, 2).isEmpty());
        assertEquals(1, d.members().size());
    }

    private static final long KEY = 0x5eed_0000_1234L;

    private static GroupClaim claim(int group, long epoch, GroupClaim.Role role, int... inSync) {
        return new GroupClaim(group, epoch, role, 4096, Access.ALL, KEY, inSync, 0);
    }

    private static NodeEntry withClaims(NodeEntry e, GroupClaim... claims) {
        return e.withClaims(List.of(claims));
    }

    /** Records every groupChanged call as "before -> after" (states, or "-"). */
    private static final class GroupEvents implements DirectoryListener {
        final List<String> events = new CopyOnWriteArrayList<>();
        final List<ReplicaGroupView> seenByLookup = new CopyOnWriteArrayList<>();
        ClusterDirectory directory;

        @Override
        public void groupChanged(ReplicaGroupView before, ReplicaGroupView after) {
            events.add(GroupId.toString(after != null ? after.group() : before.group()) + " "
                    + (before == null ? "-" : before.state() + "@" + Ballot.toString(before.epoch())) + " -> "
                    + (after == null ? "-" : after.state() + "@" + Ballot.toString(after.epoch())));
            // the change is visible before listeners hear of it
            seenByLookup.add(directory.group(GroupId.node(after.group()), GroupId.index(after.group())).orElseThrow());
        }
    }

    @Test
    void groupViewsFollowTheClaimsAcrossAPrimarysDeathAPromotionAndTheLossOfEveryCopy() {
        ClusterDirectory d = new ClusterDirectory();
        GroupEvents listener = new GroupEvents();
        listener.directory = d;
        d.addListener(listener);
        int g = GroupId.of(1, 0);
        long first = Ballot.initial(1);
        NodeEntry one = withClaims(entry(1, 10, 0), claim(g, first, GroupClaim.Role.PRIMARY, 2, 3));
        NodeEntry two = withClaims(entry(2, 20), claim(g, first, GroupClaim.Role.COPY));
        NodeEntry three = withClaims(entry(3, 30), claim(g, first, GroupClaim.Role.COPY));

        d.apply(Map.of(1, one, 2, two, 3, three), Map.of());
        ReplicaGroupView serving = d.group(1, 0).orElseThrow();
        assertEquals(ReplicaGroupView.State.SERVING, serving.state());
        assertEquals(1, serving.primary());
        assertEquals(10, serving.primaryIncarnation());
        assertArrayEquals(new int[] {2, 3}, serving.inSync());
        assertEquals(List.of("1/0 - -> SERVING@1.1"), listener.events);
        assertSame(d.group(1, 0), d.group(1, 0), "allocation-free on a hit: one shared Optional");
        assertTrue(d.group(1, 1).isEmpty());
        assertTrue(d.group(2, 0).isEmpty());
        assertTrue(d.group(-1, 0).isEmpty());
        assertTrue(d.group(65535, 255).isEmpty());
        assertEquals(KEY, d.segment(1, 0).orElseThrow().remoteKey(), "the group's logical descriptor");
        assertEquals(10, d.segment(1, 0).orElseThrow().incarnation());
        assertEquals(1, d.segments().size(), "node 1's segment once, though it is both exported and a group");
        d.apply(Map.of(1, one, 2, two, 3, three), Map.of());
        assertEquals(1, listener.events.size(), "an unchanged view is not announced again");

        // node 1 dies: its copies remain, the group is promoting; pointers into it still resolve
        d.apply(Map.of(2, two, 3, three), Map.of(1, "downed"));
        ReplicaGroupView promoting = d.group(1, 0).orElseThrow();
        assertEquals(ReplicaGroupView.State.PROMOTING, promoting.state());
        assertEquals(0, promoting.primary());
        assertArrayEquals(new int[] {2, 3}, promoting.inSync(), "the dead primary's order: node 2 coordinates");
        assertTrue(d.member(1).isEmpty());
        SegmentDescriptor logical = d.segment(1, 0).orElseThrow();
        assertEquals(1, logical.nodeId());
        assertEquals(0, logical.index());
        assertEquals(KEY, logical.remoteKey());
        assertEquals(4096, logical.size());
        assertTrue(d.segments().contains(logical));

        // node 2 is promoted at a higher epoch with node 3 in sync
        long second = Ballot.next(first, 2);
        two = withClaims(entry(2, 20), claim(g, second, GroupClaim.Role.PRIMARY, 3));
        three = withClaims(entry(3, 30), claim(g, second, GroupClaim.Role.COPY));
        d.apply(Map.of(2, two, 3, three), Map.of());
        ReplicaGroupView promoted = d.group(1, 0).orElseThrow();
        assertEquals(ReplicaGroupView.State.SERVING, promoted.state());
        assertEquals(2, promoted.primary());
        assertEquals(second, promoted.epoch());
        assertTrue(promoted.epoch() > serving.epoch());
        assertArrayEquals(new int[] {3}, promoted.inSync());
        assertEquals(20, d.segment(1, 0).orElseThrow().incarnation(), "the descriptor names the serving primary");
        assertEquals(KEY, d.segment(1, 0).orElseThrow().remoteKey(), "the key is the group's, kept by a promotion");

        // both holders die: the group is lost, and stays lost
        NodeEntry four = entry(4, 40, 0);
        d.apply(Map.of(4, four), Map.of(2, "downed", 3, "downed"));
        ReplicaGroupView lost = d.group(1, 0).orElseThrow();
        assertEquals(ReplicaGroupView.State.LOST, lost.state());
        assertEquals(second, lost.epoch(), "the last known epoch");
        assertTrue(d.segment(1, 0).isEmpty(), "a lost group's segment is not resolvable");
        d.apply(Map.of(4, four), Map.of());
        assertEquals(ReplicaGroupView.State.LOST, d.group(1, 0).orElseThrow().state());
        assertEquals(List.of("1/0 - -> SERVING@1.1", "1/0 SERVING@1.1 -> PROMOTING@1.1",
                "1/0 PROMOTING@1.1 -> SERVING@2.2", "1/0 SERVING@2.2 -> LOST@2.2"), listener.events);
        assertEquals(List.of(serving, promoting, promoted, lost), listener.seenByLookup);
        assertEquals(1, d.groups().size());
    }

    @Test
    void aNodeOnItsWayOutDoesNotAnnounceThePeersGroupsLost() {
        ClusterDirectory d = new ClusterDirectory();
        GroupEvents listener = new GroupEvents();
        listener.directory = d;
        d.addListener(listener);
        int g = GroupId.of(2, 0);
        d.apply(Map.of(1, withClaims(entry(1, 10), claim(g, Ballot.initial(2), GroupClaim.Role.COPY)),
                2, withClaims(entry(2, 20, 0), claim(g, Ballot.initial(2), GroupClaim.Role.PRIMARY, 1))), Map.of());
        assertEquals(List.of("2/0 - -> SERVING@1.2"), listener.events);
        // this node leaves: Pekko reports every member removed on its way out
        d.apply(Map.of(), Map.of(), true);
        assertEquals(List.of("2/0 - -> SERVING@1.2"), listener.events, "no group announced lost");
        assertEquals(ReplicaGroupView.State.SERVING, d.group(2, 0).orElseThrow().state());
        assertTrue(d.members().isEmpty());
    }

    @Test
    void withoutClaimsThereAreNoGroupsAndSegmentsAreTheEntriesOwn() {
        ClusterDirectory d = new ClusterDirectory();
        GroupEvents listener = new GroupEvents();
        listener.directory = d;
        d.addListener(listener);
        d.apply(Map.of(1, entry(1, 10, 0, 1), 2, entry(2, 20)), Map.of());
        assertTrue(d.groups().isEmpty());
        assertTrue(d.group(1, 0).isEmpty());
        assertEquals(2, d.segments().size());
        d.apply(Map.of(2, entry(2, 20)), Map.of(1, "downed"));
        assertTrue(d.segment(1, 0).isEmpty(), "an unreplicated segment goes with its node, as before");
        assertTrue(listener.events.isEmpty());
    }

    @Test
    void aCopyHeldByAFreshDirectoryWithNoPrimaryInSightIsPromotingAndItsJoiningNodesAreListed() {
        ClusterDirectory d = new ClusterDirectory();
        int g = GroupId.of(5, 2);
        long epoch = Ballot.of(3, 4);
        d.apply(Map.of(4, withClaims(entry(4, 40, 0), claim(g, epoch, GroupClaim.Role.COPY)),
                6, withClaims(entry(6, 60), claim(g, epoch, GroupClaim.Role.JOINING))), Map.of());
        ReplicaGroupView v = d.group(5, 2).orElseThrow();
        assertEquals(ReplicaGroupView.State.PROMOTING, v.state());
        assertArrayEquals(new int[] {4}, v.inSync());
        assertArrayEquals(new int[] {6}, v.joining());
        assertEquals(5, d.segment(5, 2).orElseThrow().nodeId());
        assertTrue(d.member(5).isEmpty());
    }

    /** Node 1's events before node 2's; within a node, the order of apply. */
    private static List<String> sorted(List<String> events) {
        List<String> one = events.stream().filter(e -> e.matches("\\D+ 1[./].*")).toList();
        List<String> two = events.stream().filter(e -> e.matches("\\D+ 2[./].*")).toList();
        List<String> out = new java.util.ArrayList<>();
        out.addAll(one.subList(0, 3));
        out.addAll(two);
        out.addAll(one.subList(3, one.size()));
        return out;
    }
}
