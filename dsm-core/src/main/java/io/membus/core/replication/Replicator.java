package io.membus.core.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.SegmentLostException;
import io.membus.core.transport.FaultInjector;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.Transport;
import io.membus.core.SegmentDescriptor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The replication service of one node (see docs/replication.md, "As built"): it serves
 * the replica groups of this node's exported segments as their primary, holds copies of
 * other nodes' groups, promotes a copy when its primary is removed from membership, and
 * rebuilds copies (re-replication) until every group has {@code backups} of them.
 *
 * <ul>
 *   <li><b>Streams</b> ride on the messaging layer: one {@link CopyStream} per copy node,
 *       channel {@link #CHANNEL} ({@code replication}), binary payloads
 *       ({@link ReplicationCodec}); the copy side is this class's channel handler, run on
 *       the node's message executor, one message of a sender at a time.</li>
 *   <li><b>Decisions</b> (placing copies, re-replication, promotion, publishing this node's
 *       {@link GroupClaim}s through the {@link ClaimPublisher}) run on one thread of this
 *       service, {@code membus-repl-<node>}, fed by directory events; every wait there has a
 *       deadline (the operation timeout).</li>
 *   <li><b>Promotion</b>: when a group's primary is removed and this node is the first
 *       live node of its in-sync list, it adopts {@code Ballot.next(highest, self)}, fences the
 *       other live in-sync copies (FENCE, answered by their epoch and applied sequence),
 *       keeps those at its own applied sequence, drops the others (re-replicated later),
 *       serves at the new epoch and publishes its PRIMARY claim. A copy refuses effects of a
 *       lower epoch, so a cut-off old primary never collects its acknowledgements; refused,
 *       it stops serving the group.</li>
 *   <li><b>The in-sync set shrinks only when membership removes a copy</b>
 *       ({@link DirectoryListener#memberRemoved}), never on a timeout, or when the copy's node
 *       says it leaves gracefully (LEAVING: it never promotes from then on).</li>
 *   <li><b>A graceful leave</b> ({@link #leave}) hands this node's copies back and each group
 *       it serves over to an in-sync copy (HANDOVER) before the node leaves membership
 *       (docs/replication.md §17.9).</li>
 * </ul>
 *
 * <p><b>Note:</b> thread-safe. Public methods may be called from any thread; state shared
 * with the message handler is in concurrent maps and in the groups and copies themselves
 * (each documents its own locking).
 */
public final class Replicator implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Replicator.class);
    /** The messaging channel of replication streams and fences. */
    public static final short CHANNEL = (short) 0x0C21;
    /** Its name, in channel counters and errors. */
    public static final String CHANNEL_NAME = "replication";
    /** Chunks one re-replication step copies before it lets other work of the service run. */
    private static final int CHUNKS_PER_STEP = 8;
    private static final long PACE_NANOS = 2_000_000L;

    private final Transport transport;
    private final RemoteMemory memory;
    private final SegmentDirectory directory;
    private final ClaimPublisher publisher;
    private final ReplicationConfig config;
    private final int self;
    private final Duration timeout;
    private final int partBytes;
    private final ReplicationService service;
    private final Map<Integer, CopyStream> streams = new ConcurrentHashMap<>();
    private final Map<Integer, ReplicaGroup> primaries = new ConcurrentHashMap<>();
    /** Copies this node holds (the memory it allocated for them: closed on drop and at close). */
    private final Map<Integer, CopyReplica> copies = new ConcurrentHashMap<>();
    private final Map<Integer, GroupClaim> claims;
    private final Map<Integer, Inbound> inbound = new ConcurrentHashMap<>();
    private final Set<Integer> rereplicating = ConcurrentHashMap.newKeySet();
    private final Set<Integer> warnedShort = ConcurrentHashMap.newKeySet();
    /**
     * Node ids this service has seen as live members of the directory. A promotion starts
     * only from a removal, i.e. only when the copy's primary was seen live and is gone: a
     * starting node places copies before its own directory entry is published, and its copy
     * holder, not seeing it yet, must not take its absence for a departure.
     */
    private final Set<Integer> seenMembers = ConcurrentHashMap.newKeySet();
    private final DirectoryListener listener = new Listener();
    private volatile boolean started;
    private volatile boolean closed;
    /** Set by {@link #leave}: this node promotes nothing from then on. */
    private volatile boolean leaving;
    /**
     * Memory nodes that said they leave gracefully (LEAVING): they hold no copy of this node's
     * groups from then on and none is placed on them; their removal from membership is no loss.
     */
    private final Set<Integer> departing = ConcurrentHashMap.newKeySet();
    /** Groups served here that lost a copy to a crash (not a graceful leave): their shortage is a WARN. */
    private final Set<Integer> lostCopy = ConcurrentHashMap.newKeySet();
    /** Whether this node said it is short of copies (one line per node, not per group; reset once none is short). */
    private volatile boolean shortSaid;

    /** The copy side's state of the stream from one primary node (guarded by itself). */
    private static final class Inbound {
        long streamId;
        long applied;
    }

    public Replicator(Transport transport, RemoteMemory memory, SegmentDirectory directory, ClaimPublisher publisher,
                      ReplicationConfig config) {
        if (config.enabled() && transport.capabilities().replication() != ReplicationSupport.FORWARDING) {
            throw new io.membus.core.error.DsmConfigException("membus.replication.backups",
                    String.valueOf(config.backups()), "0 on transport " + transport.name() + " (it keeps copies by "
                    + transport.capabilities().replication() + ", not by forwarding changes; see docs/replication.md)");
        }
        this.transport = transport;
        this.memory = memory;
        this.directory = directory;
        this.publisher = publisher;
        this.config = config;
        this.self = transport.nodeId();
        this.timeout = memory.operationTimeout();
        this.partBytes = ReplicationCodec.maxPart(transport.messages().maxMessageSize());
        this.service = new ReplicationService(self, publisher, timeout);
        this.claims = service.claims();
    }

    /** Registers the channel handler and the directory listener. */
    public void start() {
        checkOpen();
        transport.messages().register(CHANNEL, CHANNEL_NAME, new io.membus.core.message.InlineMessageHandler() {
            @Override
            public byte[] onMessage(int fromNode, byte[] payload) {
                return Replicator.this.onMessage(fromNode, payload);
            }

            // a run of effects and chunks only copies bytes into the copy's memory under its order (the inbound's
            // and the copy's monitors): the copy's I/O thread handles it and writes the ack in its read batch,
            // no hand-off to the message executor and back (docs/replication.md §3.5)
            @Override
            public boolean inline(int fromNode, byte[] payload) {
                return ReplicationCodec.onlyData(payload);
            }
        });
        directory.addListener(listener);
        for (PeerInfo m : directory.members()) {
            seenMembers.add(m.nodeId());
        }
        started = true;
        submit(this::reconcile);
    }

    /** The settings this service runs with. */
    public ReplicationConfig config() {
        return config;
    }

    /**
     * This node exported {@code own}: it serves the segment's group as primary at
     * {@link Ballot#initial(int)} from now on, publishes its claim and places copies.
     * Nothing happens with {@code backups = 0}.
     */
    public void exported(Segment own) {
        checkOpen();
        if (own.nodeId() != self) {
            throw new IllegalArgumentException("not a segment of this node: " + own + ", node " + self);
        }
        if (!config.enabled()) {
            return; // backups = 0: no group, no lock, no stream; the segment is served as without replication
        }
        int group = GroupId.of(self, own.index());
        ReplicaGroup g = new ReplicaGroup(group, self, own, Ballot.initial(self), 0, partBytes, config.chunkBytes(),
                timeout, this::inSyncChanged);
        Hosted h = new Hosted(group, own);
        h.primary(g);
        primaries.put(group, g);
        transport.table().host(h);
        claims.put(group, primaryClaim(g));
        schedulePublish();
        submit(this::reconcile);
    }

    /**
     * This node unexports segment {@code index}: its copies are dropped and its claim removed.
     * Call it before {@code Transport.unexport}, which closes the segment's memory.
     */
    public void unexported(int index) {
        int group = GroupId.of(self, index);
        ReplicaGroup g = primaries.remove(group);
        if (g == null) {
            return;
        }
        for (int node : g.holders()) {
            CopyStream s = streams.get(node);
            if (s != null) {
                s.append(ReplicationCodec.drop(group, g.epoch()));
                s.flush();
            }
        }
        g.stop(Ballot.NONE, "segment " + GroupId.toString(group) + " was unexported");
        // the stopped group stays in the table until the segment goes (a verb in between fails, never runs
        // unreplicated); a new export at this index replaces the entry
        claims.remove(group);
        schedulePublish();
    }

    /**
     * A graceful leave (docs/replication.md §17.9), before this node leaves membership and
     * while its claims can still be published: bounded by {@code budget}.
     * <ol>
     *   <li>From here this node promotes nothing (a JOIN still on its way is accepted, and dropped at
     *       close at the latest).</li>
     *   <li>It tells every other live memory node (LEAVING): each removes this node's copies
     *       from its groups (their changes stop waiting for this node), places no copy on it,
     *       and takes its removal as no loss. Then it drops the copies whose primary was told.</li>
     *   <li>For every group it serves: it waits (bounded) until the group has an in-sync copy
     *       on a node that stays, if one can come (a joining copy finishes); then freezes the
     *       group (later verbs are refused, not run, naming the copy), waits until every change
     *       it sequenced is acknowledged by every in-sync copy, and asks the first in-sync copy
     *       to take the group over (HANDOVER): that copy promotes itself at a higher ballot,
     *       as after a crash, and publishes its claim. This node then stops serving the group
     *       and withdraws its claim. A group with no copy anywhere leaves with this node.</li>
     * </ol>
     * Nothing acknowledged is lost: an acknowledged change is on every in-sync copy, the
     * frozen group sequences nothing more, and the copy that takes over holds exactly the
     * frozen state (the hand-over checks its applied sequence). Call {@link #close()} after.
     * Idempotent; does nothing with {@code backups = 0} or once closed.
     */
    public void leave(Duration budget) {
        if (closed || !started || !config.enabled() || leaving) {
            return;
        }
        leaving = true;
        long deadline = System.nanoTime() + budget.toNanos();
        Set<Integer> told = new java.util.HashSet<>();
        for (int node : directory.memoryNodes()) {
            if (node == self || !reachable(node)) {
                continue;
            }
            try {
                RemoteMemory.await(memory.onNode(node, conn -> conn.request(CHANNEL, ReplicationCodec.leaving())),
                        left(deadline, timeout));
                told.add(node);
            } catch (DsmException e) {
                LOG.info("replication: node {} could not tell node {} it leaves ({}); that node sees its removal",
                        self, node, e.getMessage());
            }
        }
        List<String> handedBack = new ArrayList<>();
        for (CopyReplica c : copies.values()) {
            if (told.contains(c.primary())) {
                handedBack.add(GroupId.toString(c.group()));
                dropCopy(c);
            }
        }
        List<String> handed = new ArrayList<>();
        List<String> kept = new ArrayList<>();
        for (ReplicaGroup g : primaries.values()) {
            if (!g.serving()) {
                continue;
            }
            int[] inSync = stayingInSync(g);
            while (inSync.length == 0 && copyCanCome() && System.nanoTime() - deadline < 0) {
                pauseMillis(20); // its joining copy finishes (re-replication runs on the service thread)
                inSync = stayingInSync(g);
            }
            if (inSync.length == 0) {
                kept.add(GroupId.toString(g.group()));
                continue;
            }
            if (handOver(g, inSync, deadline)) {
                handed.add(GroupId.toString(g.group()) + " to node " + inSync[0]);
            } else {
                kept.add(GroupId.toString(g.group()));
            }
        }
        try {
            publishNow();
        } catch (DsmException e) {
            LOG.debug("replication: node {} could not publish its claims on leaving: {}", self, e.getMessage());
        }
        boolean others = copyCanCome();
        LOG.info("replication: node {} leaves: {} its copies{}{}{}", self, handedBack.isEmpty() ? "held none of"
                        : "handed back", handedBack.isEmpty() ? "" : " of segment " + String.join(", ", handedBack),
                handed.isEmpty() ? "" : "; handed over segment " + String.join(", ", handed),
                kept.isEmpty() ? "" : "; segment " + String.join(", ", kept) + (others ? " had no copy to hand over to"
                        : " go with it (no other memory node stays)"));
        if (!kept.isEmpty() && others) {
            LOG.warn("replication: node {} leaves segment {} without a copy although memory nodes stay: its data"
                    + " goes with it (the hand-over did not finish within {} ms)", self, String.join(", ", kept),
                    budget.toMillis());
        }
    }

    /** The in-sync copies of {@code g} on live nodes that are not leaving themselves. */
    private int[] stayingInSync(ReplicaGroup g) {
        return Arrays.stream(g.inSync()).filter(n -> reachable(n) && !departing.contains(n)).toArray();
    }

    /** Whether another live memory node stays, i.e. a copy of this node's groups can be placed or finish. */
    private boolean copyCanCome() {
        for (int n : directory.memoryNodes()) {
            if (n != self && reachable(n) && !departing.contains(n)) {
                return true;
            }
        }
        return false;
    }

    /** Step 3 of {@link #leave} for one group: true when {@code inSync[0]} serves it now. */
    private boolean handOver(ReplicaGroup g, int[] inSync, long deadline) {
        int target = inSync[0];
        g.freeze(target);
        while (!g.quiet() && System.nanoTime() - deadline < 0) {
            pauseMillis(2);
        }
        if (!g.quiet()) {
            LOG.warn("replication: node {} could not hand segment {} over: its copies did not acknowledge sequence {}"
                    + " in time (acknowledged {}); it stops serving it and its copies take over when it has left",
                    self, GroupId.toString(g.group()), g.lastSeq(), g.watermark());
            g.stop(Ballot.NONE, "node " + self + " leaves the cluster");
            return false;
        }
        try {
            byte[] answer = RemoteMemory.await(memory.onNode(target, conn -> conn.request(CHANNEL,
                    ReplicationCodec.handOver(g.group(), g.epoch(), g.lastSeq(), inSync))), left(deadline, timeout));
            ReplicationCodec.Reader r = new ReplicationCodec.Reader(answer, 1, "node " + target);
            if ((byte) r.u8() != ReplicationCodec.OK) {
                throw new NotPrimaryException(target, g.group(), self, g.epoch());
            }
        } catch (DsmException e) {
            LOG.warn("replication: node {} could not hand segment {} over to node {} ({}); it stops serving it and"
                    + " its copies take over when it has left", self, GroupId.toString(g.group()), target,
                    e.getMessage());
            g.stop(Ballot.NONE, "node " + self + " leaves the cluster");
            return false;
        }
        // the copy promotes itself on its service thread and publishes; wait until the directory shows it (bounded),
        // so that no view in between shows the group without a primary
        long seen = Ballot.NONE;
        long until = Math.min(deadline, System.nanoTime() + timeout.toNanos());
        while (System.nanoTime() - until < 0) {
            ReplicaGroupView v = directory.group(GroupId.node(g.group()), GroupId.index(g.group())).orElse(null);
            if (v != null && v.state() == ReplicaGroupView.State.SERVING && v.primary() == target
                    && v.epoch() > g.epoch()) {
                seen = v.epoch();
                break;
            }
            pauseMillis(5);
        }
        // the hint names the new primary either way: the ballot the copy takes is next(epoch, target), §17.9
        g.stop(seen != Ballot.NONE ? seen : Ballot.next(g.epoch(), target), "node " + self + " handed it over to node "
                + target);
        claims.remove(g.group());
        return true;
    }

    private static Duration left(long deadline, Duration cap) {
        long left = Math.max(1_000_000L, deadline - System.nanoTime());
        return Duration.ofNanos(Math.min(left, cap.toNanos()));
    }

    private static void pauseMillis(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** A memory node leaves gracefully (LEAVING): its copies leave this node's groups now, none is placed on it. */
    private byte[] departs(int from) {
        departing.add(from);
        List<String> groups = new ArrayList<>();
        for (ReplicaGroup g : primaries.values()) {
            if (g.removeCopy(from)) {
                groups.add(GroupId.toString(g.group()));
            }
        }
        CopyStream s = streams.remove(from);
        if (s != null) {
            s.close();
        }
        LOG.info("replication: node {} leaves gracefully{}", from, groups.isEmpty() ? ""
                : "; its copies of segment " + String.join(", ", groups) + " are handed back");
        submit(this::reconcile);
        return ReplicationCodec.state(ReplicationCodec.OK, 0, 0);
    }

    /** A leaving primary asks this node's in-sync copy to take its group over (HANDOVER). */
    private byte[] handOverAsked(int from, byte[] payload) {
        ReplicationCodec.Reader r = new ReplicationCodec.Reader(payload, 1, "node " + from);
        int group = r.i32();
        long epoch = r.i64();
        long lastSeq = r.i64();
        int[] inSync = new int[r.i32()];
        for (int i = 0; i < inSync.length; i++) {
            inSync[i] = r.i32();
        }
        CopyReplica c = copies.get(group);
        if (closed || leaving || c == null || !c.inSync() || c.epoch() != epoch || c.primary() != from
                || c.applied() != lastSeq) {
            LOG.info("replication: node {} does not take segment {} over from node {}: {}", self,
                    GroupId.toString(group), from, closed || leaving ? "it is closing itself" : "its copy is " + c
                            + ", asked for epoch " + Ballot.toString(epoch) + " at sequence " + lastSeq);
            return ReplicationCodec.state(ReplicationCodec.NOT_HELD, c != null ? c.epoch() : 0,
                    c != null ? c.applied() : 0);
        }
        submit(() -> {
            if (!closed && copies.get(group) == c) {
                promote(group, epoch, inSync, c, true);
            }
        });
        return ReplicationCodec.state(ReplicationCodec.OK, c.epoch(), c.applied());
    }

    /** A record per group held here (primary, copy, joining copy), by group id. */
    public List<ReplicaGroupStatus> status() {
        List<ReplicaGroupStatus> out = new ArrayList<>();
        for (ReplicaGroup g : primaries.values()) {
            int[] inSync = g.inSync();
            int[] joining = g.joining();
            long[] progress = new long[joining.length];
            StringBuilder text = new StringBuilder("segment ").append(GroupId.toString(g.group())).append(": ");
            if (!g.serving()) {
                text.append("no longer served here (a newer epoch replaced this node)");
            } else {
                text.append(inSync.length).append(" of ").append(config.backups()).append(" backups");
                for (int i = 0; i < joining.length; i++) {
                    progress[i] = Math.max(0, g.joinProgress(joining[i]));
                    text.append(i == 0 ? " (re-replicating: " : ", ").append("node ").append(joining[i]).append(' ')
                            .append(g.memory().size() == 0 ? 0 : progress[i] * 100 / g.memory().size()).append('%');
                }
                if (joining.length > 0) {
                    text.append(')');
                }
            }
            out.add(new ReplicaGroupStatus(g.group(), GroupClaim.Role.PRIMARY, g.epoch(), g.lastSeq(), g.watermark(),
                    inSync, joining, progress, config.backups(), text.toString()));
        }
        for (CopyReplica c : copies.values()) {
            boolean inSync = c.inSync();
            long applied = c.applied();
            out.add(new ReplicaGroupStatus(c.group(), inSync ? GroupClaim.Role.COPY : GroupClaim.Role.JOINING,
                    c.epoch(), applied, applied, new int[0], new int[0], new long[0], config.backups(),
                    "segment " + GroupId.toString(c.group()) + ": " + (inSync ? "copy" : "joining copy")
                            + " of primary node " + c.primary() + " at sequence " + applied));
        }
        out.sort((a, b) -> Integer.compare(a.group(), b.group()));
        return out;
    }

    /** The group this node serves as primary, or null. */
    public ReplicaGroup primary(int group) {
        return primaries.get(group);
    }

    /** The copy of {@code group} this node holds, or null. */
    public CopyReplica copy(int group) {
        return copies.get(group);
    }

    /**
     * A diagnostic snapshot (for a test that found a stall): every group served here with its
     * waiters, every outgoing stream with its counters, every incoming stream's position, the
     * service thread's queue. Not a stable format.
     */
    public String describe() {
        StringBuilder b = new StringBuilder("Replicator{node=").append(self);
        primaries.values().forEach(g -> b.append("\n  ").append(g.describe()));
        copies.values().forEach(c -> b.append("\n  ").append(c));
        streams.values().forEach(s -> b.append("\n  ").append(s.describe()));
        inbound.forEach((n, in) -> {
            synchronized (in) {
                b.append("\n  inbound from ").append(n).append(": applied=").append(in.applied);
            }
        });
        return b.append("\n  service queue=").append(service.queued()).append("}").toString();
    }

    /**
     * The node serving {@code ptr}'s replica group now, from the directory's view: what a
     * verb on it is routed to.
     *
     * @throws SegmentLostException        when the group is lost (every holder died)
     * @throws NotPrimaryException         (not sent) while it is being promoted: no primary yet
     * @throws IllegalArgumentException    when the pointer's segment is not replicated
     */
    public static int primaryOf(SegmentDirectory directory, long ptr) {
        int node = RemotePtr.nodeId(ptr);
        int index = RemotePtr.segmentIndex(ptr);
        ReplicaGroupView v = directory.group(node, index).orElse(null);
        if (v == null) {
            throw new IllegalArgumentException("segment " + node + "/" + index + " is not replicated");
        }
        return switch (v.state()) {
            case SERVING -> v.primary();
            case PROMOTING -> throw new NotPrimaryException(0, v.group(), 0, v.epoch());
            case LOST -> throw new SegmentLostException(v.group(), "epoch=" + Ballot.toString(v.epoch())
                    + ", no live primary and no live in-sync copy");
        };
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (started) {
            directory.removeListener(listener);
            transport.messages().unregister(CHANNEL);
        }
        service.close();
        streams.values().forEach(CopyStream::close);
        for (ReplicaGroup g : primaries.values()) {
            // stopped, and left in the table: while the transport still serves, a verb on the segment fails (not
            // primary) instead of changing it unreplicated; the transport's close removes the segment
            g.stop(Ballot.NONE, "node " + self + " closed its replication");
        }
        for (CopyReplica c : copies.values()) {
            dropCopy(c);
        }
        for (ReplicaGroup g : primaries.values()) {
            // a promoted copy: its memory is this service's (verbs see "not primary"); also a copy of this node's own
            // former segment, promoted here after a restart (its node id is this node's, but the transport never
            // exported it: the table holds no segment of its own at that index, or another one)
            if (g.memory().nodeId() != self || transport.table().get(GroupId.index(g.group())) != g.memory()) {
                g.memory().close(false);
            }
        }
    }

    // ---------------------------------------------------------------- the service thread

    private void checkOpen() {
        if (closed) {
            throw new DsmClosedException("replication of node " + self);
        }
    }

    private void submit(Runnable task) {
        if (!closed) {
            service.submit(task);
        }
    }

    private void later(Runnable task, long delayNanos) {
        if (!closed) {
            service.later(task, delayNanos);
        }
    }

    private final class Listener implements DirectoryListener {
        @Override
        public void memberUp(PeerInfo member) {
            seenMembers.add(member.nodeId());
            submit(Replicator.this::reconcile);
        }

        @Override
        public void memberRemoved(PeerInfo member, String reason) {
            int node = member.nodeId();
            submit(() -> removed(node, reason));
        }

        @Override
        public void segmentAdded(SegmentDescriptor segment) {
            submit(Replicator.this::reconcile);
        }

        @Override
        public void groupChanged(ReplicaGroupView before, ReplicaGroupView after) {
            submit(Replicator.this::reconcile);
        }
    }

    /** Membership removed {@code node}: it leaves every group served here, its stream stops. */
    private void removed(int node, String reason) {
        if (node == self) {
            return; // this node's own removal: it is shut down by its owner; until then it serves what copies allow
        }
        boolean graceful = departing.remove(node);
        List<String> left = new ArrayList<>();
        for (ReplicaGroup g : primaries.values()) {
            if (g.removeCopy(node)) {
                left.add(GroupId.toString(g.group()));
                if (!graceful) {
                    lostCopy.add(g.group());
                }
            }
        }
        if (!left.isEmpty() && graceful) {
            LOG.info("replication: node {} left segment {} (it left gracefully: {})", node, String.join(", ", left),
                    reason);
        } else if (!left.isEmpty()) {
            LOG.warn("replication: node {} left segment {} (removed from membership: {})", node, String.join(", ", left),
                    reason);
        }
        CopyStream s = streams.remove(node);
        if (s != null) {
            s.close();
        }
        reconcile();
    }

    /** Brings every group toward its goal: promotions to run, copies to place, stale copies to drop. */
    private void reconcile() {
        if (closed) {
            return;
        }
        for (ReplicaGroupView v : directory.groups()) {
            if (v.state() == ReplicaGroupView.State.PROMOTING) {
                promoteIfCoordinator(v);
            }
        }
        for (CopyReplica c : copies.values()) {
            ReplicaGroupView v = directory.group(GroupId.node(c.group()), GroupId.index(c.group())).orElse(null);
            if (v != null && v.state() == ReplicaGroupView.State.SERVING && v.primary() != self
                    && v.epoch() > c.epoch() && !contains(v.inSync(), self)) {
                LOG.info("replication: dropping the copy of segment {} at epoch {}: the group moved to epoch {} without"
                        + " it", GroupId.toString(c.group()), Ballot.toString(c.epoch()), Ballot.toString(v.epoch()));
                dropCopy(c);
            }
        }
        if (!config.enabled()) {
            return;
        }
        Set<Integer> memoryNodes = directory.memoryNodes();
        List<ReplicaGroup> newlyShort = new ArrayList<>();
        int liveMemoryNodes = 1;
        for (ReplicaGroup g : primaries.values()) {
            if (!g.serving()) {
                warnedShort.remove(g.group());
                continue;
            }
            int[] holders = g.holders();
            if (holders.length >= config.backups()) {
                warnedShort.remove(g.group());
                lostCopy.remove(g.group());
                continue;
            }
            int[] exclude = Arrays.copyOf(holders, holders.length + 1);
            exclude[holders.length] = self;
            List<Integer> live = new ArrayList<>();
            for (int n : memoryNodes) {
                if (directory.member(n).isPresent() && !transport.isFenced(n) && !departing.contains(n)) {
                    live.add(n);
                }
            }
            liveMemoryNodes = Math.max(1, live.size() + (live.contains(self) ? 0 : 1));
            int target = GroupPlacement.target(g.group(), live, exclude);
            if (target == 0) {
                if (warnedShort.add(g.group())) {
                    newlyShort.add(g);
                }
                continue;
            }
            startRereplication(g, target);
        }
        sayShort(newlyShort, liveMemoryNodes);
    }

    /**
     * One line per node for the groups that cannot get their copies (docs/cluster.md, "What
     * a node logs"): WARN when a group lost a copy to a crash (a real loss of redundancy),
     * INFO when the cluster simply has fewer memory nodes than copies (it started that way,
     * or a node left gracefully: the operator's choice). Said again only after every group
     * had its copies in between, or for a new loss.
     */
    private void sayShort(List<ReplicaGroup> newlyShort, int liveMemoryNodes) {
        if (newlyShort.isEmpty()) {
            if (warnedShort.isEmpty()) {
                shortSaid = false;
            }
            return;
        }
        boolean loss = false;
        int have = Integer.MAX_VALUE;
        List<String> names = new ArrayList<>();
        for (ReplicaGroup g : newlyShort) {
            loss |= lostCopy.contains(g.group());
            have = Math.min(have, g.inSync().length);
            names.add(GroupId.toString(g.group()));
        }
        if (shortSaid && !loss) {
            LOG.debug("replication: segment {} has {} of {} backups too", String.join(", ", names), have,
                    config.backups());
            return;
        }
        shortSaid = true;
        String text = "replication: node {} runs segment {} with {} of {} backups (memory nodes: {};"
                + " membus.replication.backups = {}); {} get copies when memory nodes join";
        Object[] args = {self, String.join(", ", names), have, config.backups(), liveMemoryNodes, config.backups(),
                names.size() == 1 ? "it will" : "they will"};
        if (loss) {
            LOG.warn(text, args);
        } else {
            LOG.info(text, args);
        }
    }

    // ---------------------------------------------------------------- re-replication

    private void startRereplication(ReplicaGroup g, int target) {
        if (!rereplicating.add(g.group())) {
            return;
        }
        LOG.info("replication: copying segment {} to node {} (epoch {}, at sequence {})", GroupId.toString(g.group()),
                target, Ballot.toString(g.epoch()), g.lastSeq());
        try {
            g.startJoin(target, stream(target));
        } catch (DsmException e) {
            rereplicating.remove(g.group());
            return;
        }
        submit(() -> copyChunks(g, target));
    }

    /** Copies a few chunks, then yields the thread; paced by the copy's stream window. */
    private void copyChunks(ReplicaGroup g, int target) {
        try {
            if (closed || !g.serving() || primaries.get(g.group()) != g) {
                rereplicating.remove(g.group());
                return;
            }
            for (int i = 0; i < CHUNKS_PER_STEP; i++) {
                if (g.windowFull(target)) {
                    later(() -> copyChunks(g, target), PACE_NANOS);
                    return;
                }
                if (!g.copyChunk(target)) {
                    rereplicating.remove(g.group()); // DONE sent (or the copy is gone): in sync on its ack
                    submit(this::reconcile);
                    return;
                }
            }
            submit(() -> copyChunks(g, target));
        } catch (DsmException e) {
            rereplicating.remove(g.group());
        }
    }

    // ---------------------------------------------------------------- promotion

    private void promoteIfCoordinator(ReplicaGroupView v) {
        int[] inSync = v.inSync();
        if (leaving || inSync.length == 0 || inSync[0] != self) {
            return; // a leaving node takes nothing over: it hands its groups to the others
        }
        CopyReplica c = copies.get(v.group());
        if (c == null || !c.inSync()) {
            LOG.debug("replication: node {} coordinates segment {} but holds no in-sync copy of it: {}", self,
                    GroupId.toString(v.group()), c);
            return;
        }
        if (reachable(c.primary())) {
            // the node this copy follows is a live member: its claim is not visible here yet (the directory lags),
            // it was not removed; a promotion starts only from a removal
            return;
        }
        if (!seenMembers.contains(c.primary())) {
            // never seen as a member: a starting primary whose entry is not published yet, not a departed one
            LOG.debug("replication: node {} does not promote segment {}: its primary node {} was never seen as a member",
                    self, GroupId.toString(v.group()), c.primary());
            return;
        }
        promote(v.group(), v.epoch(), inSync, c, false);
    }

    /**
     * Makes this node's in-sync copy {@code c} the group's primary at a higher ballot: fences
     * itself and the other live in-sync copies, keeps those at its applied sequence, serves,
     * publishes. {@code handOver}: its primary asked for it while leaving gracefully (it
     * serves nothing any more and every change it sequenced is on this copy, §17.9); else its
     * primary was removed from membership.
     */
    private void promote(int group, long viewEpoch, int[] inSync, CopyReplica c, boolean handOver) {
        long ballot = Ballot.next(Math.max(viewEpoch, c.epoch()), self);
        long was = c.epoch();
        int former = c.primary();
        byte own = c.fence(ballot, self);
        if (own != ReplicationCodec.OK) {
            LOG.warn("replication: node {} cannot promote segment {}: its own copy refused ballot {} ({})", self,
                    GroupId.toString(group), Ballot.toString(ballot), c);
            return;
        }
        long applied = c.applied();
        List<Integer> keep = new ArrayList<>();
        List<Integer> drop = new ArrayList<>();
        for (int node : inSync) {
            if (node == self) {
                continue;
            }
            byte[] state = fence(node, group, ballot);
            if (state == null) {
                continue; // removed from membership meanwhile: left out
            }
            ReplicationCodec.Reader r = new ReplicationCodec.Reader(state, 1, "node " + node);
            byte status = (byte) r.u8();
            long epoch = r.i64();
            long theirs = r.i64();
            if (status == ReplicationCodec.STALE) {
                LOG.warn("replication: promotion of segment {} stops: node {} is at epoch {}, above {}",
                        GroupId.toString(group), node, Ballot.toString(epoch), Ballot.toString(ballot));
                return;
            }
            if (status == ReplicationCodec.OK && theirs == applied) {
                keep.add(node);
            } else {
                drop.add(node);
            }
        }
        Hosted h = transport.table().hosted(group);
        if (h == null || h.copy() != c) {
            LOG.warn("replication: node {} stops the promotion of segment {}: its copy was replaced meanwhile ({})",
                    self, GroupId.toString(group), h);
            return;
        }
        ReplicaGroup g = new ReplicaGroup(group, self, c.memory(), ballot, applied, partBytes, config.chunkBytes(),
                timeout, this::inSyncChanged);
        for (int node : keep) {
            g.addInSync(node, stream(node));
        }
        copies.remove(group, c);
        primaries.put(group, g);
        Hosted promoted = new Hosted(group, c.memory());
        promoted.primary(g);
        transport.table().host(promoted);
        claims.put(group, primaryClaim(g));
        for (int node : drop) {
            CopyStream s = stream(node);
            s.append(ReplicationCodec.drop(group, ballot));
            s.flush();
        }
        try {
            publishNow();
        } catch (DsmClosedException e) {
            LOG.debug("replication: promotion of segment {} not published: node {} is closing", GroupId.toString(
                    group), self);
        } catch (DsmException e) {
            // Serving before the claim is visible is safe (the copies are fenced at this ballot, docs/replication.md
            // §5.2 step 5); stopping here while the claim stays in `claims` would let a later publication name this
            // node the primary of a group it refuses. So it keeps serving and publishes again until it is visible
            // (or this node is downed: then every node fences it and its copies decide).
            LOG.warn("replication: promotion of segment {} not yet published ({}); serving it, publishing again",
                    GroupId.toString(group), e.getMessage());
            schedulePublish();
        }
        if (handOver) {
            LOG.info("replication: node {} took segment {} over from node {}, which leaves (epoch {} -> {}); applied"
                            + " sequence {}; in-sync copies: {}{}", self, GroupId.toString(group), former,
                    Ballot.toString(was), Ballot.toString(ballot), applied, keep,
                    drop.isEmpty() ? "" : "; dropped (to rebuild): " + drop);
        } else {
            lostCopy.add(group); // its primary's memory went with a crash: a shortage now is a real one
            LOG.warn("replication: promoted segment {} (epoch {} -> {}): node {} left; applied sequence {}; in-sync"
                            + " copies: {}{}", GroupId.toString(group), Ballot.toString(was), Ballot.toString(ballot),
                    former, applied, keep, drop.isEmpty() ? "" : "; dropped (to rebuild): " + drop);
        }
        submit(this::reconcile);
    }

    /** FENCE to {@code node} until it answers or leaves membership (then null); bounded by the operation timeout per try. */
    private byte[] fence(int node, int group, long ballot) {
        long deadline = System.nanoTime() + timeout.toNanos() * 4;
        while (!closed) {
            if (!reachable(node)) {
                return null;
            }
            try {
                return RemoteMemory.await(memory.onNode(node, conn -> conn.request(CHANNEL,
                        ReplicationCodec.fence(group, ballot))), timeout.plusSeconds(1));
            } catch (DsmException e) {
                if (System.nanoTime() - deadline > 0) {
                    throw new DsmTimeoutException("fence of segment " + GroupId.toString(group) + " on node " + node,
                            node, timeout, "the copy does not answer and is still a member; the promotion retries"
                            + " on the next membership change");
                }
                LOG.warn("replication: fence of segment {} on node {} failed ({}); asking again",
                        GroupId.toString(group), node, e.getMessage());
                try {
                    Thread.sleep(100);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    return null;
                }
            }
        }
        return null;
    }

    // ---------------------------------------------------------------- claims

    private GroupClaim primaryClaim(ReplicaGroup g) {
        Segment m = g.memory();
        return new GroupClaim(g.group(), g.epoch(), GroupClaim.Role.PRIMARY, m.size(), m.flags(), m.remoteKey(),
                g.inSync(), System.currentTimeMillis());
    }

    private GroupClaim copyClaim(CopyReplica c) {
        Segment m = c.memory();
        return new GroupClaim(c.group(), c.epoch(), c.inSync() ? GroupClaim.Role.COPY : GroupClaim.Role.JOINING,
                m.size(), m.flags(), m.remoteKey(), new int[0], System.currentTimeMillis());
    }

    private void inSyncChanged(ReplicaGroup g) {
        if (primaries.get(g.group()) == g && g.serving()) {
            claims.put(g.group(), primaryClaim(g));
            LOG.info("replication: segment {} in-sync copies now {}", GroupId.toString(g.group()),
                    Arrays.toString(g.inSync()));
            schedulePublish();
        }
    }

    private void schedulePublish() {
        service.schedulePublish();
    }

    private void publishNow() {
        service.publishNow();
    }

    // ---------------------------------------------------------------- streams (primary side)

    private CopyStream stream(int node) {
        return streams.computeIfAbsent(node, n -> new CopyStream(n, carrier, config, timeout));
    }

    private boolean reachable(int node) {
        return !closed && directory.member(node).isPresent() && !transport.isFenced(node);
    }

    private final CopyStream.Carrier carrier = new CopyStream.Carrier() {
        @Override
        public CompletableFuture<byte[]> send(int node, byte[] payload) {
            return memory.onNode(node, c -> c.request(CHANNEL, payload));
        }

        @Override
        public byte[] sendNow(int node, byte[] payload) {
            if (closed || transport.isClosed()) {
                return null;
            }
            io.membus.core.transport.PeerInfo peer = directory.member(node).orElse(null);
            if (peer == null) {
                return null;
            }
            CompletableFuture<io.membus.core.transport.Connection> c = transport.connect(peer);
            if (!c.isDone() || c.isCompletedExceptionally()) {
                return null; // not open yet: the posted path waits for it
            }
            return c.join().requestDirect(CHANNEL, payload);
        }

        @Override
        public void acknowledged(int copyNode, int group, byte status, long epoch, long applied, boolean inSync) {
            ReplicaGroup g = primaries.get(group);
            if (g == null) {
                return;
            }
            if (departing.contains(copyNode) && status != ReplicationCodec.OK) {
                // a node leaving gracefully dropped its copies after it told this one (LEAVING): records that were
                // still in flight to it are refused, which is no fault
                LOG.debug("replication: node {} (leaving) refused a record of segment {}", copyNode,
                        GroupId.toString(group));
                return;
            }
            switch (status) {
                case ReplicationCodec.OK -> g.acknowledged(copyNode, applied, inSync);
                case ReplicationCodec.STALE -> {
                    if (g.serving() && epoch > g.epoch()) {
                        LOG.error("replication: node {} no longer serves segment {}: copy node {} is at epoch {} (was {})",
                                self, GroupId.toString(group), copyNode, Ballot.toString(epoch),
                                Ballot.toString(g.epoch()));
                        g.stop(epoch, "copy node " + copyNode + " is at epoch " + Ballot.toString(epoch) + " (was "
                                + Ballot.toString(g.epoch()) + "): a promotion replaced this primary");
                        claims.remove(group, claims.get(group));
                        schedulePublish();
                    }
                }
                default -> LOG.error("replication: copy node {} refused a record of segment {} ({}); epoch {}, applied {}",
                        copyNode, GroupId.toString(group), status == ReplicationCodec.GAP ? "gap" : "not held",
                        Ballot.toString(epoch), applied);
            }
        }

        @Override
        public boolean reachable(int node) {
            return Replicator.this.reachable(node);
        }

        @Override
        public int maxMessageSize() {
            return transport.messages().maxMessageSize();
        }

        @Override
        public FaultInjector faults() {
            return transport.faults();
        }
    };

    // ---------------------------------------------------------------- the copy side (message handler)

    private byte[] onMessage(int from, byte[] payload) {
        if (payload.length == 0) {
            throw new io.membus.core.error.ProtocolException("node " + from, "empty replication message");
        }
        return switch (payload[0]) {
            case ReplicationCodec.STREAM -> stream(from, payload);
            case ReplicationCodec.FENCE -> fenced(from, payload);
            case ReplicationCodec.LEAVING -> departs(from);
            case ReplicationCodec.HANDOVER -> handOverAsked(from, payload);
            default -> throw new io.membus.core.error.ProtocolException("node " + from,
                    "unknown replication message type " + payload[0]);
        };
    }

    private byte[] fenced(int from, byte[] payload) {
        ReplicationCodec.Reader r = new ReplicationCodec.Reader(payload, 1, "node " + from);
        int group = r.i32();
        long ballot = r.i64();
        CopyReplica c = copies.get(group);
        if (c == null) {
            ReplicaGroup g = primaries.get(group);
            return ReplicationCodec.state(g != null && g.epoch() > ballot ? ReplicationCodec.STALE
                    : ReplicationCodec.NOT_HELD, g != null ? g.epoch() : 0, g != null ? g.lastSeq() : 0);
        }
        byte status = c.fence(ballot, from);
        if (status == ReplicationCodec.OK) {
            claims.put(group, copyClaim(c));
            schedulePublish();
        }
        return ReplicationCodec.state(status, c.epoch(), c.applied());
    }

    private byte[] stream(int from, byte[] payload) {
        Inbound in = inbound.computeIfAbsent(from, n -> new Inbound());
        synchronized (in) {
            ReplicationCodec.Reader r = new ReplicationCodec.Reader(payload, 1, "node " + from);
            long streamId = r.i64();
            long first = r.i64();
            int count = r.i32();
            if (in.streamId != streamId) {
                in.streamId = streamId; // a new stream of that primary (a new service, or a promotion)
                in.applied = 0;
            }
            if (first > in.applied + 1) {
                return ack(streamId, in.applied, true, Map.of());
            }
            Map<Integer, long[]> results = new LinkedHashMap<>();
            FaultInjector.StreamRule rule = transport.faults().streamRule(from);
            for (int i = 0; i < count; i++) {
                long no = first + i;
                int kind = r.u8();
                int group = r.i32();
                long epoch = r.i64();
                boolean fresh = no > in.applied;
                byte status;
                switch (kind) {
                    case ReplicationCodec.EFFECT -> {
                        long seq = r.i64();
                        long offset = r.i64();
                        int length = r.i32();
                        boolean last = r.u8() != 0;
                        int at = r.skip(length);
                        status = fresh ? effect(group, epoch, seq, offset, r.array(), at, length, last,
                                rule != null && rule.skips(seq)) : ReplicationCodec.OK;
                    }
                    case ReplicationCodec.CHUNK -> {
                        long seq = r.i64();
                        long offset = r.i64();
                        int length = r.i32();
                        r.u8();
                        int at = r.skip(length);
                        status = fresh ? chunk(group, epoch, seq, offset, r.array(), at, length) : ReplicationCodec.OK;
                    }
                    case ReplicationCodec.JOIN -> {
                        long startSeq = r.i64();
                        long size = r.i64();
                        int flags = r.i32();
                        long key = r.i64();
                        status = fresh ? join(from, group, epoch, startSeq, size, flags, key) : ReplicationCodec.OK;
                    }
                    case ReplicationCodec.DONE -> {
                        long lastSeq = r.i64();
                        status = fresh ? done(group, epoch, lastSeq) : ReplicationCodec.OK;
                    }
                    case ReplicationCodec.DROP -> status = fresh ? drop(group, epoch) : ReplicationCodec.OK;
                    default -> throw new io.membus.core.error.ProtocolException("node " + from,
                            "unknown replication record kind " + kind);
                }
                if (fresh) {
                    in.applied = no;
                }
                results.put(group, result(group, status));
            }
            return ack(streamId, in.applied, false, results);
        }
    }

    /** (status, epoch, applied, inSync) of {@code group} here after a record. */
    private long[] result(int group, byte status) {
        CopyReplica c = copies.get(group);
        if (c != null) {
            return new long[]{status, c.epoch(), c.applied(), c.inSync() ? 1 : 0};
        }
        ReplicaGroup g = primaries.get(group);
        return new long[]{status, g != null ? g.epoch() : 0, g != null ? g.lastSeq() : 0, 0};
    }

    private static byte[] ack(long streamId, long applied, boolean gap, Map<Integer, long[]> results) {
        ReplicationCodec.Writer w = new ReplicationCodec.Writer(1 + 8 + 8 + 1 + 4 + results.size() * (4 + 1 + 8 + 8 + 1));
        w.u8(ReplicationCodec.ACK).i64(streamId).i64(applied).u8(gap ? 1 : 0).i32(results.size());
        results.forEach((group, v) -> w.i32(group).u8((int) v[0]).i64(v[1]).i64(v[2]).u8((int) v[3]));
        return w.array();
    }

    /** The status of a record for a group this node does not hold as a copy. */
    private byte notACopy(int group, long epoch) {
        ReplicaGroup g = primaries.get(group);
        return g != null && g.epoch() > epoch ? ReplicationCodec.STALE : ReplicationCodec.NOT_HELD;
    }

    private byte effect(int group, long epoch, long seq, long offset, byte[] b, int at, int length, boolean last,
                        boolean skip) {
        CopyReplica c = copies.get(group);
        if (c == null) {
            return notACopy(group, epoch);
        }
        if (skip && last) {
            LOG.warn("replication: planted fault: node {} acknowledges sequence {} of segment {} without applying it",
                    self, seq, GroupId.toString(group));
        }
        return c.effect(epoch, seq, offset, b, at, length, last, skip);
    }

    private byte chunk(int group, long epoch, long seq, long offset, byte[] b, int at, int length) {
        CopyReplica c = copies.get(group);
        return c == null ? notACopy(group, epoch) : c.chunk(epoch, seq, offset, b, at, length);
    }

    private byte join(int from, int group, long epoch, long startSeq, long size, int flags, long key) {
        // a leaving node still accepts a JOIN that was on its way before its LEAVING reached the primary: refused, it
        // made the primary log every chunk of the join as an ERROR (CleanLogTest); the copy is dropped when the
        // primary takes it out of its group, or at close()
        if (closed) {
            return ReplicationCodec.NOT_HELD;
        }
        ReplicaGroup g = primaries.get(group);
        if (g != null && g.serving()) {
            return g.epoch() > epoch ? ReplicationCodec.STALE : ReplicationCodec.NOT_HELD;
        }
        CopyReplica old = copies.get(group);
        if (old != null && old.epoch() > epoch) {
            return ReplicationCodec.STALE;
        }
        if (old != null) {
            dropCopy(old);
        }
        Segment m = Segment.allocate(GroupId.node(group), 0, GroupId.index(group), size, flags, (address, bytes) -> key);
        CopyReplica c = new CopyReplica(group, m, epoch, startSeq, from);
        Hosted h = new Hosted(group, m);
        h.copy(c);
        copies.put(group, c);
        if (closed) { // close() ran meanwhile and may not have seen this copy: free it here
            dropCopy(c);
            return ReplicationCodec.NOT_HELD;
        }
        transport.table().host(h);
        claims.put(group, copyClaim(c));
        schedulePublish();
        LOG.info("replication: node {} receives a copy of segment {} from node {} ({} bytes, epoch {})", self,
                GroupId.toString(group), from, size, Ballot.toString(epoch));
        return ReplicationCodec.OK;
    }

    private byte done(int group, long epoch, long lastSeq) {
        CopyReplica c = copies.get(group);
        if (c == null) {
            return notACopy(group, epoch);
        }
        byte status = c.done(epoch, lastSeq);
        if (status == ReplicationCodec.OK) {
            claims.put(group, copyClaim(c));
            // published before the DONE is acknowledged: once the primary lists this node in sync, the directory
            // knows it as a COPY holder, so a promotion can count on it (a JOINING holder is never promoted)
            try {
                publishNow();
            } catch (DsmException e) {
                LOG.warn("replication: node {} could not publish its copy of segment {}: {}", self,
                        GroupId.toString(group), e.getMessage());
                schedulePublish();
            }
        }
        return status;
    }

    private byte drop(int group, long epoch) {
        CopyReplica c = copies.get(group);
        if (c == null) {
            return ReplicationCodec.OK;
        }
        if (epoch < c.epoch()) {
            return ReplicationCodec.STALE;
        }
        dropCopy(c);
        return ReplicationCodec.OK;
    }

    /** Frees a copy's memory and forgets it (its claim too). */
    private void dropCopy(CopyReplica c) {
        synchronized (c) {
            if (c.dropped()) {
                return;
            }
            c.markDropped();
        }
        copies.remove(c.group(), c);
        Hosted h = transport.table().hosted(c.group());
        if (h != null && h.copy() == c) {
            transport.table().unhost(c.group());
        }
        GroupClaim claim = claims.get(c.group());
        if (claim != null && claim.role() != GroupClaim.Role.PRIMARY) {
            claims.remove(c.group(), claim);
            schedulePublish();
        }
        c.memory().close(false);
    }

    private static boolean contains(int[] nodes, int node) {
        for (int n : nodes) {
            if (n == node) {
                return true;
            }
        }
        return false;
    }
}
