package io.membus.transport.rdma;

import net.openhft.chronicle.core.UnsafeMemory;

import java.io.IOException;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * One end of a software queue pair's SEND/RECV path: decodes the SEND and receive
 * work requests {@link RdmaMessages} encodes, and does what an RC responder does
 * with them: a SEND fills the oldest receive buffer the peer posted (none posted:
 * {@code IBV_WC_RNR_RETRY_EXC_ERR}; longer than the buffer: {@code IBV_WC_LOC_LEN_ERR}),
 * reports a receive completion with the length at the peer and a send completion
 * here. A destroyed peer answers SENDs with {@code IBV_WC_RETRY_EXC_ERR}; after the
 * first error the end is in error state and flushes.
 *
 * <p><b>Note:</b> thread-safe; posts are serialised by the caller, completions are
 * polled by one thread.
 */
final class SoftPort implements MessagePort {
    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;
    private static final int LOCAL_KEY = 0x43;

    private final int slots;
    private final int slotBytes;
    private final long base;
    private final long length;
    private final ConcurrentLinkedQueue<Long> posted = new ConcurrentLinkedQueue<>(); // receive WR addresses
    private final ConcurrentLinkedQueue<long[]> completions = new ConcurrentLinkedQueue<>();
    private final SendWrFlyweight send = new SendWrFlyweight();
    private final RecvWrFlyweight recvReader = new RecvWrFlyweight();
    private volatile SoftPort peer;
    private volatile boolean gone; // destroyed, or cut off (the other side released or fenced the queue pair)
    private boolean freed; // guarded by this
    private boolean error; // guarded by the caller's post lock

    SoftPort(int slots, int slotBytes) {
        this.slots = slots;
        this.slotBytes = slotBytes;
        long per = SendWrFlyweight.ENCODED_SIZE + RecvWrFlyweight.ENCODED_SIZE + 2L * align(slotBytes);
        this.length = per * slots;
        this.base = MEMORY.allocate(length);
    }

    private static long align(long n) {
        return (n + 7) & ~7L;
    }

    void connect(SoftPort other) {
        this.peer = other;
        other.peer = this;
    }

    /** Cuts this end off: its polls fail, SENDs to it fail with RETRY_EXC_ERR (fencing, release, close). */
    void cut() {
        gone = true;
    }

    private long slotBase(int slot) {
        return base + slot * (SendWrFlyweight.ENCODED_SIZE + RecvWrFlyweight.ENCODED_SIZE + 2L * align(slotBytes));
    }

    @Override
    public int slots() {
        return slots;
    }

    @Override
    public int slotBytes() {
        return slotBytes;
    }

    @Override
    public long sendWrAddress(int slot) {
        return slotBase(slot);
    }

    @Override
    public long recvWrAddress(int slot) {
        return slotBase(slot) + SendWrFlyweight.ENCODED_SIZE;
    }

    @Override
    public long sendBufferAddress(int slot) {
        return slotBase(slot) + SendWrFlyweight.ENCODED_SIZE + RecvWrFlyweight.ENCODED_SIZE;
    }

    @Override
    public long recvBufferAddress(int slot) {
        return sendBufferAddress(slot) + align(slotBytes);
    }

    @Override
    public int localKey() {
        return LOCAL_KEY;
    }

    @Override
    public void postSend(int slot) throws IOException {
        if (gone) {
            throw new IOException("queue pair destroyed");
        }
        send.wrap(sendWrAddress(slot));
        int status;
        SoftPort p = peer;
        if (error) {
            status = WcStatus.WR_FLUSH_ERR;
        } else if (send.opcode() != SendWrLayout.IBV_WR_SEND || send.sgeLocalKey() != LOCAL_KEY) {
            status = WcStatus.LOC_PROT_ERR;
        } else if (p == null || p.gone) {
            status = WcStatus.RETRY_EXC_ERR;
        } else {
            status = p.receive(send.sgeAddress(), send.sgeLength());
        }
        error |= status != WcStatus.SUCCESS;
        completions.add(new long[]{0, send.wrId(), status});
    }

    /** The peer's SEND arrives: into the oldest posted receive buffer. */
    private synchronized int receive(long from, int bytes) {
        if (freed) {
            return WcStatus.RETRY_EXC_ERR;
        }
        Long wr = posted.poll();
        if (wr == null) {
            return WcStatus.RNR_RETRY_EXC_ERR;
        }
        recvReader.wrap(wr);
        if (bytes > recvReader.sgeLength()) {
            completions.add(new long[]{1, recvReader.wrId(), WcStatus.LOC_LEN_ERR, 0});
            return WcStatus.REM_INV_REQ_ERR;
        }
        UnsafeMemory.copyMemory(from, recvReader.sgeAddress(), bytes);
        completions.add(new long[]{1, recvReader.wrId(), WcStatus.SUCCESS, bytes});
        return WcStatus.SUCCESS;
    }

    @Override
    public synchronized void postRecv(int slot) throws IOException {
        if (gone) {
            throw new IOException("queue pair destroyed");
        }
        recvReader.wrap(recvWrAddress(slot));
        if (recvReader.sgeLocalKey() != LOCAL_KEY) {
            throw new IOException("receive work request with a foreign lkey");
        }
        posted.add(recvWrAddress(slot));
    }

    @Override
    public int poll(Completions c) throws IOException {
        if (gone) {
            throw new IOException("queue pair destroyed");
        }
        int n = 0;
        long[] e;
        while (n < 32 && (e = completions.poll()) != null) {
            if (e[0] == 0) {
                c.sent(e[1], (int) e[2]);
            } else {
                c.received(e[1], (int) e[2], (int) e[3]);
            }
            n++;
        }
        return n;
    }

    @Override
    public void close() {
        gone = true;
        synchronized (this) {
            if (!freed) {
                freed = true;
                MEMORY.freeMemory(base, length);
            }
        }
    }
}
