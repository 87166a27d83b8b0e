package io.membus.transport.rdma;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A software RDMA fabric for tests: each node's {@link Fabric} registers regions
 * in its own table and listens on a made-up CM port; a queue pair executes the
 * native work requests {@link VerbEngine} encodes against the target fabric's
 * regions at post time ({@link SoftNic#execute}) and queues the completions for the
 * transport's completion thread. A destroyed target (closed, or its passive queue
 * pair dropped by fencing) answers every later work request with
 * {@code IBV_WC_RETRY_EXC_ERR}, as a NIC whose peer stopped acknowledging does; after
 * the first error the queue pair flushes, as an RC queue pair in error state does.
 *
 * <p>Everything else of the transport (control channel, handshake, catalog,
 * engine, completion thread) is the production code.
 *
 * <p><b>Note:</b> thread-safe; fabrics of one JVM find each other by port.
 */
final class SoftFabric implements Fabric {
    private static final Map<Integer, SoftFabric> BY_PORT = new ConcurrentHashMap<>();
    private static final AtomicInteger PORTS = new AtomicInteger(20_000);
    private static final AtomicInteger KEYS = new AtomicInteger(0x1000);
    private static final AtomicInteger SOURCE_PORTS = new AtomicInteger(30_000);

    private record Expected(int nodeId, String session) {
    }

    private final int port = PORTS.incrementAndGet();

    /** Reads and writes are {@link io.membus.core.WordCopy} copies ({@link SoftNic}). */
    @Override
    public boolean movesWordsWhole() {
        return true;
    }
    private final RdmaSettings settings;
    private final Map<Integer, SoftNic.Region> regions = new ConcurrentHashMap<>();
    private final Map<InetSocketAddress, Expected> expected = new ConcurrentHashMap<>();
    private final Set<SoftQueuePair> passive = ConcurrentHashMap.newKeySet();
    private volatile boolean open = true;
    private volatile PassiveListener listener;

    SoftFabric(RdmaSettings settings) {
        this.settings = settings;
        BY_PORT.put(port, this);
    }

    @Override
    public int cmPort() {
        return port;
    }

    @Override
    public Region register(long address, long length, int access) {
        int rkey = KEYS.addAndGet(0x100) | 0x3c;
        regions.put(rkey, new SoftNic.Region(address, length, access));
        return new Region(rkey, rkey, null);
    }

    @Override
    public boolean deregister(Region region) {
        return regions.remove(region.rkey()) != null;
    }

    @Override
    public void expect(InetSocketAddress initiator, int nodeId, byte[] session) {
        expected.put(initiator, new Expected(nodeId, HexFormat.of().formatHex(session)));
    }

    @Override
    public void release(byte[] session) {
        String t = HexFormat.of().formatHex(session);
        expected.values().removeIf(e -> e.session().equals(t));
        passive.removeIf(qp -> {
            if (qp.session.equals(t)) {
                qp.cutTarget();
                return true;
            }
            return false;
        });
    }

    @Override
    public void dropPassive(int nodeId) {
        expected.values().removeIf(e -> e.nodeId() == nodeId);
        passive.removeIf(qp -> {
            if (qp.initiatorNode == nodeId) {
                qp.cutTarget();
                return true;
            }
            return false;
        });
    }

    @Override
    public QueuePair connect(InetSocketAddress target, Announcer announce, long deadlineNanos) throws IOException {
        SoftFabric t = BY_PORT.get(target.getPort());
        if (t == null || !t.open) {
            throw new IOException("address resolution failed: event=RDMA_CM_EVENT_ADDR_ERROR, target=" + target);
        }
        InetSocketAddress source = new InetSocketAddress(settings.address(), SOURCE_PORTS.incrementAndGet());
        announce.announce(source); // returns once the target expects this source
        Expected e = t.expected.remove(source);
        if (e == null) {
            throw new IOException("connect failed: event=RDMA_CM_EVENT_REJECTED (source not announced), target="
                    + target);
        }
        SoftQueuePair qp = new SoftQueuePair(t, e.nodeId(), e.session(), settings.queueDepth(), settings.stagingBytes());
        t.passive.add(qp);
        PassiveListener l = t.listener;
        if (l != null) { // the target posts its receive buffers before this connect returns
            l.accepted(e.nodeId(), HexFormat.of().parseHex(e.session()), qp::passivePort);
        }
        return qp;
    }

    @Override
    public void onAccepted(PassiveListener listener) {
        this.listener = listener;
    }

    @Override
    public void close() {
        open = false;
        BY_PORT.remove(port, this);
        passive.forEach(SoftQueuePair::cutTarget);
        passive.clear();
        regions.clear();
    }

    /** An initiator queue pair whose responder is another {@link SoftFabric}. */
    static final class SoftQueuePair extends SoftRing implements QueuePair {
        private static final int LOCAL_KEY = 0x42;
        final SoftFabric target;
        final int initiatorNode;
        final String session;
        private final SendWrFlyweight wr = new SendWrFlyweight();
        private final ConcurrentLinkedQueue<long[]> completions = new ConcurrentLinkedQueue<>();
        private final Object pollLock = new Object();
        volatile boolean targetGone;
        /** Makes {@link #poll} fail as {@code ibv_poll_cq} does when the CQ is broken (tests). */
        volatile boolean failPolls;
        private boolean error; // guarded by the engine's post lock
        private volatile boolean closed;
        private VerbEngine engine;
        private SoftPort initiatorPort; // guarded by this
        private SoftPort targetPort; // guarded by this

        SoftQueuePair(SoftFabric target, int initiatorNode, String session, int depth, int stagingBytes) {
            super(depth, stagingBytes);
            this.target = target;
            this.initiatorNode = initiatorNode;
            this.session = session;
        }

        /** The initiator's SEND/RECV end of this queue pair. */
        @Override
        public synchronized MessagePort messages(int slots, int slotBytes) {
            if (initiatorPort == null) {
                initiatorPort = new SoftPort(slots, slotBytes);
                if (targetPort != null) {
                    initiatorPort.connect(targetPort);
                }
            }
            return initiatorPort;
        }

        /** The target's SEND/RECV end of this queue pair (what the target's listener asks for). */
        synchronized MessagePort passivePort(int slots, int slotBytes) {
            if (targetPort == null) {
                targetPort = new SoftPort(slots, slotBytes);
                if (initiatorPort != null) {
                    initiatorPort.connect(targetPort);
                }
                if (targetGone) {
                    targetPort.cut();
                }
            }
            return targetPort;
        }

        /** The target destroyed its side (release, fence, close): its verbs and SENDs fail from now on. */
        synchronized void cutTarget() {
            targetGone = true;
            if (targetPort != null) {
                targetPort.cut();
            }
        }

        @Override
        public void attach(VerbEngine engine) {
            this.engine = engine;
        }

        @Override
        public int localKey() {
            return LOCAL_KEY;
        }

        @Override
        public void post(int slot) throws IOException {
            if (closed) {
                throw new IOException("queue pair destroyed");
            }
            wr.wrap(workRequestAddress(slot));
            int status;
            if (error) {
                status = WcStatus.WR_FLUSH_ERR;
            } else if (targetGone) {
                status = WcStatus.RETRY_EXC_ERR;
            } else {
                status = SoftNic.execute(wr, LOCAL_KEY, target.regions);
            }
            error |= status != WcStatus.SUCCESS;
            completions.add(new long[]{wr.wrId(), status});
        }

        @Override
        public int poll() throws IOException {
            synchronized (pollLock) {
                if (closed) {
                    return 0;
                }
                if (failPolls) {
                    throw new IOException("Polling CQ failed");
                }
                int n = 0;
                long[] c;
                while (n < 32 && (c = completions.poll()) != null) {
                    if (failPolls) { // checked after taking it: a completion queued after failPolls is never delivered
                        throw new IOException("Polling CQ failed");
                    }
                    engine.complete(c[0], (int) c[1], c[1] == WcStatus.SUCCESS ? 0 : 0x81);
                    n++;
                }
                return n;
            }
        }

        @Override
        public void close() {
            synchronized (pollLock) {
                if (closed) {
                    return;
                }
                closed = true;
                target.passive.remove(this);
                free();
            }
        }
    }
}
