package io.membus.samples.cluster;

import io.membus.alloc.HeapUsage;
import io.membus.cluster.ClusterMessage;
import io.membus.cluster.ClusterMessage.MemberRow;
import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.cluster.ClusterMessage.StatusReply;
import io.membus.cluster.NodeStatus;
import io.membus.core.Access;
import io.membus.core.SegmentDescriptor;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
}
