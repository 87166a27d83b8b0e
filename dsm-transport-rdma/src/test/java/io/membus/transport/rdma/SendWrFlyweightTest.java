package io.membus.transport.rdma;

import net.openhft.chronicle.core.UnsafeMemory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * Proves the bytes of the work requests against {@code struct ibv_send_wr} and
 * {@code struct ibv_sge} of rdma-core 44.0 on x86_64. The expected images are built
 * here from literal offsets (the {@code offsetof} output recorded in
 * docs/rdma-transport.md), not from {@link SendWrLayout}'s constants, so a wrong
 * constant fails these tests.
 */
class SendWrFlyweightTest {
    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;
    private static final int SIZE = 128 + 16;
    private long address;

    @BeforeEach
    void allocate() {
        address = MEMORY.allocate(SIZE);
        for (int i = 0; i < SIZE; i++) {
            MEMORY.writeByte(address + i, (byte) 0xA5); // garbage every field must overwrite
        }
    }

    @AfterEach
    void free() {
        MEMORY.freeMemory(address, SIZE);
    }

    private byte[] actual() {
        byte[] b = new byte[SIZE];
        for (int i = 0; i < SIZE; i++) {
            b[i] = MEMORY.readByte(address + i);
        }
        return b;
    }

    /** The expected image: header fields at rdma-core's offsets, SGE at 128; every other byte zero. */
    private ByteBuffer expected(long wrId, int opcode, long sgeAddr, int sgeLength, int lkey) {
        ByteBuffer b = ByteBuffer.allocate(SIZE).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(0, wrId);            // wr_id
        b.putLong(8, 0L);              // next: a single work request
        b.putLong(16, address + 128);  // sg_list: the SGE right after the work request
        b.putInt(24, 1);               // num_sge
        b.putInt(28, opcode);          // opcode
        b.putInt(32, 2);               // send_flags = IBV_SEND_SIGNALED
        b.putInt(36, 0);               // imm_data
        b.putLong(128, sgeAddr);       // sge.addr
        b.putInt(136, sgeLength);      // sge.length
        b.putInt(140, lkey);           // sge.lkey
        return b;
    }

    @Test
    void rdmaReadPutsRemoteAddressAt40AndRkeyAt48() {
        new SendWrFlyweight().wrap(address).read(0x0102030405060708L, 0x7f00_0000_1000L, 4096, 0x11223344,
                0x7f12_3456_7000L, 0xCAFEBABE);
        ByteBuffer e = expected(0x0102030405060708L, 4, 0x7f00_0000_1000L, 4096, 0x11223344);
        e.putLong(40, 0x7f12_3456_7000L);
        e.putInt(48, 0xCAFEBABE);
        assertArrayEquals(e.array(), actual());
    }

    @Test
    void sendHasOpcodeTwoAndAZeroedUnion() {
        new SendWrFlyweight().wrap(address).send(77, 0x3000, 1024, 9);
        ByteBuffer e = expected(77, 2, 0x3000, 1024, 9); // IBV_WR_SEND = 2; bytes 40..127 zero
        assertArrayEquals(e.array(), actual());
    }

    @Test
    void aReceiveWorkRequestIsWrIdNextSgListNumSgeThenItsSgeAt32() {
        // struct ibv_recv_wr of rdma-core 44.0 on x86_64: wr_id 0, next 8, sg_list 16, num_sge 24, sizeof 32
        new RecvWrFlyweight().wrap(address).receive(0x55AA_0001L, 0x7f00_1234_0000L, 65552, 0x0BADF00D);
        ByteBuffer e = ByteBuffer.allocate(SIZE).order(ByteOrder.LITTLE_ENDIAN);
        e.putLong(0, 0x55AA_0001L);
        e.putLong(8, 0L);
        e.putLong(16, address + 32);
        e.putInt(24, 1);
        e.putLong(32, 0x7f00_1234_0000L);
        e.putInt(40, 65552);
        e.putInt(44, 0x0BADF00D);
        byte[] want = e.array();
        byte[] got = actual();
        for (int i = 48; i < SIZE; i++) {
            want[i] = (byte) 0xA5; // past the receive work request and its SGE: untouched
        }
        assertArrayEquals(want, got);
        RecvWrFlyweight r = new RecvWrFlyweight().wrap(address);
        assertEquals(0x55AA_0001L, r.wrId());
        assertEquals(0x7f00_1234_0000L, r.sgeAddress());
        assertEquals(65552, r.sgeLength());
        assertEquals(0x0BADF00D, r.sgeLocalKey());
    }

    @Test
    void rdmaWriteHasOpcodeZeroAndTheRdmaMember() {
        new SendWrFlyweight().wrap(address).write(42, 0x1000, 17, 7, 0x2000, 0x0000_1234);
        ByteBuffer e = expected(42, 0, 0x1000, 17, 7);
        e.putLong(40, 0x2000);
        e.putInt(48, 0x1234);
        assertArrayEquals(e.array(), actual());
    }

    @Test
    void compareAndSwapFillsTheAtomicMemberCompareAt48SwapAt56RkeyAt64() {
        new SendWrFlyweight().wrap(address).compareAndSwap(9, 0x3000, 0x55, 0x4008, 0x89ABCDEF,
                0x1111_2222_3333_4444L, 0x5555_6666_7777_8888L);
        ByteBuffer e = expected(9, 5, 0x3000, 8, 0x55);
        e.putLong(40, 0x4008);                 // wr.atomic.remote_addr
        e.putLong(48, 0x1111_2222_3333_4444L); // wr.atomic.compare_add
        e.putLong(56, 0x5555_6666_7777_8888L); // wr.atomic.swap
        e.putInt(64, 0x89ABCDEF);              // wr.atomic.rkey
        assertArrayEquals(e.array(), actual());
    }

    @Test
    void fetchAndAddPutsTheDeltaInCompareAddAndZeroSwap() {
        new SendWrFlyweight().wrap(address).fetchAndAdd(10, 0x3000, 0x55, 0x4010, 0x01020304, -3L);
        ByteBuffer e = expected(10, 6, 0x3000, 8, 0x55);
        e.putLong(40, 0x4010);
        e.putLong(48, -3L);
        e.putLong(56, 0L);
        e.putInt(64, 0x01020304);
        assertArrayEquals(e.array(), actual());
    }

    @Test
    void reusingASlotLeavesNoStaleFieldOfTheEarlierVerb() {
        SendWrFlyweight f = new SendWrFlyweight().wrap(address);
        f.compareAndSwap(1, 0x3000, 0x55, 0x4008, 0x89ABCDEF, -1L, -1L);
        f.read(2, 0x1000, 64, 7, 0x2000, 0x1234);
        ByteBuffer e = expected(2, 4, 0x1000, 64, 7);
        e.putLong(40, 0x2000);
        e.putInt(48, 0x1234);
        assertArrayEquals(e.array(), actual(), "the atomic swap and rkey of the earlier CAS are cleared");
        f.fetchAndAdd(3, 0x3000, 0x55, 0x4008, 0x77, 5);
        assertEquals(0x77, f.remoteKey());
        assertEquals(5, f.compareAdd());
        assertEquals(0, f.swap());
    }

    @Test
    void readersDecodeWhatWasWritten() {
        SendWrFlyweight f = new SendWrFlyweight().wrap(address);
        f.compareAndSwap(77, 0x3000, 0x55, 0x4008, 0x89ABCDEF, 11, 12);
        assertEquals(77, f.wrId());
        assertEquals(SendWrLayout.IBV_WR_ATOMIC_CMP_AND_SWP, f.opcode());
        assertEquals(0x4008, f.remoteAddress());
        assertEquals(0x89ABCDEF, f.remoteKey());
        assertEquals(11, f.compareAdd());
        assertEquals(12, f.swap());
        assertEquals(0x3000, f.sgeAddress());
        assertEquals(8, f.sgeLength());
        assertEquals(0x55, f.sgeLocalKey());
    }

    @Test
    void layoutConstantsMatchRdmaCore44() {
        assertEquals(128, SendWrLayout.SEND_WR_SIZE);
        assertEquals(40, SendWrLayout.REMOTE_ADDR_OFFSET);
        assertEquals(48, SendWrLayout.RDMA_RKEY_OFFSET);
        assertEquals(48, SendWrLayout.ATOMIC_COMPARE_ADD_OFFSET);
        assertEquals(56, SendWrLayout.ATOMIC_SWAP_OFFSET);
        assertEquals(64, SendWrLayout.ATOMIC_RKEY_OFFSET);
        assertEquals(16, SendWrLayout.SGE_SIZE);
        assertEquals(144, SendWrFlyweight.ENCODED_SIZE);
    }

    @Test
    void refusesAnUnalignedOrNullAddress() {
        SendWrFlyweight f = new SendWrFlyweight();
        assertEquals("work request address must be non-zero and 8-byte aligned: address=0x0",
                assertThrows(IllegalArgumentException.class, () -> f.wrap(0)).getMessage());
        assertThrows(IllegalArgumentException.class, () -> f.wrap(address + 4));
    }
}
