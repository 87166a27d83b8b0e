package io.membus.cluster;

import io.membus.alloc.HeapUsage;
import io.membus.cluster.ClusterMessage.Bind;
import io.membus.cluster.ClusterMessage.MemberRow;
import io.membus.cluster.ClusterMessage.NameReply;
import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.cluster.ClusterMessage.StatusReply;
import io.membus.cluster.ClusterMessage.StatusRequest;
import io.membus.cluster.ClusterMessage.Unbind;
import io.membus.core.SegmentDescriptor;
import io.membus.core.replication.GroupClaim;
import io.membus.core.replication.GroupId;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.serialization.SerializerWithStringManifest;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.NotSerializableException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Compact binary form of every {@link ClusterMessage} for Pekko remoting and
 * Distributed Data. Each message is a one-letter manifest and a
 * {@link DataOutputStream} body: fixed-width numbers, length-prefixed UTF-8 strings,
 * counted lists. Unknown manifests and malformed bodies are refused with
 * {@link NotSerializableException}, never guessed at.
 *
 * <p><b>Note:</b> stateless; thread-safe (Pekko shares one instance per actor system).
 */
public final class ClusterSerializer extends SerializerWithStringManifest {
    /** Fixed identifier (also set in reference.conf); never reuse for another format. */
    public static final int IDENTIFIER = 7461;

    private static final int MAX_LIST = 1 << 16;
    private static final int MAX_TEXT = 1 << 20;

    public ClusterSerializer(ExtendedActorSystem system) {
    }

    @Override
    public int identifier() {
        return IDENTIFIER;
    }

    @Override
    public String manifest(Object o) {
        if (o instanceof NodeEntry e) {
            // an entry without claims keeps the old manifest and bytes (and so its old tag): E; with claims: F
            return e.claims().isEmpty() ? "E" : "F";
        } else if (o instanceof Bind) {
            return "B";
        } else if (o instanceof Unbind) {
            return "U";
        } else if (o instanceof NameReply) {
            return "N";
        } else if (o instanceof StatusRequest) {
            return "Q";
        } else if (o instanceof StatusReply) {
            return "S";
        } else if (o instanceof MemberRow) {
            return "M";
        } else if (o instanceof ClusterMessage.NameBinding) {
            return "P";
        }
        throw new IllegalArgumentException("not a membus cluster message: " + o.getClass().getName());
    }

    @Override
    public byte[] toBinary(Object o) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(64);
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            if (o instanceof NodeEntry e) {
                writeEntry(out, e);
            } else if (o instanceof Bind b) {
                out.writeUTF(b.name());
                out.writeLong(b.ptr());
                out.writeLong(b.macHi());
                out.writeLong(b.macLo());
            } else if (o instanceof Unbind u) {
                out.writeUTF(u.name());
                out.writeLong(u.expected());
                out.writeLong(u.macHi());
                out.writeLong(u.macLo());
            } else if (o instanceof ClusterMessage.NameBinding b) {
                out.writeLong(b.ptr());
                out.writeLong(b.macHi());
                out.writeLong(b.macLo());
            } else if (o instanceof NameReply r) {
                out.writeLong(r.ptr());
                out.writeUTF(r.error());
                out.writeLong(r.macHi());
                out.writeLong(r.macLo());
            } else if (o instanceof StatusRequest) {
                out.writeByte(0);
            } else if (o instanceof StatusReply s) {
                out.writeInt(s.fromNode());
                out.writeUTF(s.leader());
                out.writeInt(s.members().size());
                for (MemberRow m : s.members()) {
                    writeRow(out, m);
                }
                out.writeInt(s.names());
                out.writeInt(s.heap().size());
                for (HeapUsage.SegmentUsage h : s.heap()) {
                    writeHeapRow(out, h);
                }
                writeLongString(out, s.heapProblem());
                out.writeInt(s.channels().size());
                for (ClusterMessage.ChannelRow c : s.channels()) {
                    out.writeShort(c.channel());
                    out.writeUTF(c.name());
                    out.writeLong(c.messagesIn());
                    out.writeLong(c.bytesIn());
                    out.writeLong(c.messagesOut());
                    out.writeLong(c.bytesOut());
                    out.writeLong(c.errors());
                }
                out.writeInt(s.sections().size());
                for (StatusSection section : s.sections()) {
                    out.writeUTF(section.name());
                    out.writeInt(section.facts().size());
                    for (Map.Entry<String, String> f : section.facts().entrySet()) {
                        out.writeUTF(f.getKey());
                        writeLongString(out, f.getValue());
                    }
                }
                out.writeInt(s.groups().size());
                for (ClusterMessage.GroupRow g : s.groups()) {
                    writeGroupRow(out, g);
                }
            } else if (o instanceof MemberRow m) {
                writeRow(out, m);
            } else {
                throw new IllegalArgumentException("not a membus cluster message: " + o.getClass().getName());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    @Override
    public Object fromBinary(byte[] bytes, String manifest) throws NotSerializableException {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
            Object o = switch (manifest) {
                case "E" -> readEntry(in, false);
                case "F" -> readEntry(in, true);
                case "B" -> new Bind(in.readUTF(), in.readLong(), in.readLong(), in.readLong());
                case "U" -> new Unbind(in.readUTF(), in.readLong(), in.readLong(), in.readLong());
                case "P" -> new ClusterMessage.NameBinding(in.readLong(), in.readLong(), in.readLong());
                case "N" -> new NameReply(in.readLong(), in.readUTF(), in.readLong(), in.readLong());
                case "Q" -> {
                    in.readByte();
                    yield new StatusRequest();
                }
                case "S" -> {
                    int from = in.readInt();
                    String leader = in.readUTF();
                    int n = count(in);
                    List<MemberRow> rows = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        rows.add(readRow(in));
                    }
                    int names = in.readInt();
                    int h = count(in);
                    List<HeapUsage.SegmentUsage> heap = new ArrayList<>(h);
                    for (int i = 0; i < h; i++) {
                        heap.add(readHeapRow(in));
                    }
                    String heapProblem = readLongString(in);
                    int c = count(in);
                    List<ClusterMessage.ChannelRow> channels = new ArrayList<>(c);
                    for (int i = 0; i < c; i++) {
                        channels.add(new ClusterMessage.ChannelRow(in.readShort(), in.readUTF(), in.readLong(),
                                in.readLong(), in.readLong(), in.readLong(), in.readLong()));
                    }
                    int sc = count(in);
                    List<StatusSection> sections = new ArrayList<>(sc);
                    for (int i = 0; i < sc; i++) {
                        String name = in.readUTF();
                        int fc = count(in);
                        Map<String, String> facts = new java.util.LinkedHashMap<>();
                        for (int j = 0; j < fc; j++) {
                            facts.put(in.readUTF(), readLongString(in));
                        }
                        sections.add(new StatusSection(name, facts));
                    }
                    int gc = count(in);
                    List<ClusterMessage.GroupRow> groups = new ArrayList<>(gc);
                    for (int i = 0; i < gc; i++) {
                        groups.add(readGroupRow(in));
                    }
                    yield new StatusReply(from, leader, rows, names, heap, heapProblem, channels, sections, groups);
                }
                case "M" -> readRow(in);
                default -> throw new NotSerializableException("unknown membus manifest: manifest=" + manifest
                        + ", allowed=E,F,B,U,P,N,Q,S,M (a peer running another Membus version?)");
            };
            if (in.available() != 0) {
                throw new NotSerializableException("trailing bytes in membus message: manifest=" + manifest
                        + ", trailing=" + in.available());
            }
            return o;
        } catch (NotSerializableException e) {
            throw e;
        } catch (IOException | RuntimeException e) {
            NotSerializableException n = new NotSerializableException("malformed membus message: manifest=" + manifest
                    + ", length=" + bytes.length + ": " + e);
            n.initCause(e);
            throw n;
        }
    }

    /** A string that may pass writeUTF's 64 KiB: length-prefixed UTF-8, bounded by MAX_TEXT. */
    private static void writeLongString(DataOutputStream out, String s) throws IOException {
        byte[] b = s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        if (b.length > MAX_TEXT) {
            b = java.util.Arrays.copyOf(b, MAX_TEXT);
        }
        out.writeInt(b.length);
        out.write(b);
    }

    private static String readLongString(DataInputStream in) throws IOException {
        int n = in.readInt();
        if (n < 0 || n > MAX_TEXT || n > in.available()) {
            throw new IOException("text length out of range: length=" + n + ", allowed=0.." + Math.min(MAX_TEXT,
                    in.available()));
        }
        return new String(in.readNBytes(n), java.nio.charset.StandardCharsets.UTF_8);
    }

    private static int count(DataInputStream in) throws IOException {
        int n = in.readInt();
        if (n < 0 || n > MAX_LIST) {
            throw new IOException("list length out of range: length=" + n + ", allowed=0.." + MAX_LIST);
        }
        return n;
    }

    private static void writeEntry(DataOutputStream out, NodeEntry e) throws IOException {
        writeEntryFields(out, e);
        out.writeLong(e.macHi());
        out.writeLong(e.macLo());
    }

    /** The bytes of an entry's fields without its tag: what {@link ClusterMacs#entry} authenticates. */
    static byte[] entryBytes(NodeEntry e) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(64);
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            writeEntryFields(out, e);
        } catch (IOException x) {
            throw new UncheckedIOException(x);
        }
        return bytes.toByteArray();
    }

    private static void writeEntryFields(DataOutputStream out, NodeEntry e) throws IOException {
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
        if (!e.claims().isEmpty()) { // manifest F: the claims follow (covered by the tag like every field)
            out.writeInt(e.claims().size());
            for (GroupClaim c : e.claims()) {
                writeClaim(out, c);
            }
        }
    }

    private static void writeClaim(DataOutputStream out, GroupClaim c) throws IOException {
        out.writeInt(c.group());
        out.writeLong(c.epoch());
        out.writeByte(c.role().ordinal());
        out.writeLong(c.size());
        out.writeInt(c.flags());
        out.writeLong(c.remoteKey());
        int[] inSync = c.inSync();
        out.writeInt(inSync.length);
        for (int n : inSync) {
            out.writeInt(n);
        }
        out.writeLong(c.since());
    }

    private static final GroupClaim.Role[] ROLES = GroupClaim.Role.values();

    private static GroupClaim readClaim(DataInputStream in) throws IOException {
        int group = in.readInt();
        int node = GroupId.node(group);
        if (group < 0 || node < 1 || node > io.membus.core.RemotePtr.MAX_NODE_ID) {
            throw new IOException("claim's group out of range: group=" + group + ", allowed=node 1.."
                    + io.membus.core.RemotePtr.MAX_NODE_ID + " << 8 | index 0.." + io.membus.core.RemotePtr.MAX_SEGMENT_INDEX);
        }
        long epoch = in.readLong();
        int role = in.readUnsignedByte();
        if (role >= ROLES.length) {
            throw new IOException("claim's role out of range: role=" + role + ", allowed=0.." + (ROLES.length - 1));
        }
        long size = in.readLong();
        int flags = in.readInt();
        long remoteKey = in.readLong();
        int n = count(in);
        int[] inSync = new int[n];
        for (int i = 0; i < n; i++) {
            inSync[i] = in.readInt();
        }
        return new GroupClaim(group, epoch, ROLES[role], size, flags, remoteKey, inSync, in.readLong());
    }

    private static NodeEntry readEntry(DataInputStream in, boolean withClaims) throws IOException {
        int node = in.readInt();
        long incarnation = in.readLong();
        String address = in.readUTF();
        long uid = in.readLong();
        String transport = in.readUTF();
        String transportAddress = in.readUTF();
        int n = count(in);
        List<SegmentDescriptor> segments = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            segments.add(new SegmentDescriptor(node, incarnation, in.readShort(), in.readLong(), in.readByte(),
                    in.readLong()));
        }
        int h = count(in);
        List<Integer> heaps = new ArrayList<>(h);
        for (int i = 0; i < h; i++) {
            int index = in.readShort();
            if (index < 0 || index > io.membus.core.RemotePtr.MAX_SEGMENT_INDEX) {
                throw new IOException("heap segment index out of range: index=" + index + ", allowed=0.."
                        + io.membus.core.RemotePtr.MAX_SEGMENT_INDEX);
            }
            heaps.add(index);
        }
        List<GroupClaim> claims = List.of();
        if (withClaims) {
            int c = count(in);
            if (c == 0) {
                throw new IOException("an entry of manifest F has claims: count=0, allowed=1.." + MAX_LIST
                        + " (an entry without claims is manifest E)");
            }
            claims = new ArrayList<>(c);
            for (int i = 0; i < c; i++) {
                claims.add(readClaim(in));
            }
        }
        return new NodeEntry(node, incarnation, address, uid, transport, transportAddress, segments, heaps, claims,
                in.readLong(), in.readLong());
    }

    private static final io.membus.core.directory.ReplicaGroupView.State[] STATES =
            io.membus.core.directory.ReplicaGroupView.State.values();

    private static void writeGroupRow(DataOutputStream out, ClusterMessage.GroupRow g) throws IOException {
        out.writeInt(g.group());
        out.writeByte(g.state().ordinal());
        out.writeInt(g.primary());
        out.writeLong(g.epoch());
        out.writeInt(g.inSync().size());
        for (int n : g.inSync()) {
            out.writeInt(n);
        }
        out.writeInt(g.joining().size());
        for (ClusterMessage.JoiningCopy j : g.joining()) {
            out.writeInt(j.node());
            out.writeInt(j.percent());
        }
        out.writeInt(g.backups());
        writeLongString(out, g.note());
    }

    private static ClusterMessage.GroupRow readGroupRow(DataInputStream in) throws IOException {
        int group = in.readInt();
        int state = in.readUnsignedByte();
        if (state >= STATES.length) {
            throw new IOException("group row's state out of range: state=" + state + ", allowed=0.." + (STATES.length - 1));
        }
        int primary = in.readInt();
        long epoch = in.readLong();
        int n = count(in);
        List<Integer> inSync = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            inSync.add(in.readInt());
        }
        int j = count(in);
        List<ClusterMessage.JoiningCopy> joining = new ArrayList<>(j);
        for (int i = 0; i < j; i++) {
            joining.add(new ClusterMessage.JoiningCopy(in.readInt(), in.readInt()));
        }
        int backups = in.readInt();
        return new ClusterMessage.GroupRow(group, STATES[state], primary, epoch, inSync, joining, backups,
                readLongString(in));
    }

    private static void writeHeapRow(DataOutputStream out, HeapUsage.SegmentUsage h) throws IOException {
        out.writeInt(h.nodeId());
        out.writeInt(h.segment());
        out.writeInt(h.chunkSize());
        out.writeInt(h.chunks());
        out.writeInt(h.freeChunks());
        out.writeInt(h.smallChunks());
        out.writeInt(h.largeChunks());
        out.writeLong(h.blocksInUse());
        out.writeLong(h.blocksFree());
        out.writeInt(h.largeObjects());
        out.writeInt(h.chunksByOwner().size());
        for (Map.Entry<Integer, Integer> e : h.chunksByOwner().entrySet()) {
            out.writeInt(e.getKey());
            out.writeInt(e.getValue());
        }
        out.writeBoolean(h.problem() != null);
        if (h.problem() != null) {
            writeLongString(out, h.problem());
        }
    }

    private static HeapUsage.SegmentUsage readHeapRow(DataInputStream in) throws IOException {
        int node = in.readInt();
        int segment = in.readInt();
        int chunkSize = in.readInt();
        int chunks = in.readInt();
        int free = in.readInt();
        int small = in.readInt();
        int large = in.readInt();
        long blocksInUse = in.readLong();
        long blocksFree = in.readLong();
        int objects = in.readInt();
        int n = count(in);
        Map<Integer, Integer> owners = new TreeMap<>();
        for (int i = 0; i < n; i++) {
            owners.put(in.readInt(), in.readInt());
        }
        String problem = in.readBoolean() ? readLongString(in) : null;
        return new HeapUsage.SegmentUsage(node, segment, chunkSize, chunks, free, small, large, blocksInUse, blocksFree,
                objects, owners, problem);
    }

    private static void writeRow(DataOutputStream out, MemberRow m) throws IOException {
        out.writeUTF(m.address());
        out.writeUTF(m.status());
        out.writeBoolean(m.reachable());
        out.writeInt(m.nodeId());
        // 0: no entry; 1: an entry without claims (E); 2: an entry with claims (F)
        out.writeByte(m.entry() == null ? 0 : m.entry().claims().isEmpty() ? 1 : 2);
        if (m.entry() != null) {
            writeEntry(out, m.entry());
        }
        out.writeUTF(m.role());
    }

    private static MemberRow readRow(DataInputStream in) throws IOException {
        String address = in.readUTF();
        String status = in.readUTF();
        boolean reachable = in.readBoolean();
        int node = in.readInt();
        int kind = in.readUnsignedByte();
        if (kind > 2) {
            throw new IOException("member row's entry kind out of range: kind=" + kind + ", allowed=0..2");
        }
        NodeEntry entry = kind == 0 ? null : readEntry(in, kind == 2);
        return new MemberRow(address, status, reachable, node, entry, in.readUTF());
    }
}
