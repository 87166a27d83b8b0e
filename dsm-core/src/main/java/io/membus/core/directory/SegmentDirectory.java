package io.membus.core.directory;

import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.PeerInfo;

import java.util.Collection;
import java.util.Optional;

/**
 * What a node knows of the cluster's memory: the members (where their transport
 * listens, their incarnation) and the segments they export. Lower layers
 * (allocator, coherence, collections) learn about members and segments only
 * through this SPI; the cluster module implements it on Pekko Distributed Data,
 * {@link StaticDirectory} implements it in memory for tests and single-process
 * clusters.
 *
 * <p><b>Note:</b> implementations are thread-safe; a lookup sees every change
 * whose listener callback has run.
 */
public interface SegmentDirectory {

    /** The member with that node id, if it is known and not removed. */
    Optional<PeerInfo> member(int nodeId);

    /** Every known live member. */
    Collection<PeerInfo> members();

    /** The segment {@code index} of node {@code nodeId}, if exported and its node is live. */
    Optional<SegmentDescriptor> segment(int nodeId, int index);

    /** Every known segment of live members. */
    Collection<SegmentDescriptor> segments();

    /**
     * The replica group of logical segment {@code (nodeId, index)}, if replication
     * knows it; empty when the segment is not replicated (replication off, or never
     * exported). Must not allocate on a hit: routing calls it for every verb.
     */
    default Optional<ReplicaGroupView> group(int nodeId, int index) {
        return Optional.empty();
    }

    /** Every replica group known, in any state. */
    default Collection<ReplicaGroupView> groups() {
        return java.util.List.of();
    }

    /**
     * The live members that hold memory: the nodes that may hold copies of replica groups
     * (a client node, {@code membus.role = client}, never does). By default the members
     * that export at least one segment; a directory that knows roles answers from them.
     */
    default java.util.Set<Integer> memoryNodes() {
        java.util.Set<Integer> nodes = new java.util.TreeSet<>();
        for (SegmentDescriptor d : segments()) {
            if (member(d.nodeId()).isPresent()) {
                nodes.add(d.nodeId());
            }
        }
        return nodes;
    }

    /** Registers a listener; it is called on the thread that applies a change. */
    void addListener(DirectoryListener listener);

    void removeListener(DirectoryListener listener);
}
