package io.membus.transport.rdma;

import net.openhft.chronicle.core.UnsafeMemory;

/**
 * Writes one {@code struct ibv_recv_wr} followed by its single {@code struct ibv_sge}
 * into native memory: a receive buffer posted for the peer's SENDs.
 *
 * <p>Source: {@code <infiniband/verbs.h>} of rdma-core 44.0 (package
 * {@code libibverbs-dev 44.0-2}), x86_64; offsets printed with {@code offsetof}
 * (the program and its output are in {@code docs/rdma-transport.md}).
 *
 * <pre>
 *  0               8               16              24      28      32
 * +---------------+---------------+---------------+-------+-------+
 * |    wr_id      |     next      |    sg_list    |num_sge| (pad) |   sizeof(struct ibv_recv_wr) = 32
 * +---------------+---------------+---------------+-------+-------+
 *  32: struct ibv_sge: addr (u64) | length (u32) | lkey (u32)         16 bytes
 * </pre>
 *
 * <p><b>Note:</b> not thread-safe: one flyweight per posting thread. Plain stores;
 * the {@code ibv_post_recv} JNI call that follows orders them.
 */
public final class RecvWrFlyweight {
    /** {@code sizeof(struct ibv_recv_wr)}. */
    public static final int RECV_WR_SIZE = 32;
    public static final int WR_ID_OFFSET = 0;
    public static final int NEXT_OFFSET = 8;
    public static final int SG_LIST_OFFSET = 16;
    public static final int NUM_SGE_OFFSET = 24;
    /** Bytes one encoded receive work request occupies: the WR and its one SGE. */
    public static final int ENCODED_SIZE = RECV_WR_SIZE + SendWrLayout.SGE_SIZE;

    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;

    private long address;

    public RecvWrFlyweight wrap(long address) {
        if (address == 0 || (address & 7) != 0) {
            throw new IllegalArgumentException("work request address must be non-zero and 8-byte aligned: address=0x"
                    + Long.toHexString(address));
        }
        this.address = address;
        return this;
    }

    /** A receive buffer of {@code length} bytes at {@code localAddress}. */
    public RecvWrFlyweight receive(long wrId, long localAddress, int length, int localKey) {
        long a = address;
        MEMORY.writeLong(a + WR_ID_OFFSET, wrId);
        MEMORY.writeLong(a + NEXT_OFFSET, 0L);
        MEMORY.writeLong(a + SG_LIST_OFFSET, a + RECV_WR_SIZE);
        MEMORY.writeInt(a + NUM_SGE_OFFSET, 1);
        MEMORY.writeInt(a + NUM_SGE_OFFSET + 4, 0);
        long sge = a + RECV_WR_SIZE;
        MEMORY.writeLong(sge + SendWrLayout.SGE_ADDR_OFFSET, localAddress);
        MEMORY.writeInt(sge + SendWrLayout.SGE_LENGTH_OFFSET, length);
        MEMORY.writeInt(sge + SendWrLayout.SGE_LKEY_OFFSET, localKey);
        return this;
    }

    public long wrId() {
        return MEMORY.readLong(address + WR_ID_OFFSET);
    }

    public long sgeAddress() {
        return MEMORY.readLong(MEMORY.readLong(address + SG_LIST_OFFSET) + SendWrLayout.SGE_ADDR_OFFSET);
    }

    public int sgeLength() {
        return MEMORY.readInt(MEMORY.readLong(address + SG_LIST_OFFSET) + SendWrLayout.SGE_LENGTH_OFFSET);
    }

    public int sgeLocalKey() {
        return MEMORY.readInt(MEMORY.readLong(address + SG_LIST_OFFSET) + SendWrLayout.SGE_LKEY_OFFSET);
    }
}
