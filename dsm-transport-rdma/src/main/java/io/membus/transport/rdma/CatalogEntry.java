package io.membus.transport.rdma;

import io.membus.core.Access;

/**
 * One exported segment as a peer sees it over {@code rdma}: what the handshake's
 * catalog carries.
 *
 * @param index     segment index on the owner
 * @param address   the owner's virtual address of data byte 0 (the registered range's start)
 * @param size      bytes registered
 * @param remoteKey the segment's 64-bit Membus remote key: its low 32 bits are the
 *                  memory region's rkey the NIC checks; its high 32 bits are drawn from
 *                  {@code SecureRandom} and checked by the initiator against this entry,
 *                  so a key of an earlier registration whose rkey the NIC happens to
 *                  reuse is still refused
 * @param flags     {@link Access} flags the region was registered with
 *
 * <p><b>Note:</b> immutable value; thread-safe.
 */
public record CatalogEntry(int index, long address, long size, long remoteKey, int flags) {

    /** The rkey a work request carries: the low 32 bits of the remote key. */
    public int rkey() {
        return rkeyOf(remoteKey);
    }

    public static int rkeyOf(long remoteKey) {
        return (int) remoteKey;
    }

    /** A Membus remote key from a memory region's rkey and a random high word. */
    public static long remoteKey(int rkey, int nonce) {
        return ((long) nonce << 32) | (rkey & 0xffff_ffffL);
    }

    @Override
    public String toString() {
        // never print the remote key: it is a capability
        return "CatalogEntry{segment=" + index + ", size=" + size + ", flags=" + Access.toString(flags) + "}";
    }
}
