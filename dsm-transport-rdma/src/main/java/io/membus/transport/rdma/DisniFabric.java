package io.membus.transport.rdma;

import com.ibm.disni.verbs.IbvCQ;
import com.ibm.disni.verbs.IbvCompChannel;
import com.ibm.disni.verbs.IbvContext;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import com.ibm.disni.verbs.IbvQP;
import com.ibm.disni.verbs.IbvQPInitAttr;
import com.ibm.disni.verbs.RdmaCm;
import com.ibm.disni.verbs.RdmaCmEvent;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.RdmaConnParam;
import com.ibm.disni.verbs.RdmaEventChannel;
import com.ibm.disni.verbs.SVCRegMr;
import io.membus.core.error.TransportUnavailableException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * This node's RDMA device through DiSNI: the listening RDMA CM id (bound to
 * {@code membus.transports.rdma.host}), the device context and protection domain every memory region
 * and queue pair belongs to, memory registration, and connection setup with a
 * deadline on every step (DiSNI's own {@code RdmaEndpoint.connect} waits forever;
 * this class drives the CM event channel itself and waits at most until the
 * deadline for each event).
 *
 * <p>Incoming connect requests are accepted only from the CM address an
 * authenticated peer announced on its control channel ({@link #expect}): DiSNI 2.1
 * does not hand the passive side a connect request's private data (its
 * {@code RdmaCmEvent.getConn()} is always empty), so the source address is what ties
 * a queue pair to a control session. The target's queue pairs are passive
 * (one-sided verbs need no receive buffers and no target thread).
 *
 * <p><b>Note:</b> thread-safe; the CM event thread ("membus-rdma-cm") owns the
 * listening channel.
 */
final class DisniFabric implements Fabric {
    private static final Logger LOG = LoggerFactory.getLogger(DisniFabric.class);
    private static final int CLOSE_WAIT_SECONDS = 5;

    private final RdmaSettings settings;
    private final RdmaEventChannel listenChannel;
    private final RdmaCmId listenId;
    private final IbvContext context;
    private final IbvPd pd;
    private final IbvCompChannel compChannel; // required by ibv_create_cq; completions are polled, never awaited
    private final int cmPort;
    private final Map<InetSocketAddress, Expected> expected = new ConcurrentHashMap<>();
    private final Map<RdmaCmId, Passive> passive = new ConcurrentHashMap<>();
    private final Thread cmThread;
    /** Read-held by every connect; write-taken by close before the PD and completion channel are freed. */
    private final ReentrantReadWriteLock users = new ReentrantReadWriteLock();
    private volatile boolean open = true;

    /** A target-side queue pair of one peer, under the control session ({@code session}, hex) that announced it. */
    record Passive(int nodeId, String session, RdmaCmId id, IbvCQ cq, IbvQP qp) {
    }

    /** A connect request an authenticated control session announced. */
    record Expected(int nodeId, String session) {
    }

    DisniFabric(RdmaSettings settings) {
        this.settings = settings;
        try {
            listenChannel = RdmaEventChannel.createEventChannel();
            listenId = listenChannel.createId(RdmaCm.RDMA_PS_TCP);
            listenId.bindAddr(new InetSocketAddress(settings.address(), settings.cmPort()));
            listenId.listen(128);
            context = listenId.getVerbs();
            if (context == null) {
                throw new TransportUnavailableException("rdma", "membus.transports.rdma.host=" + settings.host()
                        + " is not the address of an RDMA interface (the RDMA CM bound it to no device);"
                        + " set membus.transports.rdma.host to the IPv4 address of an IPoIB or RoCE interface (ibdev2netdev lists them)"
                        + ", or use transport = tcp");
            }
            pd = context.allocPd();
            compChannel = context.createCompChannel();
            cmPort = ((InetSocketAddress) listenId.getSource()).getPort();
        } catch (IOException e) {
            throw new TransportUnavailableException("rdma", "cannot open the RDMA device for membus.transports.rdma.host=" + settings.host()
                    + ", membus.transports.rdma.cm-port=" + settings.cmPort() + ": " + e.getMessage()
                    + "; check the device with ibv_devinfo and rdma link, or use transport = tcp", e);
        }
        cmThread = new Thread(this::cmLoop, "membus-rdma-cm");
        cmThread.setDaemon(true);
        cmThread.start();
    }

    @Override
    public int cmPort() {
        return cmPort;
    }

    /** Registers {@code length} bytes at {@code address}; DiSNI takes an int length, so at most 2 GiB - 1. */
    @Override
    public Region register(long address, long length, int access) throws IOException {
        if (length > Integer.MAX_VALUE) {
            throw new IOException("memory region too large for DiSNI 2.1: length=" + length + ", max=" + Integer.MAX_VALUE);
        }
        SVCRegMr call = pd.regMr(address, (int) length, access).execute();
        IbvMr mr = call.getMr();
        call.free();
        return new Region(mr.getRkey(), mr.getLkey(), mr);
    }

    @Override
    public boolean deregister(Region region) {
        IbvMr mr = (IbvMr) region.handle();
        try {
            mr.deregMr().execute().free();
            return true;
        } catch (IOException | RuntimeException e) {
            LOG.error("ibv_dereg_mr failed: rkey=0x{}, lkey=0x{}: {}; the memory stays registered",
                    Integer.toHexString(region.rkey()), Integer.toHexString(region.lkey()), e.toString());
            return false;
        }
    }

    @Override
    public void expect(InetSocketAddress initiator, int nodeId, byte[] session) {
        expected.put(initiator, new Expected(nodeId, hex(session)));
    }

    @Override
    public void release(byte[] session) {
        String t = hex(session);
        expected.values().removeIf(e -> e.session().equals(t));
        destroyPassive(p -> p.session().equals(t));
    }

    @Override
    public void dropPassive(int nodeId) {
        expected.values().removeIf(e -> e.nodeId() == nodeId);
        destroyPassive(p -> p.nodeId() == nodeId);
    }

    /**
     * Destroys the passive queue pairs that match. Only the thread whose
     * {@code remove(id, p)} succeeds destroys a queue pair: release, fencing, the CM
     * thread's DISCONNECTED and close may race for the same one, and destroying a CM
     * id twice frees native memory twice.
     */
    private void destroyPassive(java.util.function.Predicate<Passive> which) {
        for (Map.Entry<RdmaCmId, Passive> e : passive.entrySet()) {
            if (which.test(e.getValue()) && passive.remove(e.getKey(), e.getValue())) {
                destroy(e.getValue());
            }
        }
    }

    /**
     * Every step (address, route, announcement, connect) waits at most until
     * {@code deadlineNanos}. Runs under {@link #users}' read lock: {@link #close}
     * frees the protection domain and completion channel a connect uses only once
     * no connect runs.
     */
    @Override
    public DisniQueuePair connect(InetSocketAddress target, Announcer announce, long deadlineNanos) throws IOException {
        if (!users.readLock().tryLock()) {
            throw new IOException("this node's rdma transport is closing");
        }
        try {
            if (!open) {
                throw new IOException("this node's rdma transport is closing");
            }
            return connectNow(target, announce, deadlineNanos);
        } finally {
            users.readLock().unlock();
        }
    }

    private DisniQueuePair connectNow(InetSocketAddress target, Announcer announce, long deadlineNanos)
            throws IOException {
        RdmaEventChannel channel = RdmaEventChannel.createEventChannel();
        RdmaCmId id = null;
        IbvCQ cq = null;
        boolean done = false;
        try {
            id = channel.createId(RdmaCm.RDMA_PS_TCP);
            id.resolveAddr(new InetSocketAddress(settings.address(), 0), target, remainingMillis(deadlineNanos));
            await(channel, RdmaCmEvent.EventType.RDMA_CM_EVENT_ADDR_RESOLVED, deadlineNanos, "address resolution", target);
            id.resolveRoute(remainingMillis(deadlineNanos));
            await(channel, RdmaCmEvent.EventType.RDMA_CM_EVENT_ROUTE_RESOLVED, deadlineNanos, "route resolution", target);
            IbvContext ctx = id.getVerbs();
            // DiSNI wraps the same ibv_context in a new object per CM id: compare the device's command fd
            if (ctx == null || ctx.getCmd_fd() != context.getCmd_fd()) {
                throw new IOException("the route to " + target + " leaves through another RDMA device than membus.transports.rdma.host="
                        + settings.host() + "; give every node an membus.transports.rdma.host on the same fabric");
            }
            cq = ctx.createCQ(compChannel, settings.queueDepth() * 2, 0);
            IbvQP qp = id.createQP(pd, initAttr(cq, settings.queueDepth()));
            announce.announce((InetSocketAddress) id.getSource());
            id.connect(connParam());
            await(channel, RdmaCmEvent.EventType.RDMA_CM_EVENT_ESTABLISHED, deadlineNanos, "connect", target);
            DisniQueuePair pair = new DisniQueuePair(channel, id, cq, qp, this, settings.queueDepth(),
                    settings.stagingBytes());
            done = true;
            return pair;
        } finally {
            if (!done) {
                RdmaCmId failedId = id;
                IbvCQ failedCq = cq;
                if (failedId != null) {
                    DisniQueuePair.quietly(failedId::destroyQP);
                }
                if (failedCq != null) {
                    DisniQueuePair.quietly(failedCq::destroyCQ);
                }
                if (failedId != null) {
                    DisniQueuePair.quietly(failedId::destroyId);
                }
                DisniQueuePair.quietly(channel::destroyEventChannel);
            }
        }
    }

    private static IbvQPInitAttr initAttr(IbvCQ cq, int sendWorkRequests) {
        IbvQPInitAttr attr = new IbvQPInitAttr();
        attr.cap().setMax_send_wr(sendWorkRequests);
        attr.cap().setMax_recv_wr(1);
        attr.cap().setMax_send_sge(1);
        attr.cap().setMax_recv_sge(1);
        attr.cap().setMax_inline_data(0);
        attr.setQp_type(IbvQP.IBV_QPT_RC);
        attr.setSend_cq(cq);
        attr.setRecv_cq(cq);
        return attr;
    }

    /** libdisni passes only the retry counts; it sets initiator depth and responder resources to max_qp_rd_atom. */
    private static RdmaConnParam connParam() throws IOException {
        RdmaConnParam param = new RdmaConnParam();
        param.setRetry_count((byte) 7);
        param.setRnr_retry_count((byte) 7);
        return param;
    }

    private static int remainingMillis(long deadlineNanos) throws IOException {
        long ms = (deadlineNanos - System.nanoTime()) / 1_000_000;
        if (ms <= 0) {
            throw new IOException("deadline passed");
        }
        return (int) Math.min(ms, Integer.MAX_VALUE);
    }

    private void await(RdmaEventChannel channel, RdmaCmEvent.EventType wanted, long deadlineNanos, String step,
                              InetSocketAddress target) throws IOException {
        while (true) {
            long ms = (deadlineNanos - System.nanoTime()) / 1_000_000;
            if (ms <= 0) {
                throw new IOException(step + " timed out: target=" + target);
            }
            if (!open) {
                throw new IOException(step + " abandoned: this node's rdma transport is closing");
            }
            RdmaCmEvent event = channel.getCmEvent((int) Math.min(ms, 100));
            if (event == null) {
                continue;
            }
            int type = event.getEvent();
            event.ackEvent();
            if (type == wanted.ordinal()) {
                return;
            }
            throw new IOException(step + " failed: target=" + target + ", event="
                    + RdmaCmEvent.EventType.values()[type] + " (expected " + wanted + ")");
        }
    }

    private void cmLoop() {
        while (open) {
            try {
                RdmaCmEvent event = listenChannel.getCmEvent(100);
                if (event == null) {
                    continue;
                }
                RdmaCmEvent.EventType type = RdmaCmEvent.EventType.values()[event.getEvent()];
                RdmaCmId conn = event.getConnIdPriv();
                if (type == RdmaCmEvent.EventType.RDMA_CM_EVENT_CONNECT_REQUEST) {
                    event.ackEvent();
                    accept(conn);
                } else {
                    event.ackEvent();
                    if (type == RdmaCmEvent.EventType.RDMA_CM_EVENT_DISCONNECTED && conn != null) {
                        Passive p = passive.remove(conn);
                        if (p != null) {
                            destroy(p);
                        }
                    }
                }
            } catch (IOException | RuntimeException e) {
                if (open) {
                    LOG.warn("rdma CM event handling failed: {}", e.toString());
                }
            }
        }
    }

    private void accept(RdmaCmId conn) throws IOException {
        InetSocketAddress from = (InetSocketAddress) conn.getDestination();
        Expected e = from == null ? null : expected.remove(from);
        if (e == null) {
            LOG.warn("refused an RDMA connect request that no authenticated control channel announced: from={}", from);
            DisniQueuePair.quietly(conn::destroyId);
            return;
        }
        IbvCQ cq = null;
        try {
            // the target side posts nothing: one-sided verbs need no send or receive work requests here
            cq = context.createCQ(compChannel, 4, 0);
            IbvQP qp = conn.createQP(pd, initAttr(cq, 1));
            passive.put(conn, new Passive(e.nodeId(), e.session(), conn, cq, qp));
            conn.accept(connParam());
        } catch (IOException | RuntimeException failed) {
            Passive p = passive.remove(conn);
            if (p != null) {
                destroy(p);
            } else {
                IbvCQ created = cq;
                if (created != null) {
                    DisniQueuePair.quietly(created::destroyCQ);
                }
                DisniQueuePair.quietly(conn::destroyId);
            }
            throw failed;
        }
    }

    private static void destroy(Passive p) {
        DisniQueuePair.quietly(p.id()::disconnect);
        DisniQueuePair.quietly(p.id()::destroyQP);
        DisniQueuePair.quietly(p.cq()::destroyCQ);
        DisniQueuePair.quietly(p.id()::destroyId);
    }

    private static String hex(byte[] b) {
        return java.util.HexFormat.of().formatHex(b);
    }

    /** Accepted queue pairs carry no SENDs on hardware yet (see {@link DisniQueuePair#messages}): nothing to hand over. */
    @Override
    public void onAccepted(PassiveListener listener) {
    }

    @Override
    public void close() {
        open = false;
        try {
            cmThread.join(2_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        destroyPassive(p -> true);
        DisniQueuePair.quietly(listenId::destroyId);
        DisniQueuePair.quietly(listenChannel::destroyEventChannel);
        boolean quiet;
        try {
            // a connect sees open == false within 100 ms in its CM waits; its announcement ends by its deadline
            quiet = users.writeLock().tryLock(CLOSE_WAIT_SECONDS, TimeUnit.SECONDS); // kept: no connect after close
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            quiet = false;
        }
        if (!quiet) {
            LOG.error("an rdma connect still runs {} s after close: the protection domain and completion channel"
                    + " it uses are left allocated (leaked, not freed under it)", CLOSE_WAIT_SECONDS);
            return;
        }
        DisniQueuePair.quietly(compChannel::destroyCompChannel);
        try {
            pd.deallocPd();
        } catch (Exception e) {
            LOG.warn("rdma cleanup step failed: {}", e.toString());
        }
    }
}
