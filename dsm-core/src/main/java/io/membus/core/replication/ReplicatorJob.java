package io.membus.core.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.transport.Transport;

import java.time.Duration;
import java.util.Map;
import java.util.Set;

/**
 * A job of the forwarding engine ({@link CopySide}, {@link Promotion}, {@link CopyPlacement},
 * {@link GracefulLeave}): the {@link ReplicatorState} they share, and its parts under the
 * short names every job's code uses.
 *
 * <p><b>Note:</b> the references are final and set before the engine starts; what they point
 * at documents its own thread-safety (concurrent maps and sets, the service's thread).
 */
abstract class ReplicatorJob {
    final ReplicatorState state;
    final Transport transport;
    final RemoteMemory memory;
    final SegmentDirectory directory;
    final ReplicationConfig config;
    final int self;
    final Duration timeout;
    final int partBytes;
    final ReplicationService service;
    final Map<Integer, CopyStream> streams;
    final Map<Integer, ReplicaGroup> primaries;
    final Map<Integer, CopyReplica> copies;
    final Map<Integer, GroupClaim> claims;
    final Set<Integer> departing;
    final Set<Integer> lostCopy;
    final Set<Integer> seenMembers;

    ReplicatorJob(ReplicatorState state) {
        this.state = state;
        this.transport = state.transport;
        this.memory = state.memory;
        this.directory = state.directory;
        this.config = state.config;
        this.self = state.self;
        this.timeout = state.timeout;
        this.partBytes = state.partBytes;
        this.service = state.service;
        this.streams = state.streams;
        this.primaries = state.primaries;
        this.copies = state.copies;
        this.claims = state.claims;
        this.departing = state.departing;
        this.lostCopy = state.lostCopy;
        this.seenMembers = state.seenMembers;
    }
}
