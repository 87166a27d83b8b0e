package io.membus.transport.rdma;

import io.membus.core.Access;
import io.membus.core.Segment;
import io.membus.core.config.HostPort;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.error.TransportUnavailableException;
import io.membus.core.auth.PeerAuth;
import io.membus.core.transport.message.HandshakeRecord;
import io.membus.core.transport.TransportThreads;
import io.membus.core.transport.AbstractTransport;
import io.membus.core.transport.Connection;
import io.membus.core.time.Deadlines;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.TransportConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The {@code rdma} transport: one-sided verbs executed by the NIC on InfiniBand or
 * RoCE, through DiSNI. See {@code docs/rdma-transport.md}.
 *
 * <ul>
 *   <li>Each exported segment is native memory registered as one memory region;
 *       its Membus remote key carries the region's rkey in its low 32 bits
 *       ({@link CatalogEntry#remoteKey}). Regions are deregistered when the segment
 *       is unexported or the transport closes, before the memory is freed.</li>
 *   <li>A connection is a TCP control channel (authentication, catalog) plus an RC
 *       queue pair set up through the RDMA CM, every step within the connect timeout
 *       (the initiator's side: {@link ControlDial}; the target's: {@link #serve}).</li>
 *   <li>One completion thread ("membus-rdma-cq") polls every connection's
 *       completion queue and completes the verbs' futures ({@link CompletionPoller}).</li>
 *   <li>{@link #localAtomicsCoherent()} is {@code membus.transports.rdma.atomic-glob}: false by
 *       default, so a node reaches its own words that peers may CAS through a
 *       loopback connection to itself ({@code connect(self())}).</li>
 * </ul>
 *
 * <p><b>Note:</b> thread-safe. {@link #export} and {@link #unexport} run one at a
 * time and return after every connected peer acknowledged the new catalog, so a
 * peer's verb issued after {@code export} returns is checked against a catalog that
 * has the segment. A verb's future completes on the completion thread after its
 * completion was polled (a read's bytes are in its array before that, so they
 * happen-before the future's dependents); the order of one node's verbs to one peer
 * is their issue order (one RC queue pair per connection).
 */
public final class RdmaTransport extends AbstractTransport {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaTransport.class);
    private static final SecureRandom RANDOM = new SecureRandom();

    private final RdmaSettings settings;
    private final Fabric fabric;
    private final ServerSocket control;
    private final Map<Integer, Fabric.Region> regions = new ConcurrentHashMap<>();
    private final Object exportLock = new Object();
    private final Set<ControlSession> sessions = ConcurrentHashMap.newKeySet();
    private final Set<RdmaConnection> open = ConcurrentHashMap.newKeySet();
    private final RdmaMessages messaging;
    /** The open connections' queue pairs and the completion thread's loop. */
    private final CompletionPoller poller;
    private final Thread acceptor;
    private final Thread completions;
    private volatile boolean running = true;

    /**
     * @param fabricFactory opens the device ({@link DisniFabric#DisniFabric}; tests pass a software fabric)
     */
    RdmaTransport(TransportConfig config, RdmaSettings settings, java.util.function.Function<RdmaSettings, Fabric> fabricFactory) {
        super(config);
        this.settings = settings;
        this.fabric = fabricFactory.apply(settings);
        this.messaging = new RdmaMessages(config.nodeId(), messages(), config.operationTimeout());
        this.poller = new CompletionPoller(messaging);
        fabric.onAccepted((node, session, pair) -> messaging.accepted(node, pair));
        try {
            control = new ServerSocket();
            control.bind(new InetSocketAddress(settings.address(), settings.controlPort()), 64);
        } catch (IOException e) {
            fabric.close();
            throw new TransportUnavailableException("rdma", "cannot listen for control connections: membus.transports.rdma.host="
                    + settings.host() + ", membus.transports.rdma.port=" + settings.controlPort() + ": " + e.getMessage()
                    + "; choose a free membus.transports.rdma.port", e);
        }
        acceptor = daemon(this::acceptLoop, "membus-rdma-control-" + nodeId());
        completions = daemon(poller, "membus-rdma-cq-" + nodeId());
        LOG.info("rdma transport up: node={}, address={}, {}", nodeId(), localAddress(), settings);
    }

    /** The queue pair of an open connection (tests), or {@code null}. */
    Fabric.QueuePair queuePair(Connection connection) {
        return poller.queuePair(connection);
    }

    private static Thread daemon(Runnable r, String name) {
        return TransportThreads.startDaemon(name, r);
    }

    @Override
    public String name() {
        return RdmaTransportProvider.NAME;
    }

    /** {@code host:controlPort:cmPort}. */
    @Override
    public String localAddress() {
        return HostPort.format(settings.host(), control.getLocalPort(), fabric.cmPort());
    }

    /**
     * The NIC runs the verbs: InfiniBand atomics are atomic only among atomics, so plain writes
     * are not promised atomic with them; aligned words move whole only where the fabric says so
     * ({@link Fabric#movesWordsWhole()}: the specification does not promise it of a NIC). The
     * target refuses a fenced initiator (it destroys the node's target-side queue pairs).
     */
    @Override
    public io.membus.core.capability.TransportCapabilities capabilities() {
        return RdmaTransportProvider.CAPABILITIES.withWholeWords(fabric.movesWordsWhole());
    }

    @Override
    public boolean localAtomicsCoherent() {
        return settings.atomicGlob();
    }

    /** Memory-region access flags for Membus access flags. */
    static int regionAccess(int flags) {
        int access = SendWrLayout.IBV_ACCESS_LOCAL_WRITE;
        if ((flags & Access.READ) != 0) {
            access |= SendWrLayout.IBV_ACCESS_REMOTE_READ;
        }
        if ((flags & Access.WRITE) != 0) {
            access |= SendWrLayout.IBV_ACCESS_REMOTE_WRITE;
        }
        if ((flags & Access.ATOMIC) != 0) {
            access |= SendWrLayout.IBV_ACCESS_REMOTE_ATOMIC;
        }
        return access;
    }

    @Override
    protected Segment createSegment(SegmentSpec spec) {
        if (spec.file() != null) {
            throw new DsmConfigException("segment file", spec.file(), "none: the rdma transport exports native"
                    + " segments only (persistent segments: use shm or tcp)");
        }
        if (spec.size() > Integer.MAX_VALUE) {
            throw new DsmConfigException("segment size", spec.size(), "at most " + Integer.MAX_VALUE
                    + " bytes on rdma (DiSNI 2.1 registers memory regions with an int length); export several segments");
        }
        return Segment.allocate(nodeId(), incarnation(), spec.index(), spec.size(), spec.flags(), (address, size) -> {
            try {
                Fabric.Region mr = fabric.register(address, size, regionAccess(spec.flags()));
                regions.put(spec.index(), mr);
                return CatalogEntry.remoteKey(mr.rkey(), RANDOM.nextInt() | 1);
            } catch (IOException e) {
                throw new TransportUnavailableException("rdma", "memory registration failed:"
                        + " node=" + nodeId() + ", segment=" + spec.index() + ", size=" + size + ": " + e.getMessage()
                        + "; check the locked-memory limit (ulimit -l) and the device's MR limits (ibv_devinfo -v)", e);
            }
        });
    }

    /**
     * Serialised with {@link #unexport}: registration, publication in the table,
     * deregistration of withdrawn regions and the catalog push of one change happen
     * as one step. Concurrently, an unexport's {@link #segmentsChanged} took a segment
     * registered but not yet in the table for a withdrawn one and deregistered it (the
     * export then returned a segment no peer could reach), and one export could
     * return on the acknowledgement of another's catalog push, before the peer had
     * applied its own. Exports are rare; the lock is never taken on a verb's path.
     */
    @Override
    public Segment export(SegmentSpec spec) {
        synchronized (exportLock) {
            return super.export(spec);
        }
    }

    /** Serialised with {@link #export} (see there). */
    @Override
    public boolean unexport(int index, boolean keepFile) {
        synchronized (exportLock) {
            return super.unexport(index, keepFile);
        }
    }

    /** Deregisters regions of withdrawn segments (before their memory is freed) and pushes the new catalog. */
    @Override
    protected void segmentsChanged() {
        for (Integer index : List.copyOf(regions.keySet())) {
            if (table.get(index) == null) {
                Fabric.Region mr = regions.remove(index);
                if (mr != null) {
                    fabric.deregister(mr);
                }
            }
        }
        // every peer gets the new catalog first, then all are awaited against one deadline: an export
        // waits at most one connect timeout, however many peers there are
        long deadline = System.nanoTime() + config.connectTimeout().toNanos();
        List<ControlSession> sent = new ArrayList<>();
        for (ControlSession s : sessions) {
            if (s.sendPush()) {
                sent.add(s);
            }
        }
        for (ControlSession s : sent) {
            s.awaitPush(deadline);
        }
    }

    List<CatalogEntry> catalog() {
        List<CatalogEntry> list = new ArrayList<>();
        for (Segment s : table.all()) {
            Fabric.Region mr = regions.get(s.index());
            if (mr != null) {
                list.add(new CatalogEntry(s.index(), s.address(), s.size(), s.remoteKey(), s.flags()));
            }
        }
        return list;
    }

    // ------------------------------------------------------------------ initiator

    @Override
    protected CompletableFuture<Connection> open(PeerInfo peer) {
        CompletableFuture<Connection> result = new CompletableFuture<>();
        long deadline = System.nanoTime() + config.connectTimeout().toNanos();
        Thread t = new Thread(() -> {
            try {
                Connection c = openNow(peer, deadline);
                if (!result.complete(c)) {
                    c.close("the connect deadline passed"); // nobody will use it
                }
            } catch (DsmException e) {
                result.completeExceptionally(e);
            } catch (IOException | RuntimeException e) {
                result.completeExceptionally(NodeUnavailableException.notSent(peer.nodeId(), "rdma connect failed: "
                        + e.getMessage() + "; peer=" + peer, e));
            }
        }, "membus-rdma-connect-" + peer.nodeId());
        t.setDaemon(true);
        t.start();
        return Deadlines.within(result, config.connectTimeout(), "connect", peer.nodeId());
    }

    private Connection openNow(PeerInfo peer, long deadline) throws IOException {
        ControlDial dial = new ControlDial(nodeId(), incarnation(), settings, fabric, peer);
        Socket socket = dial.socket;
        boolean ok = false;
        try {
            Fabric.QueuePair pair = dial.handshake(deadline);
            RemoteCatalog catalog = dial.catalog();
            RdmaConnection connection = null;
            try {
                if (!running) {
                    throw NodeUnavailableException.notSent(peer.nodeId(), "this node's rdma transport closed while"
                            + " connecting to " + dial.who);
                }
                socket.setSoTimeout(0); // the catalog reader waits for pushes for the connection's life
                VerbEngine engine = new VerbEngine(pair, peer.nodeId(), config.operationTimeout(), faults(), catalog,
                        observer());
                pair.attach(engine);
                RdmaConnection[] self = new RdmaConnection[1];
                connection = new RdmaConnection(peer, catalog, engine, () -> {
                    open.remove(self[0]);
                    poller.untrack(self[0]);
                    closeQuietly(socket);
                });
                self[0] = connection;
                engine.onBroken(connection::close);
                poller.track(connection, pair);
                open.add(connection);
                try {
                    RdmaConnection c0 = connection;
                    connection.attachMessages(messaging.initiator(peer.nodeId(), pair, c0::close), null);
                } catch (DsmException noMessages) {
                    connection.attachMessages(null, noMessages); // verbs still work; messages fail typed
                }
                RdmaConnection c = connection;
                daemon(() -> dial.catalogLoop(c), "membus-rdma-catalog-" + peer.nodeId());
                ok = true;
                return connection;
            } finally {
                if (!ok) { // nothing may keep the queue pair: its connection is never handed out
                    if (connection != null) {
                        connection.close("connection setup failed");
                    } else {
                        pair.close();
                    }
                }
            }
        } catch (java.net.SocketTimeoutException e) {
            throw NodeUnavailableException.notSent(peer.nodeId(), "control channel timed out: " + dial.who, e);
        } finally {
            if (!ok) {
                closeQuietly(socket);
            }
        }
    }

    // ------------------------------------------------------------------ target

    private void acceptLoop() {
        while (running) {
            try {
                Socket s = control.accept();
                daemon(() -> serve(s), "membus-rdma-session-" + nodeId());
            } catch (SocketException e) {
                return; // closed
            } catch (IOException e) {
                LOG.warn("control accept failed: {}", e.toString());
            }
        }
    }

    private void serve(Socket socket) {
        ControlSession session = null;
        try {
            socket.setTcpNoDelay(true);
            socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, config.connectTimeout().toMillis()));
            DataInputStream in = new DataInputStream(new java.io.BufferedInputStream(socket.getInputStream()));
            DataOutputStream out = new DataOutputStream(new java.io.BufferedOutputStream(socket.getOutputStream()));
            String who = String.valueOf(socket.getRemoteSocketAddress());
            if (in.readInt() != ControlFrames.MAGIC || in.readUnsignedByte() != ControlFrames.VERSION) {
                throw new ProtocolException(who, "not a membus rdma control channel (magic or version)");
            }
            HandshakeRecord.Hello hello = (HandshakeRecord.Hello) ControlFrames.readRecord(in, who,
                    HandshakeRecord.KIND_HELLO, false);
            int peerNode = hello.node();
            long peerInc = hello.incarnation();
            byte[] nonceI = hello.nonce();
            boolean fenced = isFenced(peerNode);
            if (fenced || !running) {
                ControlFrames.writeRecord(out, fenced
                        ? new HandshakeRecord.Refusal(ErrorCode.NODE_UNAVAILABLE, HandshakeRecord.REASON_FENCED, 0,
                                "fenced: " + fenceReason(peerNode))
                        : new HandshakeRecord.Refusal(ErrorCode.NODE_UNAVAILABLE, 0, 0, "transport closed"));
                out.flush();
                return;
            }
            if (hello.targetNode() != nodeId() || hello.targetIncarnation() != incarnation()) {
                ControlFrames.writeRecord(out, new HandshakeRecord.Refusal(ErrorCode.STALE_INCARNATION, 0,
                        incarnation(), "this is node " + nodeId() + " incarnation " + incarnation()));
                out.flush();
                return;
            }
            byte[] nonceT = new byte[ControlFrames.NONCE_BYTES];
            RANDOM.nextBytes(nonceT);
            ControlFrames.writeRecord(out, new HandshakeRecord.Challenge(nodeId(), incarnation(), nonceT,
                    ControlFrames.proof(settings.secret(), PeerAuth.Role.TARGET, peerNode, peerInc, nodeId(),
                            incarnation(), nonceI, nonceT)));
            out.flush();
            byte[] macI = ((HandshakeRecord.Auth) ControlFrames.readRecord(in, who, HandshakeRecord.KIND_AUTH,
                    false)).proof();
            ControlFrames.checkMac(ControlFrames.proof(settings.secret(), PeerAuth.Role.INITIATOR, peerNode, peerInc,
                    nodeId(), incarnation(), nonceI, nonceT), macI, who, "initiator proof");
            byte[] id = new byte[ControlFrames.SESSION_BYTES];
            RANDOM.nextBytes(id);
            session = new ControlSession(peerNode, socket, out, nonceI, id, settings.secret(), this::catalog,
                    config.connectTimeout());
            sessions.add(session);
            if (isFenced(peerNode) || !running) {
                // fenced (or closed) since HELLO: fence() closes the sessions it sees, and it did not see this one
                throw new ProtocolException(who, "node " + peerNode + " was fenced during its handshake");
            }
            session.send();
            if (in.readUnsignedByte() != ControlFrames.ACK) { // the handshake's catalog: not a push's ack
                throw new ProtocolException(who, "expected ACK of the first catalog");
            }
            socket.setSoTimeout(0);
            while (true) {
                int kind = in.readUnsignedByte();
                if (kind == ControlFrames.ACK) {
                    session.acked();
                } else if (kind == ControlFrames.CM_SOURCE) {
                    InetSocketAddress from = ControlFrames.readCmSource(in, settings.secret(), nonceI, id, who);
                    fabric.expect(from, peerNode, id);
                    session.ready(from);
                } else {
                    throw new ProtocolException(who, "unexpected control frame: kind=" + kind);
                }
            }
        } catch (IOException | AuthenticationException | ProtocolException e) {
            LOG.debug("control session ended: {}", e.toString());
        } finally {
            if (session != null) {
                sessions.remove(session);
                fabric.release(session.token); // this session's queue pair only: a newer one of the node stays
            }
            closeQuietly(socket);
        }
    }

    static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // closing: nothing left to do
        }
    }

    @Override
    protected void fenced(int nodeId, String reason) {
        for (ControlSession s : sessions) {
            if (s.peerNode == nodeId) {
                closeQuietly(s.socket);
            }
        }
        fabric.dropPassive(nodeId);
    }

    @Override
    protected void closeTransport() {
        running = false;
        poller.stop();
        List<Fabric.QueuePair> queuePairs = poller.queuePairs();
        for (RdmaConnection c : List.copyOf(open)) {
            c.close("the initiator's transport closed");
        }
        try {
            control.close();
        } catch (IOException e) {
            LOG.debug("closing the control socket failed", e);
        }
        for (ControlSession s : sessions) {
            closeQuietly(s.socket);
        }
        try {
            completions.join(2_000);
            acceptor.join(2_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (!completions.isAlive()) {
            messaging.close(); // the completion thread no longer reads the buffers this frees
        }
        for (Fabric.QueuePair qp : queuePairs) {
            qp.close(); // now, not on the timer: the device is closed next (idempotent)
        }
        for (Fabric.Region mr : regions.values()) {
            fabric.deregister(mr); // before AbstractTransport frees the segments' memory
        }
        regions.clear();
        fabric.close();
        LOG.info("rdma transport closed: node={}", nodeId());
    }
}
