package io.membus.core.directory;

/**
 * Where a peer node's transport can be reached: its node id, its incarnation, and
 * a transport-specific address ({@code host:port} for tcp, the shared directory
 * for shm, the fabric name for local).
 *
 * <p><b>Note:</b> immutable value; thread-safe.
 */
public record PeerInfo(int nodeId, long incarnation, String address) {
    @Override
    public String toString() {
        return "node " + nodeId + " (incarnation " + incarnation + ") at " + address;
    }
}
