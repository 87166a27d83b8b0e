package io.membus.transport.shm;

import io.membus.core.PrivateFiles;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.replication.GroupId;
import io.membus.core.transport.AbstractTransport;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.TransportConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;

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
 * <p>Replication is by <b>adoption</b> ({@link #adopt}, docs/replication.md §8): when
 * membership removes a node, one survivor kills its process if it still runs and serves its
 * segment files from then on, under their logical identity {@code (n, s)} and remote key; its
 * registry lists them as {@code hosted.<n>.<s>}, and a connection to it resolves pointers of
 * those segments to them ({@link #hosted(int)} is the same on the adopter's side).
 *
 * <p>This class is the transport's setup, its own segment files and its registry; a
 * connection to a peer is a {@link ShmConnection}, the adopted segments are
 * {@link AdoptedSegments}' (the claims and the fencing of a dead process
 * {@link ShmAdoption}'s), the message rings {@link ShmMessaging}'s.
 *
 * <p><b>Note:</b> thread-safe. Adoptions run one at a time per transport ({@code synchronized});
 * the adopted segments are published to verbs through concurrent maps (a verb sees a segment
 * only once it is mapped whole).
 */
public final class ShmTransport extends AbstractTransport {
    private static final Logger LOG = LoggerFactory.getLogger(ShmTransport.class);

    private final Path dir;
    private final io.membus.core.capability.TransportCapabilities capabilities;
    private final long refreshNanos;
    private final ShmMessaging messaging;
    /** Permissions of every file and directory this node creates in {@link #dir}. */
    private final PrivateFiles files;
    /** The segments of dead nodes this node adopted and serves, and their claims. */
    private final AdoptedSegments adopted;

    public ShmTransport(TransportConfig config) {
        super(config);
        String d = config.require("shm.dir", "a writable directory (on Linux, one under /dev/shm)");
        this.dir = Path.of(d).toAbsolutePath();
        this.capabilities = ShmTransportProvider.CAPABILITIES.withSegmentFiles(dir, TransportConfig.key("shm.dir"));
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
        this.adopted = new AdoptedSegments(this, dir, files);
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
    public io.membus.core.capability.TransportCapabilities capabilities() {
        return capabilities;
    }

    @Override
    public String localAddress() {
        return dir.toString();
    }

    public Path directory() {
        return dir;
    }

    /** The message rings of this node; for its connections. */
    ShmMessaging messaging() {
        return messaging;
    }

    /** How often a connection re-reads its peer's registry ({@code membus.transports.shm.refresh-interval}). */
    long refreshNanos() {
        return refreshNanos;
    }

    /** How adoptions kill a dead node's process; tests set one that fails as a process of another user would. */
    void processControl(ShmAdoption.ProcessControl control) {
        adopted.processControl(control);
    }

    /**
     * Adopts the segment files of {@code dead} (docs/replication.md §8): races the other
     * survivors for the claim file {@code node-<n>-<incarnation>.adopt}; as the winner, kills
     * {@code dead}'s process if it still runs (pid and start instant from its registry) and
     * waits for its exit until {@code deadlineNanos}; then maps every file its registry lists,
     * its own segments and the ones it had adopted in turn, keeping their logical identity and
     * remote key, serves them ({@link #hosted(int)}, connections to this node) and lists them in
     * this node's registry as {@code hosted.<n>.<s>}. Files named after their node (the
     * non-persistent ones) are renamed {@code node-<self>-hosted-<n>-<s>.seg} first, so a
     * restart of {@code n} cannot replace them; a persistent segment's file keeps its path.
     * Calling it again for the same incarnation returns what was adopted. Adoptions hold this
     * transport's lock while they wait for the dead process's exit (exports and unexports of this
     * node wait meanwhile, at most until the deadline). A dead node that had itself won the race
     * for another node and died before serving its files ({@code .adopt} naming it) hands those
     * over too, their process fenced the same way.
     *
     * <p>Nothing here retries on its own: a caller that got {@link NodeUnavailableException}
     * (the dead process cannot be killed yet) calls again, e.g. every
     * {@code membus.transports.shm.refresh-interval}; the claim stays this node's meanwhile.
     *
     * @return the logical segments adopted (empty when {@code dead} left no registry: it closed
     * and took its memory with it, as without replication)
     * @throws NotPrimaryException            another survivor won the race ({@code primaryHint()})
     * @throws NodeUnavailableException        (not sent) nothing adopted: {@code dead}'s process may
     *                                         still write (it cannot be killed, or has not exited by
     *                                         the deadline); the message is the logged line; call again
     * @throws StaleIncarnationException       {@code dead} has restarted as a newer incarnation
     * @throws DsmConfigException              {@code dead} is this node or uses another directory
     */
    @Override
    public synchronized List<SegmentDescriptor> adopt(PeerInfo dead, long deadlineNanos) {
        checkNotClosed();
        return adopted.adopt(dead, deadlineNanos);
    }

    /**
     * The adopter of {@code dead}'s segments, as the claim files say: the node that won the
     * race for it, or, when that node died and was adopted in turn, the one that adopted it
     * (followed to the end). Empty when no survivor has claimed {@code dead}. What routes the
     * groups of {@code dead} before the directory shows the adopter's claims.
     */
    public Optional<ShmAdoption.Claim> adopter(PeerInfo dead) {
        return adopted.adopter(dead);
    }

    /**
     * The adopted segments of logical node {@code node} this node serves (a table that accepts
     * that node's pointers), or {@code null}. Verbs this node runs on them itself go here.
     */
    public SegmentTable hosted(int node) {
        return adopted.hosted(node);
    }

    /** Every adopted segment this node serves (a snapshot). */
    public List<Segment> hostedSegments() {
        return adopted.hostedSegments();
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
        Map<Integer, String> adopted = new TreeMap<>();
        for (Segment s : hostedSegments()) {
            adopted.put(GroupId.of(s.nodeId(), s.index()), s.file().getFileName().toString());
        }
        new ShmRegistry(nodeId(), incarnation(), ProcessHandle.current().pid(), files,
                ShmMessaging.ringFileName(nodeId()), messages().inboxCapacity(), messaging.maxPayload())
                .withHosted(adopted).write(dir, this.files);
    }

    /**
     * Closes the message rings and the adopted segments. An adopted file that was named after
     * its node (non-persistent) is deleted, as this node's own are; a persistent one is kept.
     * The claims this node won are removed with them. (A graceful hand-over to a successor,
     * docs/replication.md §7, is not built: a leaving adopter takes its adopted memory with it,
     * as it takes its own.)
     */
    @Override
    protected void closeTransport() {
        messaging.close();
        adopted.close();
    }

    @Override
    protected CompletableFuture<Connection> open(PeerInfo peer) {
        try {
            Path peerDir = Path.of(peer.address());
            ShmRegistry reg = ShmRegistry.read(peerDir, peer.nodeId());
            if (reg.incarnation() != peer.incarnation()) {
                throw new StaleIncarnationException(peer.nodeId(), peer.incarnation(), reg.incarnation());
            }
            ShmConnection c = new ShmConnection(this, peer, peerDir, reg);
            c.refresh(reg);
            return CompletableFuture.completedFuture(c);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }
}
