package io.membus.cluster;

import io.membus.alloc.HeapUsage;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupClaim;
import io.membus.core.directory.PeerInfo;
import io.membus.core.replication.GroupId;

import java.util.List;

/**
 * Marker of every message and replicated value of the cluster module; bound to
 * {@link ClusterSerializer} in this module's {@code reference.conf}, so none of them
 * ever goes through Java serialization.
 *
 * <p><b>Note:</b> every implementation is an immutable value; thread-safe.
 */
public sealed interface ClusterMessage {

    /**
     * One node's directory entry, replicated with Distributed Data under its node id:
     * where its Pekko member is (address and uid, to tell incarnations apart), where its
     * transport listens, what it exports, which of its segments are allocator heaps
     * ({@code heapSegments}, so a client, which has none, learns where it may place blocks),
     * and the replica-group {@link GroupClaim}s it holds ({@code claims}: primary, copy or
     * joining, with their epochs; empty with replication off). Written only by its own node,
     * the property that keeps last-writer-wins safe; the tag covers every field, claims
     * included ({@link ClusterMacs#entry}).
     */
    record NodeEntry(int nodeId, long incarnation, String memberAddress, long memberUid, String transport,
                     String transportAddress, List<SegmentDescriptor> segments, List<Integer> heapSegments,
                     List<GroupClaim> claims, long macHi, long macLo)
            implements ClusterMessage {
        public NodeEntry {
            segments = List.copyOf(segments);
            heapSegments = List.copyOf(heapSegments);
            claims = List.copyOf(claims);
        }

        /** An entry without claims (replication off, or none held yet), with its tag. */
        public NodeEntry(int nodeId, long incarnation, String memberAddress, long memberUid, String transport,
                         String transportAddress, List<SegmentDescriptor> segments, List<Integer> heapSegments,
                         long macHi, long macLo) {
            this(nodeId, incarnation, memberAddress, memberUid, transport, transportAddress, segments, heapSegments,
                    List.of(), macHi, macLo);
        }

        /** An entry whose node runs no heap, without its tag. */
        public NodeEntry(int nodeId, long incarnation, String memberAddress, long memberUid, String transport,
                         String transportAddress, List<SegmentDescriptor> segments) {
            this(nodeId, incarnation, memberAddress, memberUid, transport, transportAddress, segments, List.of());
        }

        /** An entry without its tag (see {@link #withMac}). */
        public NodeEntry(int nodeId, long incarnation, String memberAddress, long memberUid, String transport,
                         String transportAddress, List<SegmentDescriptor> segments, List<Integer> heapSegments) {
            this(nodeId, incarnation, memberAddress, memberUid, transport, transportAddress, segments, heapSegments,
                    List.of(), 0, 0);
        }

        /** This entry with {@code tag} (made under the cluster secret over the other fields). */
        NodeEntry withMac(ClusterMacs.Tag tag) {
            return new NodeEntry(nodeId, incarnation, memberAddress, memberUid, transport, transportAddress, segments,
                    heapSegments, claims, tag.hi(), tag.lo());
        }

        /**
         * This entry with its claims replaced by {@code next}, untagged: the caller tags it
         * again ({@link #withMac}), since the tag covers the claims.
         */
        public NodeEntry withClaims(List<GroupClaim> next) {
            return new NodeEntry(nodeId, incarnation, memberAddress, memberUid, transport, transportAddress, segments,
                    heapSegments, next, 0, 0);
        }

        public PeerInfo peer() {
            return new PeerInfo(nodeId, incarnation, transportAddress);
        }

        /** Bytes exported in all segments. */
        public long exportedBytes() {
            long sum = 0;
            for (SegmentDescriptor d : segments) {
                sum += d.size();
            }
            return sum;
        }
    }

    /**
     * Bind {@code name} to {@code ptr} unless bound (sent to the name arbiter, the oldest
     * member); the tag is made under the cluster secret ({@link ClusterMacs#bind}).
     */
    record Bind(String name, long ptr, long macHi, long macLo) implements ClusterMessage {
    }

    /**
     * Remove the binding of {@code name}; when {@code expected} is not 0, only if it is bound to
     * that pointer. The tag is {@link ClusterMacs#unbind} (over the name and {@code expected}).
     */
    record Unbind(String name, long expected, long macHi, long macLo) implements ClusterMessage {
    }

    /**
     * A replicated name binding: the pointer and the tag its binder made under the cluster
     * secret; every node ignores a binding whose tag is wrong.
     */
    record NameBinding(long ptr, long macHi, long macLo) implements ClusterMessage {
    }

    /**
     * The arbiter's answer: the pointer bound after a {@link Bind} with its tag, or whether an
     * {@link Unbind} removed something ({@code ptr} 1) or not (0); {@code error} is
     * non-empty when the arbiter could not reach a majority or refused the request
     * ({@code authentication: ...}).
     */
    record NameReply(long ptr, String error, long macHi, long macLo) implements ClusterMessage {
        public NameReply(long ptr, String error) {
            this(ptr, error, 0, 0);
        }
    }

    /** Asks a node for the cluster as it sees it ({@code membus status}). */
    record StatusRequest() implements ClusterMessage {
    }

    /**
     * One member as a node sees it; {@code entry} is {@code null} when its directory entry
     * has not arrived; {@code role} is {@code member} (exports memory) or {@code client}
     * ({@code membus.role}), or {@code observer} for a Pekko member that is no Membus node.
     */
    record MemberRow(String address, String status, boolean reachable, int nodeId, NodeEntry entry, String role)
            implements ClusterMessage {
        /** A row of a memory node ({@code role} member). */
        public MemberRow(String address, String status, boolean reachable, int nodeId, NodeEntry entry) {
            this(address, status, reachable, nodeId, entry, "member");
        }

        public boolean isClient() {
            return role.equals("client");
        }
    }

    /**
     * The answer to {@link StatusRequest}, as data (the {@code membus status} command lays
     * it out): {@code heap} is the answering node's reading of the cluster's heap segments,
     * one row per segment (empty when it runs no allocator); {@code heapProblem} says why
     * they could not be read, else it is empty.
     */
    record StatusReply(int fromNode, String leader, List<MemberRow> members, int names,
                       List<HeapUsage.SegmentUsage> heap, String heapProblem, List<ChannelRow> channels,
                       List<StatusSection> sections, List<GroupRow> groups)
            implements ClusterMessage {
        public StatusReply {
            members = List.copyOf(members);
            heap = List.copyOf(heap);
            channels = List.copyOf(channels);
            sections = List.copyOf(sections);
            groups = List.copyOf(groups);
        }

        /** A reply without replica groups (replication off). */
        public StatusReply(int fromNode, String leader, List<MemberRow> members, int names,
                           List<HeapUsage.SegmentUsage> heap, String heapProblem, List<ChannelRow> channels,
                           List<StatusSection> sections) {
            this(fromNode, leader, members, names, heap, heapProblem, channels, sections, List.of());
        }

        public StatusReply(int fromNode, String leader, List<MemberRow> members, int names) {
            this(fromNode, leader, members, names, List.of(), "", List.of(), List.of(), List.of());
        }
    }

    /**
     * One replica group as the answering node sees it ({@code membus status}'s group table,
     * docs/replication.md §1): from its directory's {@link ReplicaGroupView}, or, for a
     * group the node holds, from its replication engine, which knows more (how far a
     * joining copy is, why the group was last promoted).
     *
     * @param group   {@link io.membus.core.replication.GroupId}
     * @param state   where the group stands
     * @param primary the serving node; 0 unless {@link ReplicaGroupView.State#SERVING}
     * @param epoch   the group's {@link io.membus.core.replication.Ballot}
     * @param inSync  live in-sync copies (besides the primary), in the primary's order
     * @param joining copies being built
     * @param backups copies the group should have ({@code membus.replication.backups} of the answering node)
     * @param note    what the engine adds to an ok row ({@code promoted: node 2 downed 12:01:07}), or empty
     *
     * <p><b>Note:</b> immutable value (lists copied in); thread-safe.
     */
    record GroupRow(int group, ReplicaGroupView.State state, int primary, long epoch, List<Integer> inSync,
                    List<JoiningCopy> joining, int backups, String note) {
        public GroupRow {
            inSync = List.copyOf(inSync);
            joining = List.copyOf(joining);
            java.util.Objects.requireNonNull(state, "state");
            java.util.Objects.requireNonNull(note, "note");
        }

        /** The row of a directory view: no progress, no note. */
        public static GroupRow of(ReplicaGroupView v, int backups) {
            List<JoiningCopy> joining = new java.util.ArrayList<>();
            for (int n : v.joining()) {
                joining.add(new JoiningCopy(n, -1));
            }
            return new GroupRow(v.group(), v.state(), v.primary(), v.epoch(),
                    java.util.Arrays.stream(v.inSync()).boxed().toList(), joining, backups, "");
        }

        /** The group as {@code membus status} names it: {@code node/index} of the segment it began as. */
        public String groupText() {
            return GroupId.toString(group);
        }

        /** The epoch as {@code membus status} shows it: {@code round.coordinator}, or {@code -} when none. */
        public String epochText() {
            return Ballot.toString(epoch);
        }

        /** Whether {@code membus status} shows it without {@code --groups}: not served, short of copies, or not all in sync. */
        public boolean needsAttention() {
            return state != ReplicaGroupView.State.SERVING || inSync.size() < backups || !joining.isEmpty();
        }
    }

    /**
     * A copy being built on {@code node}; {@code percent} copied so far, or -1 when not known.
     *
     * <p><b>Note:</b> immutable value; thread-safe.
     */
    record JoiningCopy(int node, int percent) {
    }

    /** The answering node's counters of one message channel (two-sided messages). */
    record ChannelRow(int channel, String name, long messagesIn, long bytesIn, long messagesOut, long bytesOut,
                      long errors) {
    }
}
