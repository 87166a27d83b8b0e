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
import org.junit.jupiter.api.Test;

import java.io.NotSerializableException;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
                new Bind("queue/é", 0x0001_0200_0000_0040L, 7, -8), new Unbind("x", -1, 1),
                new ClusterMessage.NameBinding(0x0001_0200_0000_0040L, Long.MIN_VALUE, 3),
                new NameReply(5, "", 9, -9), new NameReply(0, "no majority"), new StatusRequest(),
                new StatusReply(3, "pekko://membus@h:1", List.of(new MemberRow("pekko://membus@h:1", "Up", true, 12, entry()),
                        new MemberRow("pekko://membus@h:2", "Joining", false, 0, null),
                        new MemberRow("pekko://membus@h:3", "Up", true, 14, null, "client")), 4,
                        List.of(new HeapUsage.SegmentUsage(1, 1, 65536, 100, 87, 12, 1, 300, 20, 1, Map.of(1, 12, 3, 1),
                                null), new HeapUsage.SegmentUsage(2, 1, 0, 0, 0, 0, 0, 0, 0, 0, Map.of(),
                                "not formatted é")), "", List.of(), List.of(new StatusSection("coherence",
                                Map.of("caching", "off", "why-not", "clock skew é")))),
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
        longText[longText.length - 12] = 0x7f; // heap problem's text length beyond the bytes that follow
        assertThrows(NotSerializableException.class, () -> serializer.fromBinary(longText, "S"));
        assertThrows(IllegalArgumentException.class, () -> serializer.manifest("a string"));
    }
}
