package io.membus.core.capability;

/**
 * How a transport can keep copies of a memory node's segments, as its
 * {@link io.membus.core.capability.TransportCapabilities#replication()} says.
 *
 * <ul>
 *   <li>{@link #FORWARDING}: the target's CPU executes every verb (the soft NIC of
 *       {@code tcp}, {@code local}), so the primary of a group forwards each change to
 *       its copies before it answers.</li>
 *   <li>{@link #ADOPTION}: segments are files on one host that outlive their process
 *       ({@code shm}); a survivor adopts a dead node's files instead of copying.</li>
 *   <li>{@link #NONE}: changes never pass the target's CPU ({@code rdma}: the NIC runs
 *       them); {@code membus.replication.backups > 0} is refused at start.</li>
 * </ul>
 */
public enum ReplicationSupport {
    FORWARDING, ADOPTION, NONE
}
