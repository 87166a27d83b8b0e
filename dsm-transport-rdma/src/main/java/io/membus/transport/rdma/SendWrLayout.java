package io.membus.transport.rdma;

/**
 * Byte layout of rdma-core's {@code struct ibv_send_wr} and {@code struct ibv_sge}
 * on x86_64 (LP64, little-endian), as the native {@code ibv_post_send} reads them.
 *
 * <p>Source: {@code <infiniband/verbs.h>} of rdma-core 44.0 (Debian 12 package
 * {@code libibverbs-dev 44.0-2}); every offset below was printed with
 * {@code offsetof} by a C program compiled against that header (the program and
 * its output are in {@code docs/rdma-transport.md}). The layout of this struct has
 * not changed since libibverbs 1.1 except for members appended after
 * {@code qp_type}, which Membus leaves zero.
 *
 * <pre>
 *  0               8               16              24      28      32      36      40
 * +---------------+---------------+---------------+-------+-------+-------+-------+
 * |    wr_id      |     next      |    sg_list    |num_sge|opcode |sflags |imm    |
 * +---------------+---------------+---------------+-------+-------+-------+-------+
 *  40              48              56              64      68      72
 * +---------------+---------------+---------------+-------+-------+---------------+
 * | remote_addr   | rdma.rkey|pad |               |       |       |               |  wr.rdma
 * | remote_addr   |  compare_add  |     swap      | rkey  |  pad  |               |  wr.atomic
 * +---------------+---------------+---------------+-------+-------+---------------+
 *  72              80                                                     128
 * +---------------+-------------------------------------------------------+
 * | qp_type (xrc) | bind_mw / tso (unused by Membus, zero)                |
 * +---------------+-------------------------------------------------------+
 *
 * struct ibv_sge (16 bytes):  0 addr (u64) | 8 length (u32) | 12 lkey (u32)
 * </pre>
 *
 * The atomic member's {@code rkey} is at 64, not at 48 where the {@code rdma}
 * member keeps it: DiSNI 2.1 writes only the {@code rdma} member, so an atomic
 * posted through it would carry its compare value in the rkey's place and no
 * rkey at all. {@link SendWrFlyweight} writes every member itself.
 *
 * <p><b>Note:</b> constants only; thread-safe.
 */
public final class SendWrLayout {
    /** {@code sizeof(struct ibv_send_wr)}. */
    public static final int SEND_WR_SIZE = 128;
    public static final int WR_ID_OFFSET = 0;
    public static final int NEXT_OFFSET = 8;
    public static final int SG_LIST_OFFSET = 16;
    public static final int NUM_SGE_OFFSET = 24;
    public static final int OPCODE_OFFSET = 28;
    public static final int SEND_FLAGS_OFFSET = 32;
    public static final int IMM_DATA_OFFSET = 36;
    /** {@code wr.rdma.remote_addr} and {@code wr.atomic.remote_addr} (same offset). */
    public static final int REMOTE_ADDR_OFFSET = 40;
    /** {@code wr.rdma.rkey} (u32). */
    public static final int RDMA_RKEY_OFFSET = 48;
    /** {@code wr.atomic.compare_add} (u64). */
    public static final int ATOMIC_COMPARE_ADD_OFFSET = 48;
    /** {@code wr.atomic.swap} (u64). */
    public static final int ATOMIC_SWAP_OFFSET = 56;
    /** {@code wr.atomic.rkey} (u32). */
    public static final int ATOMIC_RKEY_OFFSET = 64;
    /** {@code qp_type.xrc.remote_srqn}: first byte after the {@code wr} union. */
    public static final int QP_TYPE_OFFSET = 72;

    /** {@code sizeof(struct ibv_sge)}. */
    public static final int SGE_SIZE = 16;
    public static final int SGE_ADDR_OFFSET = 0;
    public static final int SGE_LENGTH_OFFSET = 8;
    public static final int SGE_LKEY_OFFSET = 12;

    /** {@code enum ibv_wr_opcode}. */
    public static final int IBV_WR_RDMA_WRITE = 0;
    /** A two-sided SEND: the bytes land in a receive buffer the peer posted. */
    public static final int IBV_WR_SEND = 2;
    public static final int IBV_WR_RDMA_READ = 4;
    public static final int IBV_WR_ATOMIC_CMP_AND_SWP = 5;
    public static final int IBV_WR_ATOMIC_FETCH_AND_ADD = 6;

    /** {@code enum ibv_send_flags}. */
    public static final int IBV_SEND_FENCE = 1;
    public static final int IBV_SEND_SIGNALED = 1 << 1;

    /** {@code enum ibv_access_flags}. */
    public static final int IBV_ACCESS_LOCAL_WRITE = 1;
    public static final int IBV_ACCESS_REMOTE_WRITE = 1 << 1;
    public static final int IBV_ACCESS_REMOTE_READ = 1 << 2;
    public static final int IBV_ACCESS_REMOTE_ATOMIC = 1 << 3;

    /** {@code enum ibv_atomic_cap}: atomics are atomic against CPU atomics too. */
    public static final int IBV_ATOMIC_GLOB = 2;

    private SendWrLayout() {
    }

    /** The rdma-core name of a work-request opcode, for messages. */
    public static String opcodeName(int opcode) {
        return switch (opcode) {
            case IBV_WR_RDMA_WRITE -> "RDMA_WRITE";
            case IBV_WR_SEND -> "SEND";
            case IBV_WR_RDMA_READ -> "RDMA_READ";
            case IBV_WR_ATOMIC_CMP_AND_SWP -> "ATOMIC_CMP_AND_SWP";
            case IBV_WR_ATOMIC_FETCH_AND_ADD -> "ATOMIC_FETCH_AND_ADD";
            default -> "opcode(" + opcode + ")";
        };
    }
}
