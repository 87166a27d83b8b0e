package io.membus.transport.shm;

import io.membus.core.PrivateFiles;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupId;
import io.membus.core.transport.AbstractTransport;
import io.membus.core.transport.Connection;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.TransportConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;

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
 * <p><b>Note:</b> thread-safe. Adoptions run one at a time per transport ({@code synchronized});
 * the adopted segments are published to verbs through concurrent maps (a verb sees a segment
 * only once it is mapped whole).
 */
public final class ShmTransport extends AbstractTransport {
    private static final Logger LOG = LoggerFactory.getLogger(ShmTransport.class);

    private final Path dir;
    private final io.membus.core.transport.TransportCapabilities capabilities;
    private final long refreshNanos;
    private final ShmMessaging messaging;
    /** Permissions of every file and directory this node creates in {@link #dir}. */
    private final PrivateFiles files;
    /**
     * Adopted logical segments served by this node, one table per logical node (a table
     * accepts the pointers of its node). The seam until {@link SegmentTable} holds hosted
     * groups itself (docs/replication.md §2.4): then these go into {@link #table}'s map.
     */
    private final Map<Integer, SegmentTable> hosted = new ConcurrentHashMap<>();
    /** What each adoption took, by {@code node/incarnation} of the dead node (a repeated call returns it). */
    private final Map<String, List<SegmentDescriptor>> adoptions = new ConcurrentHashMap<>();
    /** How a dead node's process is killed (a seam for tests: a process this user cannot kill). */
    private volatile ShmAdoption.ProcessControl processControl = ShmAdoption.KILL;

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
        this.processControl = java.util.Objects.requireNonNull(control, "control");
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
        if (dead.nodeId() == nodeId()) {
            throw new DsmConfigException("adopt: dead node", dead, "another node than this one (node " + nodeId() + ")");
        }
        if (!Path.of(dead.address()).toAbsolutePath().equals(dir)) {
            throw new DsmConfigException("adopt: dead node's address", dead.address(), "this node's shared directory "
                    + dir + " (membus.transports.shm.dir): only nodes of one directory adopt each other");
        }
        List<SegmentDescriptor> done = adoptions.get(dead.nodeId() + "/" + dead.incarnation());
        if (done != null) {
            return done;
        }
        Path regFile = ShmRegistry.fileOf(dir, dead.nodeId());
        ShmRegistry reg;
        try {
            reg = ShmRegistry.readAny(dir, dead.nodeId());
        } catch (NodeUnavailableException missing) {
            Optional<ShmAdoption.Claim> winner = ShmAdoption.read(dir, dead.nodeId(), dead.incarnation());
            if (winner.isPresent() && winner.get().node() != nodeId()) {
                throw new NotPrimaryException(nodeId(), GroupId.of(dead.nodeId(), 0), winner.get().node(), Ballot.NONE);
            }
            LOG.info("replication: node {} left nothing to adopt ({})", dead.nodeId(), missing.getMessage());
            return List.of();
        }
        if (reg.incarnation() != dead.incarnation()) {
            throw new StaleIncarnationException(dead.nodeId(), dead.incarnation(), reg.incarnation());
        }
        Map<Integer, String> groups = new TreeMap<>(reg.hosted());
        reg.segments().forEach((index, f) -> groups.put(GroupId.of(dead.nodeId(), index), f));
        ShmAdoption.Claim self = new ShmAdoption.Claim(nodeId(), incarnation());
        ShmAdoption.Claim winner = ShmAdoption.race(dir, files, dead.nodeId(), dead.incarnation(), self);
        if (!winner.equals(self)) {
            int first = groups.isEmpty() ? GroupId.of(dead.nodeId(), 0) : groups.keySet().iterator().next();
            throw new NotPrimaryException(nodeId(), first, winner.node(), Ballot.NONE);
        }
        boolean wasRunning = reg.processAlive();
        String blocked = ShmAdoption.fence(reg, regFile, groups.keySet(), deadlineNanos, processControl);
        if (blocked != null) {
            LOG.warn(blocked);
            throw NodeUnavailableException.notSent(dead.nodeId(), blocked);
        }
        // what dead had won but not yet listed as hosted when it died: the nodes whose claim names it
        Map<Integer, Integer> from = new TreeMap<>(); // group -> the node whose files hold it
        groups.keySet().forEach(g -> from.put(g, dead.nodeId()));
        List<ShmRegistry> orphans = new ArrayList<>();
        for (ShmRegistry orphan : unfinishedAdoptions(dead)) {
            Map<Integer, String> theirs = new TreeMap<>(orphan.hosted());
            orphan.segments().forEach((index, f) -> theirs.put(GroupId.of(orphan.nodeId(), index), f));
            theirs.keySet().removeAll(groups.keySet());
            if (theirs.isEmpty()) {
                continue;
            }
            String stillRuns = ShmAdoption.fence(orphan, ShmRegistry.fileOf(dir, orphan.nodeId()), theirs.keySet(),
                    deadlineNanos, processControl);
            if (stillRuns != null) {
                LOG.warn(stillRuns);
                throw NodeUnavailableException.notSent(orphan.nodeId(), stillRuns);
            }
            theirs.forEach((g, f) -> {
                groups.put(g, f);
                from.put(g, orphan.nodeId());
            });
            orphans.add(orphan);
            LOG.info("replication: node {} had won node {}'s files and died before it served them; adopting them too",
                    dead.nodeId(), orphan.nodeId());
        }
        List<SegmentDescriptor> adopted = new ArrayList<>();
        Map<Integer, List<SegmentDescriptor>> byOwner = new TreeMap<>();
        groups.forEach((group, f) -> {
            SegmentDescriptor d = adoptFile(from.get(group), dead.nodeId(), group, f);
            if (d != null) {
                adopted.add(d);
                byOwner.computeIfAbsent(from.get(group), k -> new ArrayList<>()).add(d);
            }
        });
        segmentsChanged();
        List<SegmentDescriptor> result = List.copyOf(adopted);
        adoptions.put(dead.nodeId() + "/" + dead.incarnation(), result);
        for (ShmRegistry orphan : orphans) { // adopted here too: a call for them returns them, close removes their claims
            adoptions.put(orphan.nodeId() + "/" + orphan.incarnation(),
                    List.copyOf(byOwner.getOrDefault(orphan.nodeId(), List.of())));
        }
        LOG.info("replication: adopted segment {} of node {} (incarnation {}; its process {} {})",
                result.isEmpty() ? "none" : result.stream().map(d -> d.nodeId() + "/" + d.index())
                        .collect(Collectors.joining(", ")),
                dead.nodeId(), dead.incarnation(), reg.pid(), wasRunning ? "killed first" : "had exited");
        return result;
    }

    /**
     * The registries of the nodes whose adoption claim names {@code dead} (it won their race):
     * their files are {@code dead}'s to serve even if it died before listing them.
     */
    private List<ShmRegistry> unfinishedAdoptions(PeerInfo dead) {
        List<ShmRegistry> found = new ArrayList<>();
        java.util.regex.Pattern claim = java.util.regex.Pattern.compile("node-(\\d+)-(\\d+)\\.adopt");
        try (java.util.stream.Stream<Path> list = Files.list(dir)) {
            for (Path f : (Iterable<Path>) list::iterator) {
                java.util.regex.Matcher m = claim.matcher(f.getFileName().toString());
                if (!m.matches()) {
                    continue;
                }
                int node = Integer.parseInt(m.group(1));
                long inc = Long.parseLong(m.group(2));
                Optional<ShmAdoption.Claim> c = ShmAdoption.read(dir, node, inc);
                if (c.isEmpty() || c.get().node() != dead.nodeId() || c.get().incarnation() != dead.incarnation()) {
                    continue;
                }
                try {
                    ShmRegistry r = ShmRegistry.readAny(dir, node);
                    if (r.incarnation() == inc) {
                        found.add(r);
                    }
                } catch (NodeUnavailableException gone) {
                    // no registry: nothing listed to take over
                }
            }
        } catch (IOException | NumberFormatException e) {
            LOG.warn("replication: cannot list {} for the adoptions node {} had not finished: {}", dir, dead.nodeId(),
                    e.toString());
        }
        return found;
    }

    /**
     * Maps one file of a dead node as an adopted group; null (logged) when the file is gone or
     * not the group's.
     *
     * @param owner   the node whose registry lists the file
     * @param adopter the dead node being adopted (the owner itself, or the node that had won the
     *                owner's files and may have renamed them before it died)
     */
    private SegmentDescriptor adoptFile(int owner, int adopter, int group, String fileName) {
        int n = GroupId.node(group);
        int s = GroupId.index(group);
        SegmentTable t = hosted.get(n);
        if (t != null && t.get(s) != null) {
            return t.get(s).descriptor(); // adopted here already
        }
        Path src = dir.resolve(fileName);
        Path file = src;
        boolean named = fileName.equals("node-" + owner + "-seg-" + s + ".seg") && n == owner
                || fileName.equals(hostedName(owner, n, s));
        if (named && !Files.exists(src) && Files.exists(dir.resolve(hostedName(adopter, n, s)))) {
            src = dir.resolve(hostedName(adopter, n, s)); // renamed by an adopter that died before listing it
        }
        try {
            if (named) {
                file = dir.resolve(hostedName(nodeId(), n, s));
                if (Files.exists(src)) {
                    try {
                        Files.move(src, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                    } catch (AtomicMoveNotSupportedException e) {
                        Files.move(src, file, StandardCopyOption.REPLACE_EXISTING);
                    }
                }
            }
            Segment seg = Segment.adoptFile(file, n, s);
            hosted.computeIfAbsent(n, SegmentTable::new).add(seg);
            // this node's own table serves it too: RemoteMemory's local fast path (verbs routed to this node)
            table().host(io.membus.core.replication.Hosted.adopted(group, seg));
            return seg.descriptor();
        } catch (IOException | RuntimeException e) {
            LOG.error("replication: cannot adopt segment {} of node {}: file={}: {}; its memory is lost unless the"
                    + " file is restored", GroupId.toString(group), owner, file, e.toString());
            return null;
        }
    }

    private static String hostedName(int holder, int node, int index) {
        return "node-" + holder + "-hosted-" + node + "-" + index + ".seg";
    }

    /**
     * The adopter of {@code dead}'s segments, as the claim files say: the node that won the
     * race for it, or, when that node died and was adopted in turn, the one that adopted it
     * (followed to the end). Empty when no survivor has claimed {@code dead}. What routes the
     * groups of {@code dead} before the directory shows the adopter's claims.
     */
    public Optional<ShmAdoption.Claim> adopter(PeerInfo dead) {
        Optional<ShmAdoption.Claim> c = ShmAdoption.read(dir, dead.nodeId(), dead.incarnation());
        for (int hops = 0; c.isPresent() && hops < 64; hops++) {
            Optional<ShmAdoption.Claim> next = ShmAdoption.read(dir, c.get().node(), c.get().incarnation());
            if (next.isEmpty()) {
                return c;
            }
            c = next;
        }
        return c;
    }

    /**
     * The adopted segments of logical node {@code node} this node serves (a table that accepts
     * that node's pointers), or {@code null}. Verbs this node runs on them itself go here.
     */
    public SegmentTable hosted(int node) {
        return hosted.get(node);
    }

    /** Every adopted segment this node serves (a snapshot). */
    public List<Segment> hostedSegments() {
        List<Segment> all = new ArrayList<>();
        hosted.values().forEach(t -> all.addAll(t.all()));
        return all;
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
        for (Map.Entry<Integer, SegmentTable> e : hosted.entrySet()) {
            for (Segment s : e.getValue().all()) {
                e.getValue().remove(s.index());
                table().unhost(GroupId.of(s.nodeId(), s.index()));
                s.close(!s.file().getFileName().toString().equals(hostedName(nodeId(), s.nodeId(), s.index())));
            }
        }
        hosted.clear();
        for (String key : adoptions.keySet()) {
            String[] ni = key.split("/");
            try {
                Files.deleteIfExists(ShmAdoption.claimFile(dir, Integer.parseInt(ni[0]), Long.parseLong(ni[1])));
            } catch (IOException e) {
                LOG.warn("could not delete adoption claim of node {}: {}", key, e.toString());
            }
        }
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
