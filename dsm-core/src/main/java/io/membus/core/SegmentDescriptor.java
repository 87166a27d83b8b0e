package io.membus.core;

/**
 * What a peer needs to know to reach one exported segment: the directory entry.
 *
 * @param nodeId      owner node id (1..65535)
 * @param incarnation owner's incarnation; a node that restarts gets a new one
 * @param index       segment index on the owner (0..255)
 * @param size        bytes in the data area
 * @param flags       {@link Access} flags
 * @param remoteKey   the 64-bit remote key every verb on this segment must name
 *
 * <p><b>Note:</b> immutable value; thread-safe.
 */
public record SegmentDescriptor(int nodeId, long incarnation, int index, long size, int flags, long remoteKey) {

    public SegmentDescriptor {
        RemotePtr.pack(nodeId, index, 0); // validates node id and index
        if (size <= 0 || size - 1 > RemotePtr.MAX_OFFSET) {
            throw new IllegalArgumentException("segment size out of range: size=" + size + ", allowed=1.."
                    + (RemotePtr.MAX_OFFSET + 1));
        }
        Access.validate(flags);
    }

    /** Pointer to {@code offset} in this segment. */
    public long pointer(long offset) {
        return RemotePtr.pack(nodeId, index, offset);
    }

    @Override
    public String toString() {
        // never print the remote key: it is a capability
        return "SegmentDescriptor{node=" + nodeId + ", incarnation=" + incarnation + ", segment=" + index
                + ", size=" + size + ", flags=" + Access.toString(flags) + "}";
    }
}
