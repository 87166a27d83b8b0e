package io.membus.samples.cluster;

import io.membus.alloc.HeapUsage;
import io.membus.cluster.ClusterMessage;
import io.membus.cluster.ClusterMessage.MemberRow;
import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.cluster.ClusterMessage.StatusReply;
import io.membus.cluster.NodeStatus;
import io.membus.core.Access;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupId;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The command line's layout of what the library reports as data (the tables moved here from the library). */
class StatusTextTest {

    @Test
    void aNodeStatusIsOneLine() {
        NodeStatus up = new NodeStatus(2, null, new TreeSet<>(List.of(3, 1, 2)), 0, 6, 384L << 10, 4, "tcp", 77,
                Duration.ofSeconds(12));
        assertEquals("node 2 UP | members 3 [1, 2, 3] | unreachable 0 | segments 6 (384.0 KiB) | names 4"
                + " | transport tcp | incarnation 77 | up 12s", StatusText.statusLine(up));
        NodeStatus down = new NodeStatus(3, "downed by the split-brain resolver", new TreeSet<>(), 0, 0, 0, 0, null,
                78, Duration.ZERO);
        assertTrue(StatusText.statusLine(down).startsWith("node 3 DOWN"), StatusText.statusLine(down));
        assertEquals("512 B", StatusText.human(512));
        assertEquals("64.0 MiB", StatusText.human(64L << 20));
    }

    @Test
    void theHeapTableHasAHeaderAndARowPerSegment() {
        List<HeapUsage.SegmentUsage> rows = List.of(
                new HeapUsage.SegmentUsage(1, 1, 16 << 10, 60, 58, 1, 0, 3, 61, 0, Map.of(1, 1), null),
                new HeapUsage.SegmentUsage(2, 1, 16 << 10, 60, 53, 0, 7, 0, 0, 1, Map.of(1, 7), null),
                new HeapUsage.SegmentUsage(3, 1, 0, 0, 0, 0, 0, 0, 0, 0, Map.of(), "not formatted"));
        String table = StatusText.heapTable(rows);
        assertTrue(table.startsWith("node  seg"), table);
        assertTrue(table.contains("16KiB"), table);
        assertEquals(2, table.lines().filter(l -> l.matches("[12] +1 +16KiB .*")).count(), table);
        assertTrue(table.lines().anyMatch(l -> l.matches("3 +1 +not formatted")), table);
    }

    @Test
    void aStatusReplyIsAClusterTable() {
        List<MemberRow> members = new ArrayList<>();
        for (int n = 1; n <= 3; n++) {
            String address = "pekko://test@127.0.0.1:" + (2550 + n);
            List<SegmentDescriptor> segments = List.of(new SegmentDescriptor(n, 1000 + n, 0, 65536, Access.ALL, 1),
                    new SegmentDescriptor(n, 1000 + n, 1, 65536, Access.ALL, 2));
            members.add(new MemberRow(address, "Up", true, n, new NodeEntry(n, 1000 + n, address, n, "tcp",
                    "127.0.0.1:" + (7000 + n), segments)));
        }
        // a client: no segments, role client (membus.role)
        String clientAddress = "pekko://test@127.0.0.1:2560";
        members.add(new MemberRow(clientAddress, "Up", true, 11, new NodeEntry(11, 1011, clientAddress, 11, "tcp",
                "127.0.0.1:7011", List.of()), "client"));
        List<HeapUsage.SegmentUsage> heap = List.of(
                new HeapUsage.SegmentUsage(1, 1, 4096, 15, 10, 1, 4, 1, 100, 1, Map.of(1, 1, 2, 4), null),
                new HeapUsage.SegmentUsage(2, 1, 4096, 15, 15, 0, 0, 0, 0, 0, Map.of(), null),
                new HeapUsage.SegmentUsage(3, 1, 4096, 15, 14, 1, 0, 1, 100, 0, Map.of(3, 1), null));
        StatusReply reply = new StatusReply(2, members.get(0).address(), members, 5, heap, "",
                List.of(new ClusterMessage.ChannelRow(40, "test-echo", 2, 64, 1, 32, 0)),
                List.of(new io.membus.cluster.StatusSection("coherence", Map.of("caching", "on")),
                        new io.membus.cluster.StatusSection("verbs", new java.util.LinkedHashMap<>(Map.of(
                                "transport", "tcp", "node-1", "verbs=12 (read 10 write 0 cas 0 faa 2) bytes=656")))));
        String table = StatusText.clusterTable(reply);
        System.out.println(table);
        for (MemberRow m : members) {
            assertTrue(table.contains(m.address()), table);
            assertTrue(table.contains(Long.toString(m.entry().incarnation())), table);
        }
        assertTrue(table.contains("3 members (3 Up), 1 client (1 Up), 6 segments, 384.0 KiB exported"), table);
        assertTrue(table.lines().anyMatch(l -> l.matches("11 +client +pekko://test@127\\.0\\.0\\.1:2560 +Up +yes +tcp +1011 +0 +0 B")),
                table);
        assertTrue(table.lines().anyMatch(l -> l.matches("1 +member +pekko://test@127\\.0\\.0\\.1:2551 +Up .*")), table);
        assertTrue(table.contains("heap segments (global allocator), read by node 2"), table);
        assertEquals(3, table.lines().filter(l -> l.matches("[123] +1 +4KiB .*")).count(), table);
        assertTrue(table.lines().anyMatch(l -> l.matches("1 +1 .*") && l.contains("{") && l.contains("2=4")), table);
        assertTrue(table.contains("message channels of node 2"), table);
        assertTrue(table.contains("coherence of node 2: caching=on"), table);
        assertTrue(table.contains("verbs of node 2: (tcp, verbs that crossed a connection)\n"
                + "  to node 1: verbs=12 (read 10 write 0 cas 0 faa 2) bytes=656\n"), table);
        assertTrue(table.lines().filter(l -> l.matches("[123] +member +pekko://test@127\\.0\\.0\\.1:\\d+ +Up +yes +tcp .*"))
                .count() == 3, "one Up tcp row per node:\n" + table);

        String failed = StatusText.clusterTable(new StatusReply(2, "", members, 0, List.of(),
                "heap usage could not be read: timeout", List.of(), List.of()));
        assertTrue(failed.contains("heap usage could not be read: timeout"), failed);
    }

    private static final int BACKUPS = 1;

    /** The rows of docs/replication.md §1, a lost and a promoting group. */
    private static List<ClusterMessage.GroupRow> groupRows() {
        return List.of(
                new ClusterMessage.GroupRow(GroupId.of(3, 0), ReplicaGroupView.State.SERVING, 3, Ballot.of(1, 3),
                        List.of(1), List.of(), BACKUPS, ""),
                new ClusterMessage.GroupRow(GroupId.of(3, 1), ReplicaGroupView.State.SERVING, 3, Ballot.of(1, 3),
                        List.of(), List.of(new ClusterMessage.JoiningCopy(2, 41)), BACKUPS, ""),
                new ClusterMessage.GroupRow(GroupId.of(2, 0), ReplicaGroupView.State.SERVING, 1, Ballot.of(2, 1),
                        List.of(4), List.of(), BACKUPS, "promoted: node 2 downed 12:01:07"),
                new ClusterMessage.GroupRow(GroupId.of(5, 1), ReplicaGroupView.State.LOST, 0, Ballot.of(1, 5),
                        List.of(), List.of(), BACKUPS, ""),
                new ClusterMessage.GroupRow(GroupId.of(6, 0), ReplicaGroupView.State.PROMOTING, 0, Ballot.of(1, 6),
                        List.of(7, 8), List.of(), BACKUPS, ""));
    }

    @Test
    void theGroupTableListsTheGroupsShortOfCopiesOrNotInSyncAndEveryGroupWhenAsked() {
        String some = StatusText.groupTable(groupRows(), false);
        System.out.println(some);
        assertEquals(List.of(
                "group        primary  epoch   in-sync copies   joining        state",
                "segment 3/1  node 3   1.3     -                node 2 (41%)   segment 3/1: 0 of 1 backups (re-replicating)",
                "segment 5/1  -        1.5     -                -              LOST: its primary and every in-sync copy died;"
                        + " its data is gone",
                "segment 6/0  -        1.6     node 7, 8        -              promoting: its primary is gone, a copy takes"
                        + " over"), some.lines().toList());
        String all = StatusText.groupTable(groupRows(), true);
        assertTrue(all.lines().anyMatch(l -> l.equals(
                "segment 3/0  node 3   1.3     node 1           -              ok")), all);
        assertTrue(all.lines().anyMatch(l -> l.equals(
                "segment 2/0  node 1   2.1     node 4           -              ok (promoted: node 2 downed 12:01:07)")), all);
        assertEquals(6, all.lines().count(), all);
        assertEquals("", StatusText.groupTable(groupRows().subList(0, 1), false), "nothing to show: no header either");
        // a copy being built beside a full set is shown too (not all in sync), progress unknown
        assertTrue(StatusText.groupTable(List.of(new ClusterMessage.GroupRow(GroupId.of(1, 0),
                ReplicaGroupView.State.SERVING, 1, Ballot.of(1, 1), List.of(2), List.of(new ClusterMessage.JoiningCopy(3,
                -1)), BACKUPS, "")), false).contains("node 3         ok"));
    }

    @Test
    void aStatusReplyWithGroupsSaysHowManyNeedAttentionAndTheStatusLineCountsThem() {
        StatusReply reply = new StatusReply(2, "", List.of(), 0, List.of(), "", List.of(), List.of(), groupRows());
        String table = StatusText.clusterTable(reply);
        assertTrue(table.contains("replica groups, as node 2 sees them: 5, 3 not served, short of copies or not in sync"
                + " (--groups lists every group)"), table);
        assertTrue(table.contains("segment 3/1: 0 of 1 backups (re-replicating)"), table);
        assertFalse(table.contains("ok (promoted"), table);
        assertTrue(StatusText.clusterTable(reply, true).contains("ok (promoted: node 2 downed 12:01:07)"));
        String fine = StatusText.clusterTable(new StatusReply(2, "", List.of(), 0, List.of(), "", List.of(), List.of(),
                groupRows().subList(0, 1)));
        assertTrue(fine.contains("replica groups, as node 2 sees them: 1, every one served with its copies in sync"
                + " (--groups lists them)"), fine);
        assertFalse(fine.contains("in-sync copies"), fine);
        assertFalse(StatusText.clusterTable(new StatusReply(2, "", List.of(), 0)).contains("replica groups"),
                "replication off: no group section");

        NodeStatus withGroups = new NodeStatus(2, null, new TreeSet<>(List.of(1, 2)), 0, 2, 128L << 10, 0, "tcp", 77,
                Duration.ofSeconds(3), 5, 3);
        assertTrue(StatusText.statusLine(withGroups).contains("| names 0 | groups 5 (3 short or not in sync) |"),
                StatusText.statusLine(withGroups));
        assertTrue(StatusText.statusLine(new NodeStatus(2, null, new TreeSet<>(List.of(1, 2)), 0, 2, 128L << 10, 0,
                "tcp", 77, Duration.ofSeconds(3), 5, 0)).contains("| groups 5 (all ok) |"));
    }
}
