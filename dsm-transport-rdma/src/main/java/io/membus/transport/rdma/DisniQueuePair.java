package io.membus.transport.rdma;

import com.ibm.disni.verbs.IbvCQ;
import com.ibm.disni.verbs.IbvQP;
import com.ibm.disni.verbs.IbvSendWR;
import com.ibm.disni.verbs.IbvSge;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.RdmaEventChannel;
import com.ibm.disni.verbs.SVCPollCq;
import com.ibm.disni.verbs.SVCPostSend;
import com.ibm.disni.verbs.impl.NatIbvSendWR;
import net.openhft.chronicle.core.UnsafeMemory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedList;
import java.util.List;

/**
 * The initiator side of one reliable connection on the NIC: an RC queue pair with
 * its own completion queue, a registered staging area, and one prepared DiSNI
 * {@link SVCPostSend} per slot (stateful verb calls: built once, reused for every
 * post, so the hot path allocates nothing and makes one JNI call).
 *
 * <p>DiSNI serialises a prepared call into its own native buffer once; each post
 * then re-encodes the whole {@code ibv_send_wr} and its SGE in that buffer with
 * {@link SendWrFlyweight} (which writes the atomic member DiSNI 2.1 leaves out) and
 * calls {@code execute()}, which passes the buffer to {@code ibv_post_send} as is.
 * At construction the layout DiSNI's native library reports
 * ({@code sizeof(struct ibv_send_wr)}, the offsets of {@code remote_addr} and
 * {@code rkey}) is checked against {@link SendWrLayout}.
 *
 * <p><b>Note:</b> {@link #post} under the engine's lock; {@link #poll} on the
 * transport's completion thread; {@link #close} once, by the connection.
 */
final class DisniQueuePair implements Fabric.QueuePair {
    private static final Logger LOG = LoggerFactory.getLogger(DisniQueuePair.class);
    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;

    private final RdmaEventChannel channel;
    private final RdmaCmId id;
    private final IbvCQ cq;
    private final IbvQP qp;
    private final int depth;
    private final int stagingBytes;
    private final long stagingBase;
    private final DisniFabric fabric;
    private final Fabric.Region stagingMr;
    private final SVCPostSend[] posts;
    private final long[] wrAddresses;
    private final IbvWC[] wcs;
    private final SVCPollCq pollCall;
    private final Object pollLock = new Object();
    private volatile boolean open = true;
    private VerbEngine engine;

    DisniQueuePair(RdmaEventChannel channel, RdmaCmId id, IbvCQ cq, IbvQP qp, DisniFabric fabric, int depth,
                   int stagingBytes) throws IOException {
        this.channel = channel;
        this.id = id;
        this.cq = cq;
        this.qp = qp;
        this.depth = depth;
        this.stagingBytes = stagingBytes;
        this.fabric = fabric;
        checkNativeLayout();
        long bytes = (long) depth * stagingBytes;
        long base = MEMORY.allocate(bytes);
        SVCPostSend[] calls = new SVCPostSend[depth];
        long[] addresses = new long[depth];
        Fabric.Region mr = null;
        boolean built = false;
        try {
            mr = fabric.register(base, bytes, SendWrLayout.IBV_ACCESS_LOCAL_WRITE);
            for (int slot = 0; slot < depth; slot++) {
                IbvSge sge = new IbvSge();
                sge.setAddr(base + (long) slot * stagingBytes);
                sge.setLength(stagingBytes);
                sge.setLkey(mr.lkey());
                LinkedList<IbvSge> sges = new LinkedList<>();
                sges.add(sge);
                IbvSendWR wr = new IbvSendWR();
                wr.setWr_id(slot);
                wr.setSg_list(sges);
                wr.setOpcode(SendWrLayout.IBV_WR_RDMA_READ);
                wr.setSend_flags(SendWrLayout.IBV_SEND_SIGNALED);
                List<IbvSendWR> list = new ArrayList<>(1);
                list.add(wr);
                SVCPostSend call = qp.postSend(list, null);
                calls[slot] = call;
                // the one work request's SGE follows it in the call's buffer: WR address = sg_list - sizeof(WR)
                long address = ((NatIbvSendWR) call.getWrMod(0)).getPtr_sge_list() - SendWrLayout.SEND_WR_SIZE;
                if (address == 0 || (address & 7) != 0) {
                    throw new IOException("DiSNI placed a work request at an address that is not 8-byte aligned:"
                            + " address=0x" + Long.toHexString(address) + "; see docs/rdma-transport.md");
                }
                addresses[slot] = address;
            }
            IbvWC[] polled = new IbvWC[Math.min(depth, 32)];
            for (int i = 0; i < polled.length; i++) {
                polled[i] = new IbvWC();
            }
            this.wcs = polled;
            this.pollCall = cq.poll(polled, polled.length);
            built = true;
        } finally {
            if (!built) {
                // nothing was posted yet; the caller destroys the QP, CQ and CM id
                for (SVCPostSend c : calls) {
                    if (c != null) {
                        c.free();
                    }
                }
                if (mr == null || fabric.deregister(mr)) {
                    MEMORY.freeMemory(base, bytes);
                } // else: still registered: leaked rather than freed under the NIC (logged by deregister)
            }
        }
        this.stagingBase = base;
        this.stagingMr = mr;
        this.posts = calls;
        this.wrAddresses = addresses;
    }

    private static void checkNativeLayout() throws IOException {
        if (NatIbvSendWR.CSIZE != SendWrLayout.SEND_WR_SIZE || NatIbvSendWR.REMOTEADDR_OFFSET != SendWrLayout.REMOTE_ADDR_OFFSET
                || NatIbvSendWR.RKEY_OFFSET != SendWrLayout.RDMA_RKEY_OFFSET) {
            throw new IOException("libdisni reports an ibv_send_wr layout this transport was not built for: sizeof="
                    + NatIbvSendWR.CSIZE + ", remote_addr=" + NatIbvSendWR.REMOTEADDR_OFFSET + ", rkey="
                    + NatIbvSendWR.RKEY_OFFSET + "; expected sizeof=" + SendWrLayout.SEND_WR_SIZE + ", remote_addr="
                    + SendWrLayout.REMOTE_ADDR_OFFSET + ", rkey=" + SendWrLayout.RDMA_RKEY_OFFSET
                    + " (x86_64, rdma-core); see docs/rdma-transport.md");
        }
    }

    @Override
    public void attach(VerbEngine engine) {
        this.engine = engine;
    }

    @Override
    public int depth() {
        return depth;
    }

    @Override
    public long workRequestAddress(int slot) {
        return wrAddresses[slot];
    }

    @Override
    public long stagingAddress(int slot) {
        return stagingBase + (long) slot * stagingBytes;
    }

    @Override
    public int stagingBytes() {
        return stagingBytes;
    }

    @Override
    public int localKey() {
        return stagingMr.lkey();
    }

    @Override
    public void post(int slot) throws IOException {
        if (!open) {
            throw new IOException("queue pair closed");
        }
        posts[slot].execute();
    }

    /**
     * Polls the completion queue once and reports what it found to the engine.
     *
     * @return completions found
     */
    @Override
    public int poll() throws IOException {
        synchronized (pollLock) {
            if (!open || engine == null) {
                return 0;
            }
            int n = pollCall.execute().getPolls();
            for (int i = 0; i < n; i++) {
                IbvWC wc = wcs[i];
                int status = wc.getStatus();
                // DiSNI 2.1 copies vendor_err only for successful completions: for a failed one it is stale
                engine.complete(wc.getWr_id(), status,
                        status == WcStatus.SUCCESS ? wc.getVendor_err() : CompletionErrors.VENDOR_ERR_UNKNOWN);
            }
            return n;
        }
    }

    boolean isOpen() {
        return open;
    }

    /**
     * Not yet on hardware: posting receive work requests and polling their completions
     * through DiSNI is the part of the SEND/RECV path still to write (the software
     * fabric of the tests carries it). Messages on this connection fail with this error.
     */
    @Override
    public MessagePort messages(int slots, int slotBytes) {
        throw new io.membus.core.error.TransportUnavailableException("rdma", "messages (send/request) over an RDMA"
                + " NIC are not implemented yet (DiSNI receive posting); use tcp or shm for a cluster that needs them");
    }

    @Override
    public void close() {
        synchronized (pollLock) {
            if (!open) {
                return;
            }
            open = false;
            for (SVCPostSend p : posts) {
                if (p != null) {
                    p.free();
                }
            }
            pollCall.free();
            try {
                id.disconnect();
            } catch (IOException e) {
                LOG.debug("disconnect failed", e);
            }
            quietly(id::destroyQP); // no work request of ours runs from here on
            boolean deregistered = fabric.deregister(stagingMr);
            quietly(cq::destroyCQ);
            quietly(id::destroyId);
            quietly(channel::destroyEventChannel);
            if (deregistered) {
                MEMORY.freeMemory(stagingBase, (long) depth * stagingBytes);
            } // else: the region may still be live: leak the staging memory rather than free it under the NIC
        }
    }

    interface IoAction {
        Object run() throws IOException;
    }

    static void quietly(IoAction action) {
        try {
            action.run();
        } catch (IOException | RuntimeException e) {
            LOG.warn("rdma cleanup step failed: {}", e.toString());
        }
    }
}
