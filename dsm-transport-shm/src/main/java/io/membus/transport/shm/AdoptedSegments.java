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
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentTable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;

/**
 * The segments of dead nodes that one {@link ShmTransport} adopted and serves
 * (docs/replication.md §8): the adoption itself ({@link #adopt}: the claim race, fencing the
 * dead process, mapping its files under their logical identity), the tables that serve them
 * ({@link #hosted(int)}), the adopter chain of a dead node as the claim files say
 * ({@link #adopter}), and closing them with the transport. The claims and the fencing of a
 * process are {@link ShmAdoption}'s; this class decides what to take and serves it.
 *
 * <p><b>Note:</b> thread-safe. {@link #adopt} runs under the transport's lock (one adoption
 * at a time, exports and unexports waiting); the adopted segments are published to verbs
 * through concurrent maps (a verb sees a segment only once it is mapped whole);
 * {@link #close} runs once, when the transport closes.
 */
final class AdoptedSegments {
    /** The transport's logger: what adoption logs is about the transport. */
    private static final Logger LOG = LoggerFactory.getLogger(ShmTransport.class);

    private final ShmTransport transport;
    private final Path dir;
    private final PrivateFiles files;
    /**
     * Adopted logical segments served by this node, one table per logical node (a table
     * accepts the pointers of its node). The seam until {@link SegmentTable} holds hosted
     * groups itself (docs/replication.md §2.4): then these go into the transport's table.
     */
    private final Map<Integer, SegmentTable> hosted = new ConcurrentHashMap<>();
    /** What each adoption took, by {@code node/incarnation} of the dead node (a repeated call returns it). */
    private final Map<String, List<SegmentDescriptor>> adoptions = new ConcurrentHashMap<>();
    /** How a dead node's process is killed (a seam for tests: a process this user cannot kill). */
    private volatile ShmAdoption.ProcessControl processControl = ShmAdoption.KILL;

    AdoptedSegments(ShmTransport transport, Path dir, PrivateFiles files) {
        this.transport = transport;
        this.dir = dir;
        this.files = files;
    }

    /** How adoptions kill a dead node's process; tests set one that fails as a process of another user would. */
    void processControl(ShmAdoption.ProcessControl control) {
        this.processControl = java.util.Objects.requireNonNull(control, "control");
    }

    /** {@link ShmTransport#adopt}, under the transport's lock, once the transport is known open. */
    List<SegmentDescriptor> adopt(PeerInfo dead, long deadlineNanos) {
        if (dead.nodeId() == transport.nodeId()) {
            throw new DsmConfigException("adopt: dead node", dead, "another node than this one (node " + transport.nodeId() + ")");
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
            if (winner.isPresent() && winner.get().node() != transport.nodeId()) {
                throw new NotPrimaryException(transport.nodeId(), GroupId.of(dead.nodeId(), 0), winner.get().node(), Ballot.NONE);
            }
            LOG.info("replication: node {} left nothing to adopt ({})", dead.nodeId(), missing.getMessage());
            return List.of();
        }
        if (reg.incarnation() != dead.incarnation()) {
            throw new StaleIncarnationException(dead.nodeId(), dead.incarnation(), reg.incarnation());
        }
        Map<Integer, String> groups = new TreeMap<>(reg.hosted());
        reg.segments().forEach((index, f) -> groups.put(GroupId.of(dead.nodeId(), index), f));
        ShmAdoption.Claim self = new ShmAdoption.Claim(transport.nodeId(), transport.incarnation());
        ShmAdoption.Claim winner = ShmAdoption.race(dir, files, dead.nodeId(), dead.incarnation(), self);
        if (!winner.equals(self)) {
            int first = groups.isEmpty() ? GroupId.of(dead.nodeId(), 0) : groups.keySet().iterator().next();
            throw new NotPrimaryException(transport.nodeId(), first, winner.node(), Ballot.NONE);
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
        transport.segmentsChanged();
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
                file = dir.resolve(hostedName(transport.nodeId(), n, s));
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
            transport.table().host(io.membus.core.replication.Hosted.adopted(group, seg));
            return seg.descriptor();
        } catch (IOException | RuntimeException e) {
            LOG.error("replication: cannot adopt segment {} of node {}: file={}: {}; its memory is lost unless the"
                    + " file is restored", GroupId.toString(group), owner, file, e.toString());
            return null;
        }
    }

    static String hostedName(int holder, int node, int index) {
        return "node-" + holder + "-hosted-" + node + "-" + index + ".seg";
    }

    /**
     * The adopter of {@code dead}'s segments, as the claim files say: the node that won the
     * race for it, or, when that node died and was adopted in turn, the one that adopted it
     * (followed to the end). Empty when no survivor has claimed {@code dead}. What routes the
     * groups of {@code dead} before the directory shows the adopter's claims.
     */
    Optional<ShmAdoption.Claim> adopter(PeerInfo dead) {
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
    SegmentTable hosted(int node) {
        return hosted.get(node);
    }

    /** Every adopted segment this node serves (a snapshot). */
    List<Segment> hostedSegments() {
        List<Segment> all = new ArrayList<>();
        hosted.values().forEach(t -> all.addAll(t.all()));
        return all;
    }

    /**
     * Closes the adopted segments. An adopted file that was named after its node
     * (non-persistent) is deleted, as the node's own are; a persistent one is kept. The claims
     * this node won are removed with them.
     */
    void close() {
        for (Map.Entry<Integer, SegmentTable> e : hosted.entrySet()) {
            for (Segment s : e.getValue().all()) {
                e.getValue().remove(s.index());
                transport.table().unhost(GroupId.of(s.nodeId(), s.index()));
                s.close(!s.file().getFileName().toString().equals(hostedName(transport.nodeId(), s.nodeId(), s.index())));
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
}
