package io.membus.cluster;

import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.core.Access;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.transport.PeerInfo;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

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
