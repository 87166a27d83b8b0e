package io.membus.cluster;

import io.membus.alloc.HeapUsage;
import io.membus.cluster.ClusterMessage.Bind;
import io.membus.cluster.ClusterMessage.MemberRow;
import io.membus.cluster.ClusterMessage.NameReply;
import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.cluster.ClusterMessage.StatusReply;
import io.membus.cluster.ClusterMessage.StatusRequest;
import io.membus.cluster.ClusterMessage.Unbind;
import io.membus.core.Access;
import io.membus.core.SegmentDescriptor;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupClaim;
import io.membus.core.replication.GroupId;
import org.junit.jupiter.api.Test;

import java.io.NotSerializableException;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ClusterSerializerTest {
    private final ClusterSerializer serializer = new ClusterSerializer(null);

    private Object roundTrip(Object o) throws Exception {
        return serializer.fromBinary(serializer.toBinary(o), serializer.manifest(o));
    }

    private static NodeEntry entry() {
        return new NodeEntry(12, 1795456478715008L, "pekko://membus@127.0.0.1:2551", -5429557790317613636L, "shm",
                "/dev/shm/membus", List.of(new SegmentDescriptor(12, 1795456478715008L, 0, 65536, Access.ALL, 0x1234_5678_9abc_def0L),
                new SegmentDescriptor(12, 1795456478715008L, 255, 1L << 40, Access.READ_ONLY, -1L)), List.of(255));
    }

    @Test
    void everyMessageSurvivesARoundTrip() throws Exception {
        List<Object> all = List.of(entry(), entry().withMac(new ClusterMacs.Tag(-1L, 0x0123_4567_89ab_cdefL)),
                new Bind("queue/é", 0x0001_0200_0000_0040L, 7, -8), new Unbind("x", 0, -1, 1), new Unbind("y", 0x0001_0200_0000_0040L, 2, -2),
                new ClusterMessage.NameBinding(0x0001_0200_0000_0040L, Long.MIN_VALUE, 3),
                new NameReply(5, "", 9, -9), new NameReply(0, "no majority"), new StatusRequest(),
                new StatusReply(3, "pekko://membus@h:1", List.of(new MemberRow("pekko://membus@h:1", "Up", true, 12, entry()),
                        new MemberRow("pekko://membus@h:2", "Joining", false, 0, null),
                        new MemberRow("pekko://membus@h:3", "Up", true, 14, null, "client")), 4,
                        List.of(new HeapUsage.SegmentUsage(1, 1, 65536, 100, 87, 12, 1, 300, 20, 1, Map.of(1, 12, 3, 1),
                                null), new HeapUsage.SegmentUsage(2, 1, 0, 0, 0, 0, 0, 0, 0, 0, Map.of(),
                                "not formatted é")), "", List.of(), List.of(new StatusSection("coherence",
                                Map.of("caching", "off", "why-not", "clock skew é")))),
                new StatusReply(4, "", List.of(), 0, List.of(), "", List.of(), List.of(), List.of(
                        new ClusterMessage.GroupRow(GroupId.of(3, 1), io.membus.core.directory.ReplicaGroupView.State.SERVING,
                                3, Ballot.of(1, 3), List.of(1, 2), List.of(new ClusterMessage.JoiningCopy(4, 41),
                                new ClusterMessage.JoiningCopy(5, -1)), 2, "promoted: node 2 downed é"),
                        new ClusterMessage.GroupRow(GroupId.of(65535, 255), io.membus.core.directory.ReplicaGroupView.State.LOST,
                                0, Ballot.NONE, List.of(), List.of(), 1, ""))),
                new StatusReply(2, "", List.of(), 0, List.of(), "heap usage could not be read: x", List.of(
                        new ClusterMessage.ChannelRow(40, "coherence-inval", 7, 700, 3, 300, 1),
                        new ClusterMessage.ChannelRow(-2, "x", 0, 0, 0, 0, 0)), List.of()));
        for (Object o : all) {
            assertEquals(o, roundTrip(o));
        }
    }

    @Test
    void unknownManifestsAndMalformedBodiesAreRefused() {
        NotSerializableException unknown = assertThrows(NotSerializableException.class,
                () -> serializer.fromBinary(new byte[0], "Z"));
        assertTrue(unknown.getMessage().contains("manifest=Z"), unknown.getMessage());
        byte[] good = serializer.toBinary(entry());
        NotSerializableException truncated = assertThrows(NotSerializableException.class,
                () -> serializer.fromBinary(Arrays.copyOf(good, good.length - 3), "E"));
        assertTrue(truncated.getMessage().contains("malformed membus message: manifest=E"), truncated.getMessage());
        byte[] longer = Arrays.copyOf(good, good.length + 1);
        assertThrows(NotSerializableException.class, () -> serializer.fromBinary(longer, "E"));
        byte[] hugeList = serializer.toBinary(new StatusReply(1, "", List.of(), 0));
        hugeList[4 + 2] = 0x7f; // list count follows the int and the empty UTF string
        assertThrows(NotSerializableException.class, () -> serializer.fromBinary(hugeList, "S"));
        byte[] longText = serializer.toBinary(new StatusReply(1, "", List.of(), 0, List.of(), "x", List.of(),
                List.of()));
        longText[longText.length - 16] = 0x7f; // heap problem's text length beyond the bytes that follow
        assertThrows(NotSerializableException.class, () -> serializer.fromBinary(longText, "S"));
        assertThrows(IllegalArgumentException.class, () -> serializer.manifest("a string"));
    }

    private static NodeEntry entryWithClaims() {
        return entry().withClaims(List.of(
                new GroupClaim(GroupId.of(12, 0), Ballot.initial(12), GroupClaim.Role.PRIMARY, 65536, Access.ALL,
                        0x1234_5678_9abc_def0L, new int[] {3, 7}, 1_764_000_000_000L),
                new GroupClaim(GroupId.of(65535, 255), Ballot.of(5, 3), GroupClaim.Role.COPY, 1L << 40,
                        Access.READ_ONLY, -1L, null, 0),
                new GroupClaim(GroupId.of(3, 1), Ballot.of(2, 3), GroupClaim.Role.JOINING, 4096, Access.ALL, 7,
                        new int[0], -5)));
    }

    @Test
    void anEntryWithClaimsSurvivesARoundTripUnderItsOwnManifest() throws Exception {
        NodeEntry e = entryWithClaims();
        assertEquals("F", serializer.manifest(e));
        assertEquals("E", serializer.manifest(entry()), "an entry without claims keeps the old manifest");
        NodeEntry tagged = e.withMac(new ClusterMacs.Tag(11, -12));
        assertEquals(e, roundTrip(e));
        assertEquals(tagged, roundTrip(tagged));
        NodeEntry back = (NodeEntry) roundTrip(tagged);
        assertEquals(3, back.claims().size());
        assertArrayEquals(new int[] {3, 7}, back.claims().get(0).inSync());
        assertEquals(GroupClaim.Role.JOINING, back.claims().get(2).role());
        // inside a status reply's member rows too
        StatusReply reply = new StatusReply(1, "", List.of(new MemberRow("pekko://m@h:1", "Up", true, 12, tagged),
                new MemberRow("pekko://m@h:2", "Up", true, 13, entry()), new MemberRow("a", "Joining", false, 0, null)),
                0);
        assertEquals(reply, roundTrip(reply));
        // a claim list that is empty under F, a role past the enum, or a group of node 0 is refused
        byte[] good = serializer.toBinary(e);
        NotSerializableException truncated = assertThrows(NotSerializableException.class,
                () -> serializer.fromBinary(Arrays.copyOf(good, good.length - 9), "F"));
        assertTrue(truncated.getMessage().contains("manifest=F"), truncated.getMessage());
        assertThrows(NotSerializableException.class, () -> serializer.fromBinary(serializer.toBinary(entry()), "F"));
        NodeEntry badRole = entry().withClaims(List.of(new GroupClaim(GroupId.of(1, 0), 1, GroupClaim.Role.COPY, 8, 0,
                0, null, 0)));
        byte[] b = serializer.toBinary(badRole);
        int role = b.length - 16 /* tag */ - 8 /* since */ - 4 /* inSync count */ - 8 - 4 - 8 - 1;
        assertEquals(GroupClaim.Role.COPY.ordinal(), b[role]);
        b[role] = 9;
        NotSerializableException r = assertThrows(NotSerializableException.class, () -> serializer.fromBinary(b, "F"));
        assertTrue(r.getMessage().contains("role=9"), r.getMessage());
        byte[] g = serializer.toBinary(badRole);
        int group = role - 8 - 4;
        g[group] = 0;
        g[group + 1] = 0;
        g[group + 2] = 0; // node 0
        NotSerializableException n = assertThrows(NotSerializableException.class, () -> serializer.fromBinary(g, "F"));
        assertTrue(n.getMessage().contains("group="), n.getMessage());
    }

    /** The bytes an entry had before claims existed (manifest E), written field by field as that version did. */
    private static byte[] oldFormat(NodeEntry e) throws Exception {
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
        try (java.io.DataOutputStream out = new java.io.DataOutputStream(bytes)) {
            out.writeInt(e.nodeId());
            out.writeLong(e.incarnation());
            out.writeUTF(e.memberAddress());
            out.writeLong(e.memberUid());
            out.writeUTF(e.transport());
            out.writeUTF(e.transportAddress());
            out.writeInt(e.segments().size());
            for (SegmentDescriptor d : e.segments()) {
                out.writeShort(d.index());
                out.writeLong(d.size());
                out.writeByte(d.flags());
                out.writeLong(d.remoteKey());
            }
            out.writeInt(e.heapSegments().size());
            for (int index : e.heapSegments()) {
                out.writeShort(index);
            }
            out.writeLong(e.macHi());
            out.writeLong(e.macLo());
        }
        return bytes.toByteArray();
    }

    @Test
    void anEntryWrittenBeforeClaimsExistedStillDecodesAndItsTagStillHolds() throws Exception {
        ClusterMacs macs = new ClusterMacs(ClusterSecret.resolve("serializer-test-secret-0123", ""));
        NodeEntry plain = entry();
        NodeEntry tagged = plain.withMac(macs.entry(plain));
        NodeEntry decoded = (NodeEntry) serializer.fromBinary(oldFormat(tagged), "E");
        assertEquals(tagged, decoded);
        assertTrue(decoded.claims().isEmpty());
        assertTrue(macs.valid(decoded), "the tag made over the old bytes still matches: an entry without claims"
                + " authenticates the same bytes as before");
        assertArrayEquals(oldFormat(tagged), serializer.toBinary(tagged), "an entry without claims is written as before");
    }

    @Test
    void aForgedClaimIsRefusedLikeAForgedSegment() throws Exception {
        ClusterMacs macs = new ClusterMacs(ClusterSecret.resolve("serializer-test-secret-0123", ""));
        NodeEntry honest = entryWithClaims();
        NodeEntry tagged = honest.withMac(macs.entry(honest));
        assertTrue(macs.valid(tagged));
        assertTrue(macs.valid((NodeEntry) roundTrip(tagged)), "the tag survives the wire");
        ClusterMacs.Tag tag = new ClusterMacs.Tag(tagged.macHi(), tagged.macLo());
        // a forged segment (today's check) ...
        NodeEntry forgedSegment = new NodeEntry(honest.nodeId(), honest.incarnation(), honest.memberAddress(),
                honest.memberUid(), honest.transport(), honest.transportAddress(), List.of(new SegmentDescriptor(12,
                honest.incarnation(), 0, 65536, Access.ALL, 42)), honest.heapSegments(), honest.claims(), 0, 0)
                .withMac(tag);
        assertFalse(macs.valid(forgedSegment));
        // ... and every forged claim under the same tag: a higher epoch, another role, another in-sync list,
        // another remote key, a claim added, a claim removed
        GroupClaim primary = honest.claims().get(0);
        List<List<GroupClaim>> forgeries = List.of(
                List.of(new GroupClaim(primary.group(), Ballot.of(9, 12), primary.role(), primary.size(), primary.flags(),
                        primary.remoteKey(), primary.inSync(), primary.since()), honest.claims().get(1), honest.claims().get(2)),
                List.of(primary, honest.claims().get(1), new GroupClaim(GroupId.of(3, 1), Ballot.of(2, 3),
                        GroupClaim.Role.PRIMARY, 4096, Access.ALL, 7, new int[0], -5)),
                List.of(new GroupClaim(primary.group(), primary.epoch(), primary.role(), primary.size(), primary.flags(),
                        primary.remoteKey(), new int[] {3}, primary.since()), honest.claims().get(1), honest.claims().get(2)),
                List.of(new GroupClaim(primary.group(), primary.epoch(), primary.role(), primary.size(), primary.flags(),
                        1, primary.inSync(), primary.since()), honest.claims().get(1), honest.claims().get(2)),
                List.of(primary, honest.claims().get(1), honest.claims().get(2), new GroupClaim(GroupId.of(7, 0),
                        Ballot.of(3, 12), GroupClaim.Role.PRIMARY, 8, Access.ALL, 1, null, 0)),
                List.of(primary, honest.claims().get(1)),
                List.of());
        for (List<GroupClaim> claims : forgeries) {
            NodeEntry forged = honest.withClaims(claims).withMac(tag);
            assertFalse(macs.valid(forged), "forged claims " + claims);
            assertFalse(macs.valid((NodeEntry) roundTrip(forged)), "forged claims after the wire " + claims);
        }
        ClusterMacs other = new ClusterMacs(ClusterSecret.resolve("another-cluster-secret-456", ""));
        assertFalse(other.valid(tagged), "a tag made under another secret");
    }
}
