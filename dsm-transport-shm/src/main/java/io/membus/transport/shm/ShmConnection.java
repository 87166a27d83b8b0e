package io.membus.transport.shm;

import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.transport.message.Outbox;
import io.membus.core.replication.GroupId;
import io.membus.core.transport.BlockingVerbs;
import io.membus.core.time.Deadlines;
import io.membus.core.transport.DirectConnection;
import io.membus.core.transport.LongCompletion;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentTable;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;

/**
 * Verbs run by this process's CPU on its mappings of the peer's segment files;
 * messages are written by this process's CPU into the peer's ring, and answered
 * into this node's ring.
 *
 * <p>Segments the peer adopted ({@code hosted.<n>.<s>} in its registry) are mapped too,
 * one {@link HostedPath} per logical node {@code n}: a verb on a pointer of node {@code n}
 * runs on the peer's file of {@code (n, s)}, and the liveness check is the peer's (the
 * adopter's), not the dead node's. Verbs of one logical node keep their issue order; with a
 * fault rule active, verbs of different logical nodes on this connection may complete out of
 * issue order (each path has its own pipeline).
 *
 * <p>Every refresh interval ({@code membus.transports.shm.refresh-interval}, a
 * {@link Deadlines} task on the shared wheel) the next verb re-reads the peer's registry
 * to map new segments, drop removed ones and notice a peer that exited or restarted.
 *
 * <p><b>Note:</b> thread-safe: any thread may issue verbs and messages. The mappings change
 * under this connection's lock ({@link #refresh}, {@link #reload}); a verb reads them
 * through the tables' concurrent maps and the volatile {@code hostedSnapshot}, so it sees a
 * segment only once it is mapped whole. The refresh flag is volatile: the timer's write is
 * seen by the next verb.
 */
final class ShmConnection extends DirectConnection {
    private final ShmTransport transport;
    private final Path peerDir;
    private final SegmentTable mapped;
    /** The peer's adopted segments, by logical node. */
    private final Map<Integer, HostedPath> hostedPaths = new ConcurrentHashMap<>();
    /** The values of {@link #hostedPaths}, for the allocation-free check of {@link #blockingNow()}. */
    private volatile HostedPath[] hostedSnapshot = new HostedPath[0];
    private final BlockingVerbs router = new Router();
    /** Set by the timer every refresh interval, cleared by the verb that re-reads the registry. */
    private volatile boolean refreshDue;
    private final ScheduledFuture<?> refreshTimer;
    private final Outbox outbox;
    private final ShmRing peerRing;

    ShmConnection(ShmTransport transport, PeerInfo peer, Path peerDir, ShmRegistry reg) {
        super(peer, transport.faults(), transport.config().operationTimeout(), transport.observer());
        this.transport = transport;
        this.peerDir = peerDir;
        this.mapped = new SegmentTable(peer.nodeId());
        this.outbox = new Outbox(peer.nodeId(), transport.config().operationTimeout(), transport.messages(), this::transmit);
        if (reg.inbox() != null) {
            this.peerRing = transport.messaging().peerRing(peer.nodeId(), peer.incarnation(), peerDir, reg.inbox());
            transport.messaging().attach(peer.nodeId(), peer.incarnation(), outbox);
            outbox.grant(reg.inboxCredits(), reg.inboxMaxSize());
        } else {
            this.peerRing = null;
            outbox.close(new io.membus.core.error.TransportUnavailableException("shm", "node " + peer.nodeId()
                    + " runs a version of the shm transport without messages"));
        }
        this.refreshTimer = Deadlines.every(this::onTimer, transport.refreshNanos());
    }

    /**
     * Every refresh interval: the next verb re-reads the registry; and while messages
     * are unanswered, the timer checks that the peer still runs (a killed peer never
     * answers, and nothing else would notice before the deadline).
     */
    private void onTimer() {
        refreshDue = true;
        if (outbox.inFlight() > 0 && isOpen()) {
            try {
                ShmRegistry now = ShmRegistry.read(peerDir, peer().nodeId());
                if (now.incarnation() != peer().incarnation()) {
                    close("node " + peer().nodeId() + " restarted as incarnation " + now.incarnation()
                            + "; messages in flight may or may not have been handled");
                }
            } catch (NodeUnavailableException e) {
                close(e.getMessage() + "; messages in flight may or may not have been handled");
            }
        }
    }

    private boolean transmit(long correlation, short channel, boolean request, byte[] payload) {
        return peerRing.writeMessage(transport.nodeId(), transport.incarnation(), correlation, channel, request, payload);
    }

    @Override
    @SuppressWarnings("unchecked")
    public CompletableFuture<Void> send(short channel, byte[] payload) {
        return (CompletableFuture<Void>) (CompletableFuture<?>) outbox.post(channel, false, payload);
    }

    @Override
    public CompletableFuture<byte[]> request(short channel, byte[] payload) {
        return outbox.post(channel, true, payload);
    }

    @Override
    protected SegmentTable target() {
        // the hot path is one volatile read; a verb re-reads the registry once per interval
        if (refreshDue) {
            reload(false);
        }
        return mapped;
    }

    /**
     * Re-reads the peer's registry (when due, or now when {@code force}) and maps what it
     * lists; a gone or restarted peer closes this connection. The close runs after this
     * connection's lock is released: it closes the hosted paths' pipelines, whose held verbs
     * take this lock (through {@link #target()}) while they hold their pipeline's.
     */
    private void reload(boolean force) {
        RuntimeException failed = null;
        synchronized (this) {
            if (!force && !refreshDue) {
                return;
            }
            try {
                ShmRegistry reg = ShmRegistry.read(peerDir, peer().nodeId());
                if (reg.incarnation() != peer().incarnation()) {
                    throw new StaleIncarnationException(peer().nodeId(), peer().incarnation(), reg.incarnation());
                }
                refresh(reg);
            } catch (RuntimeException e) {
                unmapAll();
                failed = e;
            }
        }
        if (failed != null) {
            close(failed.getMessage());
            throw failed;
        }
    }

    /**
     * The path of a pointer of a segment the peer adopted, or {@code null} for the peer's own
     * (and for pointers it serves neither way: the own path refuses them, typed). A pointer of
     * a node the last refresh did not list re-reads the registry first: the peer may have
     * adopted it since.
     */
    private HostedPath hostedPath(long ptr) {
        int n = RemotePtr.nodeId(ptr);
        if (n == peer().nodeId() || ptr == RemotePtr.NULL) {
            return null;
        }
        HostedPath p = hostedPaths.get(n);
        if (p == null && isOpen()) {
            try {
                reload(true);
            } catch (RuntimeException e) {
                return null; // the own path fails the verb with the reason (the connection is closed)
            }
            p = hostedPaths.get(n);
        }
        return p;
    }

    @Override
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        HostedPath p = hostedPath(ptr);
        return p == null ? super.read(ptr, remoteKey, length) : p.read(ptr, remoteKey, length);
    }

    @Override
    public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        HostedPath p = hostedPath(ptr);
        return p == null ? super.write(ptr, remoteKey, src, offset, length) : p.write(ptr, remoteKey, src, offset, length);
    }

    @Override
    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        HostedPath p = hostedPath(ptr);
        return p == null ? super.compareAndSwap(ptr, remoteKey, expected, update)
                : p.compareAndSwap(ptr, remoteKey, expected, update);
    }

    @Override
    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
        HostedPath p = hostedPath(ptr);
        return p == null ? super.fetchAndAdd(ptr, remoteKey, delta) : p.fetchAndAdd(ptr, remoteKey, delta);
    }

    @Override
    public void compareAndSwap(long ptr, long remoteKey, long expected, long update, LongCompletion done) {
        HostedPath p = hostedPath(ptr);
        if (p == null) {
            super.compareAndSwap(ptr, remoteKey, expected, update, done);
        } else {
            p.compareAndSwap(ptr, remoteKey, expected, update, done);
        }
    }

    @Override
    public void fetchAndAdd(long ptr, long remoteKey, long delta, LongCompletion done) {
        HostedPath p = hostedPath(ptr);
        if (p == null) {
            super.fetchAndAdd(ptr, remoteKey, delta, done);
        } else {
            p.fetchAndAdd(ptr, remoteKey, delta, done);
        }
    }

    /**
     * The peer's own table when it hosts nothing; else a router over its own and its hosted
     * tables, when every path may run a verb on the caller's thread now.
     */
    @Override
    public BlockingVerbs blockingNow() {
        SegmentTable own = tableNow();
        if (own == null) {
            return null;
        }
        HostedPath[] paths = hostedSnapshot;
        if (paths.length == 0) {
            return own;
        }
        for (HostedPath p : paths) {
            if (p.tableNow() == null) {
                return null;
            }
        }
        return router;
    }

    /** Maps segments the registry lists and this connection lacks; unmaps the ones it no longer lists. */
    synchronized void refresh(ShmRegistry reg) {
        for (Segment s : mapped.all()) {
            String f = reg.segments().get(s.index());
            if (f == null || !peerDir.resolve(f).equals(s.file())) {
                mapped.remove(s.index());
                s.close(true);
            }
        }
        reg.segments().forEach((index, f) -> {
            if (mapped.get(index) == null) {
                Segment s = Segment.mapPeer(peer().nodeId(), peerDir.resolve(f));
                SegmentDescriptor d = s.descriptor();
                if (d.nodeId() != peer().nodeId() || d.index() != index || d.incarnation() != reg.incarnation()) {
                    s.close(true);
                    throw NodeUnavailableException.notSent(peer().nodeId(), "segment file does not match its registry: "
                            + "path=" + s.file() + ", header=" + d + ", registry incarnation=" + reg.incarnation());
                }
                mapped.add(s);
            }
        });
        refreshHosted(reg);
        refreshDue = false;
    }

    /** Maps the adopted segments the registry lists and this connection lacks; unmaps the ones it no longer lists. */
    private void refreshHosted(ShmRegistry reg) {
        for (HostedPath p : hostedPaths.values()) {
            for (Segment s : p.table.all()) {
                String f = reg.hosted().get(GroupId.of(p.node, s.index()));
                if (f == null || !peerDir.resolve(f).equals(s.file())) {
                    p.table.remove(s.index());
                    s.close(true);
                }
            }
        }
        reg.hosted().forEach((group, f) -> {
            int n = GroupId.node(group);
            int index = GroupId.index(group);
            HostedPath p = hostedPaths.computeIfAbsent(n, HostedPath::new);
            if (p.table.get(index) == null) {
                Segment s = Segment.mapPeer(peer().nodeId(), peerDir.resolve(f));
                SegmentDescriptor d = s.descriptor();
                if (d.nodeId() != n || d.index() != index) {
                    s.close(true);
                    throw NodeUnavailableException.notSent(peer().nodeId(), "adopted segment file does not match its"
                            + " registry: path=" + s.file() + ", header=" + d + ", registry entry=hosted." + n + "."
                            + index);
                }
                p.table.add(s);
            }
        });
        // a path whose table emptied stays (its verbs fail typed, unknown segment): closing it here, under
        // this connection's lock, would take its pipeline's lock in the other order than a held verb does
        hostedSnapshot = hostedPaths.values().toArray(new HostedPath[0]);
    }

    private void unmapAll() {
        for (Segment s : mapped.all()) {
            mapped.remove(s.index());
            s.close(true);
        }
        for (HostedPath p : hostedPaths.values()) {
            for (Segment s : p.table.all()) {
                p.table.remove(s.index());
                s.close(true);
            }
        }
    }

    @Override
    public void close(String reason) {
        super.close(reason);
        outbox.close(new NodeUnavailableException(peer().nodeId(), reason));
        transport.messaging().detach(peer().nodeId(), outbox);
        refreshTimer.cancel(false);
        synchronized (this) {
            unmapAll();
        }
        for (HostedPath p : hostedPaths.values()) { // outside this connection's lock (see refreshHosted)
            p.close(reason);
        }
    }

    /**
     * The verbs on one logical node's segments that the peer adopted: run on this
     * process's mappings of the peer's {@code hosted.} files, after the peer's liveness
     * check ({@link ShmConnection#target()}). Faults are the peer's (its node id).
     */
    private final class HostedPath extends DirectConnection {
        final int node;
        final SegmentTable table;

        HostedPath(int node) {
            super(ShmConnection.this.peer(), transport.faults(), transport.config().operationTimeout(), transport.observer());
            this.node = node;
            this.table = new SegmentTable(node);
        }

        @Override
        protected SegmentTable target() {
            ShmConnection.this.target(); // the adopter's liveness and registry, not the dead node's
            if (!ShmConnection.this.isOpen()) {
                throw NodeUnavailableException.notSent(peer().nodeId(), "connection to node " + peer().nodeId()
                        + " closed");
            }
            return table;
        }
    }

    /** Blocking verbs over the peer's own table and its hosted ones, by the pointer's node. */
    private final class Router implements BlockingVerbs {
        private SegmentTable table(long ptr) {
            HostedPath p = hostedPath(ptr);
            return p == null ? mapped : p.table;
        }

        @Override
        public void readInto(long ptr, long remoteKey, byte[] dst, int dstOffset, int length) {
            table(ptr).readInto(ptr, remoteKey, dst, dstOffset, length);
        }

        @Override
        public void readToAddress(long ptr, long remoteKey, long address, int length) {
            table(ptr).readToAddress(ptr, remoteKey, address, length);
        }

        @Override
        public void writeFromAddress(long ptr, long remoteKey, long address, int length) {
            table(ptr).writeFromAddress(ptr, remoteKey, address, length);
        }

        @Override
        public long readLong(long ptr, long remoteKey) {
            return table(ptr).readLong(ptr, remoteKey);
        }

        @Override
        public void write(long ptr, long remoteKey, byte[] src, int offset, int length) {
            table(ptr).write(ptr, remoteKey, src, offset, length);
        }

        @Override
        public void writeLong(long ptr, long remoteKey, long value) {
            table(ptr).writeLong(ptr, remoteKey, value);
        }

        @Override
        public long compareAndSwap(long ptr, long remoteKey, long expected, long update) {
            return table(ptr).compareAndSwap(ptr, remoteKey, expected, update);
        }

        @Override
        public long fetchAndAdd(long ptr, long remoteKey, long delta) {
            return table(ptr).fetchAndAdd(ptr, remoteKey, delta);
        }
    }
}
