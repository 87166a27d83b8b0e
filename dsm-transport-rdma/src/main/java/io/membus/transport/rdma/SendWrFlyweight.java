package io.membus.transport.rdma;

import net.openhft.chronicle.core.UnsafeMemory;

import static io.membus.transport.rdma.SendWrLayout.*;

/**
 * Writes one {@code struct ibv_send_wr} followed by its single {@code struct ibv_sge}
 * into native memory, laid out per {@link SendWrLayout}. The work request's
 * {@code sg_list} points at the SGE right after it ({@code address + SEND_WR_SIZE}).
 * Every byte the NIC reads is written on every encode (no stale field survives from
 * the previous use of a slot); the members after the {@code wr} union are zeroed.
 *
 * <p>Integers are stored in the host's byte order (x86_64: little-endian), as the C
 * compiler would; libibverbs converts to wire order itself.
 *
 * <p><b>Note:</b> not thread-safe: one flyweight per posting thread (or guarded by
 * the queue pair's post lock). Plain stores: the {@code ibv_post_send} call that
 * follows is a JNI call, which orders them before the doorbell.
 */
public final class SendWrFlyweight {
    /** Bytes one encoded work request occupies: the WR and its one SGE. */
    public static final int ENCODED_SIZE = SEND_WR_SIZE + SGE_SIZE;

    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;

    private long address;

    /** Points this flyweight at {@link #ENCODED_SIZE} bytes of native memory. */
    public SendWrFlyweight wrap(long address) {
        if (address == 0 || (address & 7) != 0) {
            throw new IllegalArgumentException("work request address must be non-zero and 8-byte aligned: address=0x"
                    + Long.toHexString(address));
        }
        this.address = address;
        return this;
    }

    public long address() {
        return address;
    }

    /** An {@code IBV_WR_RDMA_READ} of {@code length} bytes at the remote address into the local buffer. */
    public SendWrFlyweight read(long wrId, long localAddress, int length, int localKey, long remoteAddress,
                                int remoteKey) {
        header(wrId, IBV_WR_RDMA_READ, localAddress, length, localKey);
        rdma(remoteAddress, remoteKey);
        return this;
    }

    /** An {@code IBV_WR_RDMA_WRITE} of {@code length} bytes from the local buffer to the remote address. */
    public SendWrFlyweight write(long wrId, long localAddress, int length, int localKey, long remoteAddress,
                                 int remoteKey) {
        header(wrId, IBV_WR_RDMA_WRITE, localAddress, length, localKey);
        rdma(remoteAddress, remoteKey);
        return this;
    }

    /** An {@code IBV_WR_ATOMIC_CMP_AND_SWP}; the old value lands in the 8-byte local buffer. */
    public SendWrFlyweight compareAndSwap(long wrId, long localAddress, int localKey, long remoteAddress,
                                          int remoteKey, long expected, long update) {
        header(wrId, IBV_WR_ATOMIC_CMP_AND_SWP, localAddress, Long.BYTES, localKey);
        atomic(remoteAddress, remoteKey, expected, update);
        return this;
    }

    /** An {@code IBV_WR_ATOMIC_FETCH_AND_ADD}; the old value lands in the 8-byte local buffer. */
    public SendWrFlyweight fetchAndAdd(long wrId, long localAddress, int localKey, long remoteAddress,
                                       int remoteKey, long delta) {
        header(wrId, IBV_WR_ATOMIC_FETCH_AND_ADD, localAddress, Long.BYTES, localKey);
        atomic(remoteAddress, remoteKey, delta, 0L);
        return this;
    }

    /**
     * An {@code IBV_WR_SEND} of {@code length} bytes from the local buffer into the
     * next receive buffer the peer posted; the {@code wr} union is zeroed (a SEND
     * names no remote address).
     */
    public SendWrFlyweight send(long wrId, long localAddress, int length, int localKey) {
        header(wrId, IBV_WR_SEND, localAddress, length, localKey);
        long a = address;
        for (int o = REMOTE_ADDR_OFFSET; o < QP_TYPE_OFFSET; o += Long.BYTES) {
            MEMORY.writeLong(a + o, 0L);
        }
        return this;
    }

    private void header(long wrId, int opcode, long localAddress, int length, int localKey) {
        long a = address;
        MEMORY.writeLong(a + WR_ID_OFFSET, wrId);
        MEMORY.writeLong(a + NEXT_OFFSET, 0L);
        MEMORY.writeLong(a + SG_LIST_OFFSET, a + SEND_WR_SIZE);
        MEMORY.writeInt(a + NUM_SGE_OFFSET, 1);
        MEMORY.writeInt(a + OPCODE_OFFSET, opcode);
        MEMORY.writeInt(a + SEND_FLAGS_OFFSET, IBV_SEND_SIGNALED);
        MEMORY.writeInt(a + IMM_DATA_OFFSET, 0);
        for (int o = QP_TYPE_OFFSET; o < SEND_WR_SIZE; o += Long.BYTES) {
            MEMORY.writeLong(a + o, 0L);
        }
        long sge = a + SEND_WR_SIZE;
        MEMORY.writeLong(sge + SGE_ADDR_OFFSET, localAddress);
        MEMORY.writeInt(sge + SGE_LENGTH_OFFSET, length);
        MEMORY.writeInt(sge + SGE_LKEY_OFFSET, localKey);
    }

    private void rdma(long remoteAddress, int remoteKey) {
        long a = address;
        MEMORY.writeLong(a + REMOTE_ADDR_OFFSET, remoteAddress);
        MEMORY.writeLong(a + RDMA_RKEY_OFFSET, remoteKey & 0xffff_ffffL); // rkey and the padding after it
        MEMORY.writeLong(a + ATOMIC_SWAP_OFFSET, 0L);
        MEMORY.writeLong(a + ATOMIC_RKEY_OFFSET, 0L);
    }

    private void atomic(long remoteAddress, int remoteKey, long compareAdd, long swap) {
        long a = address;
        MEMORY.writeLong(a + REMOTE_ADDR_OFFSET, remoteAddress);
        MEMORY.writeLong(a + ATOMIC_COMPARE_ADD_OFFSET, compareAdd);
        MEMORY.writeLong(a + ATOMIC_SWAP_OFFSET, swap);
        MEMORY.writeLong(a + ATOMIC_RKEY_OFFSET, remoteKey & 0xffff_ffffL); // rkey and the padding after it
    }

    // ---- readers, used by the software NIC of the tests and by diagnostics ----

    public long wrId() {
        return MEMORY.readLong(address + WR_ID_OFFSET);
    }

    public int opcode() {
        return MEMORY.readInt(address + OPCODE_OFFSET);
    }

    public long remoteAddress() {
        return MEMORY.readLong(address + REMOTE_ADDR_OFFSET);
    }

    /** The rkey of whichever union member the opcode selects. */
    public int remoteKey() {
        int op = opcode();
        boolean atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
        return MEMORY.readInt(address + (atomic ? ATOMIC_RKEY_OFFSET : RDMA_RKEY_OFFSET));
    }

    public long compareAdd() {
        return MEMORY.readLong(address + ATOMIC_COMPARE_ADD_OFFSET);
    }

    public long swap() {
        return MEMORY.readLong(address + ATOMIC_SWAP_OFFSET);
    }

    public long sgeAddress() {
        return MEMORY.readLong(MEMORY.readLong(address + SG_LIST_OFFSET) + SGE_ADDR_OFFSET);
    }

    public int sgeLength() {
        return MEMORY.readInt(MEMORY.readLong(address + SG_LIST_OFFSET) + SGE_LENGTH_OFFSET);
    }

    public int sgeLocalKey() {
        return MEMORY.readInt(MEMORY.readLong(address + SG_LIST_OFFSET) + SGE_LKEY_OFFSET);
    }
}
