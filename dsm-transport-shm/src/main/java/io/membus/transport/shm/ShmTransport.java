package io.membus.transport.shm;

import io.membus.core.PrivateFiles;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.message.Outbox;
import io.membus.core.transport.AbstractTransport;
import io.membus.core.transport.Connection;
import io.membus.core.transport.Deadlines;
import io.membus.core.transport.DirectConnection;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.TransportConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledFuture;

/**
 * The {@code shm} transport: processes on one host map each other's segments,
 * which are files in a shared directory (by default under {@code /dev/shm}, so
 * they are memory, not disk). Reads, writes, compare-and-swap and fetch-and-add
 * are real one-sided memory operations by the initiator's CPU on the target's
 * memory — the CXL-style case; the target process takes no part. The initiator
 * still runs every verb check (remote key from the file header, flags, bounds,
 * alignment) before it touches a byte.
 *
 * <p>Peers are found through {@link ShmRegistry} files in the same directory.
 * A connection re-reads its peer's registry at most every
 * {@code membus.transports.shm.refresh-interval} (default 50ms) to map new segments, drop removed
 * ones, and notice a peer process that has exited (its verbs then fail with
 * {@link NodeUnavailableException}).
 *
 * <p>Settings: {@code membus.transports.shm} (this module's {@code reference.conf}
 * documents every key); {@code dir} (default {@code /dev/shm/membus}) is the shared
 * directory, and {@link PeerInfo#address()} of a node is that directory.
 *
 * <p>Limits: fault rules apply at the initiator only (the target takes no part in
 * a verb), and fencing stops this node from reaching a fenced peer but cannot stop
 * the fenced process from reaching this node's files: processes that share a
 * directory trust each other, as CPUs sharing memory do.
 *
 * <p><b>Note:</b> thread-safe.
 */
public final class ShmTransport extends AbstractTransport {
    private static final Logger LOG = LoggerFactory.getLogger(ShmTransport.class);

    private final Path dir;
    private final io.membus.core.transport.TransportCapabilities capabilities;
    private final long refreshNanos;
    private final ShmMessaging messaging;
    /** Permissions of every file and directory this node creates in {@link #dir}. */
    private final PrivateFiles files;

    public ShmTransport(TransportConfig config) {
        super(config);
        String d = config.require("shm.dir", "a writable directory (on Linux, one under /dev/shm)");
        this.dir = Path.of(d).toAbsolutePath();
        this.capabilities = io.membus.core.transport.TransportCapabilities.SOFTWARE.withFencesInitiators(false)
                .withSegmentFiles(dir, TransportConfig.key("shm.dir"))
                .withReplication(io.membus.core.replication.ReplicationSupport.ADOPTION);
        this.refreshNanos = config.getDuration("shm.refresh-interval").toNanos();
        String group = config.getString("shm.group", GROUP_ALLOWED);
        try {
            this.files = PrivateFiles.forGroup(group);
        } catch (IllegalArgumentException e) {
            throw TransportConfig.bad("shm.group", group, GROUP_ALLOWED, e);
        }
        try {
            if (!files.secureDirectory(dir) && dir.getFileSystem().supportedFileAttributeViews().contains("posix")) {
                LOG.warn("membus.transports.shm.dir={} is shared with other users (world-writable, or not this"
                        + " user's): they can list it; this node's files in it are still {}", dir, files);
            }
        } catch (IOException e) {
            throw TransportConfig.bad("shm.dir", d, "a writable directory (on Linux, one under /dev/shm)", e);
        }
        if (!Files.isWritable(dir)) {
            throw TransportConfig.bad("shm.dir", d, "a writable directory (on Linux, one under /dev/shm)");
        }
        this.messaging = new ShmMessaging(config.nodeId(), config.incarnation(), dir, files, messages(),
                config.operationTimeout().toNanos(),
                config.getDuration("shm.idle-park").toNanos());
        segmentsChanged();
    }

    private static final String GROUP_ALLOWED = "\"\" (files readable by this user only) or the name of a group on"
            + " this host that this user belongs to (files and directories shared with it)";

    /** The permissions this node gives its files and directories. */
    public PrivateFiles files() {
        return files;
    }

    @Override
    public String name() {
        return ShmTransportProvider.NAME;
    }

    /**
     * Whole words and plain writes atomic with atomics (the initiator's CPU runs every verb on
     * its mapping, {@link io.membus.core.WordCopy} and CPU atomics); fenced initiators are not
     * refused (the target takes no part in a verb); segment files directly in {@link #directory()},
     * where peers map them from.
     */
    @Override
    public io.membus.core.transport.TransportCapabilities capabilities() {
        return capabilities;
    }

    @Override
    public String localAddress() {
        return dir.toString();
    }

    public Path directory() {
        return dir;
    }

    private Path defaultFile(int index) {
        return dir.resolve("node-" + nodeId() + "-seg-" + index + ".seg");
    }

    @Override
    protected Segment createSegment(SegmentSpec spec) {
        if (spec.file() != null) {
            Path f = spec.file().toAbsolutePath();
            if (!f.getParent().equals(dir)) {
                throw new DsmConfigException("segment file", f, "a file directly in membus.transports.shm.dir=" + dir
                        + " (peers find segment files there)");
            }
            return Segment.createOrOpenFile(f, nodeId(), incarnation(), spec.index(), spec.size(), spec.flags(), false,
                    files);
        }
        Path f = defaultFile(spec.index());
        try {
            Files.deleteIfExists(f); // a non-persistent segment starts zeroed, whatever an earlier run left
        } catch (IOException e) {
            throw TransportConfig.bad("shm.dir", dir, "a directory where node " + nodeId()
                    + " may replace its segment files (cannot delete " + f + ")", e);
        }
        return Segment.createOrOpenFile(f, nodeId(), incarnation(), spec.index(), spec.size(), spec.flags(), true,
                files);
    }

    @Override
    protected boolean keepFilesOnClose(Segment segment) {
        return !segment.file().equals(defaultFile(segment.index()));
    }

    @Override
    protected synchronized void segmentsChanged() {
        Path reg = ShmRegistry.fileOf(dir, nodeId());
        if (isClosed()) {
            try {
                Files.deleteIfExists(reg);
            } catch (IOException e) {
                LOG.warn("could not delete shm registry: path={}", reg, e);
            }
            return;
        }
        Map<Integer, String> files = new TreeMap<>();
        for (Segment s : table.all()) {
            files.put(s.index(), s.file().getFileName().toString());
        }
        new ShmRegistry(nodeId(), incarnation(), ProcessHandle.current().pid(), files,
                ShmMessaging.ringFileName(nodeId()), messages().inboxCapacity(), messaging.maxPayload()).write(dir, this.files);
    }

    @Override
    protected void closeTransport() {
        messaging.close();
    }

    @Override
    protected CompletableFuture<Connection> open(PeerInfo peer) {
        try {
            Path peerDir = Path.of(peer.address());
            ShmRegistry reg = ShmRegistry.read(peerDir, peer.nodeId());
            if (reg.incarnation() != peer.incarnation()) {
                throw new StaleIncarnationException(peer.nodeId(), peer.incarnation(), reg.incarnation());
            }
            ShmConnection c = new ShmConnection(peer, peerDir, reg);
            c.refresh(reg);
            return CompletableFuture.completedFuture(c);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * Verbs run by this process's CPU on its mappings of the peer's segment files;
     * messages are written by this process's CPU into the peer's ring, and answered
     * into this node's ring.
     */
    private final class ShmConnection extends DirectConnection {
        private final Path peerDir;
        private final SegmentTable mapped;
        /** Set by the timer every refresh interval, cleared by the verb that re-reads the registry. */
        private volatile boolean refreshDue;
        private final ScheduledFuture<?> refreshTimer;
        private final Outbox outbox;
        private final ShmRing peerRing;

        ShmConnection(PeerInfo peer, Path peerDir, ShmRegistry reg) {
            super(peer, ShmTransport.this.faults(), config.operationTimeout(), observer());
            this.peerDir = peerDir;
            this.mapped = new SegmentTable(peer.nodeId());
            this.outbox = new Outbox(peer.nodeId(), config.operationTimeout(), messages(), this::transmit);
            if (reg.inbox() != null) {
                this.peerRing = messaging.peerRing(peer.nodeId(), peer.incarnation(), peerDir, reg.inbox());
                messaging.attach(peer.nodeId(), peer.incarnation(), outbox);
                outbox.grant(reg.inboxCredits(), reg.inboxMaxSize());
            } else {
                this.peerRing = null;
                outbox.close(new io.membus.core.error.TransportUnavailableException("shm", "node " + peer.nodeId()
                        + " runs a version of the shm transport without messages"));
            }
            this.refreshTimer = Deadlines.every(this::onTimer, refreshNanos);
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
            return peerRing.writeMessage(nodeId(), incarnation(), correlation, channel, request, payload);
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
                synchronized (this) {
                    if (refreshDue) {
                        try {
                            ShmRegistry reg = ShmRegistry.read(peerDir, peer().nodeId());
                            if (reg.incarnation() != peer().incarnation()) {
                                throw new StaleIncarnationException(peer().nodeId(), peer().incarnation(),
                                        reg.incarnation());
                            }
                            refresh(reg);
                        } catch (RuntimeException e) {
                            unmapAll();
                            close(e.getMessage());
                            throw e;
                        }
                    }
                }
            }
            return mapped;
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
            refreshDue = false;
        }

        private void unmapAll() {
            for (Segment s : mapped.all()) {
                mapped.remove(s.index());
                s.close(true);
            }
        }

        @Override
        public void close(String reason) {
            super.close(reason);
            outbox.close(new NodeUnavailableException(peer().nodeId(), reason));
            messaging.detach(peer().nodeId(), outbox);
            refreshTimer.cancel(false);
            synchronized (this) {
                unmapAll();
            }
        }
    }
}
