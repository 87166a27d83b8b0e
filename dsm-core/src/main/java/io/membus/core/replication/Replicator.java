package io.membus.core.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.SegmentLostException;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.Transport;
import io.membus.core.SegmentDescriptor;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The replication service of one node (see docs/replication.md, "As built"): it serves
 * the replica groups of this node's exported segments as their primary, holds copies of
 * other nodes' groups, promotes a copy when its primary is removed from membership, and
 * rebuilds copies (re-replication) until every group has {@code backups} of them.
 *
 * <p>This class is the engine's public face and its wiring: it registers the channel
 * handler and the directory listener, makes a group of each exported segment, reports
 * status, and closes. Each job is a class of its own, over the state they share
 * ({@link ReplicatorState}):
 * <ul>
 *   <li><b>Streams</b> ride on the messaging layer: one {@link CopyStream} per copy node,
 *       channel {@link #CHANNEL} ({@code replication}), binary payloads
 *       ({@link ReplicationCodec}); the copy side is {@link CopySide}, run by this class's
 *       channel handler on the node's message executor (or inline on an I/O thread), one
 *       message of a sender at a time.</li>
 *   <li><b>Decisions</b> (placing copies and re-replication, {@link CopyPlacement}; promotion,
 *       {@link Promotion}; publishing this node's {@link GroupClaim}s through the
 *       {@link ClaimPublisher}) run on one thread of this service, {@code membus-repl-<node>}
 *       ({@link ReplicationService}), fed by directory events; every wait there has a
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
 *   <li><b>A graceful leave</b> ({@link #leave}, {@link GracefulLeave}) hands this node's copies
 *       back and each group it serves over to an in-sync copy (HANDOVER) before the node leaves
 *       membership (docs/replication.md §17.9).</li>
 * </ul>
 *
 * <p><b>Note:</b> thread-safe. Public methods may be called from any thread; state shared
 * with the message handler is in concurrent maps and in the groups and copies themselves
 * (each documents its own locking); closed is the service's volatile flag, set first by
 * {@link #close()}.
 */
public final class Replicator implements AutoCloseable {
    /** The messaging channel of replication streams and fences. */
    public static final short CHANNEL = (short) 0x0C21;
    /** Its name, in channel counters and errors. */
    public static final String CHANNEL_NAME = "replication";

    private final ReplicatorState state;
    private final Transport transport;
    private final SegmentDirectory directory;
    private final ReplicationConfig config;
    private final int self;
    private final ReplicationService service;
    private final Map<Integer, ReplicaGroup> primaries;
    private final Map<Integer, CopyReplica> copies;
    private final Map<Integer, GroupClaim> claims;
    private final CopySide copySide;
    private final Promotion promotion;
    private final CopyPlacement placement;
    private final GracefulLeave leave;
    private final DirectoryListener listener = new Listener();

    public Replicator(Transport transport, RemoteMemory memory, SegmentDirectory directory, ClaimPublisher publisher,
                      ReplicationConfig config) {
        if (config.enabled() && transport.capabilities().replication() != ReplicationSupport.FORWARDING) {
            throw new io.membus.core.error.DsmConfigException("membus.replication.backups",
                    String.valueOf(config.backups()), "0 on transport " + transport.name() + " (it keeps copies by "
                    + transport.capabilities().replication() + ", not by forwarding changes; see docs/replication.md)");
        }
        this.state = new ReplicatorState(transport, memory, directory, publisher, config);
        this.transport = transport;
        this.directory = directory;
        this.config = config;
        this.self = state.self;
        this.service = state.service;
        this.primaries = state.primaries;
        this.copies = state.copies;
        this.claims = state.claims;
        this.copySide = new CopySide(state);
        this.promotion = new Promotion(state, this::reconcile);
        this.placement = new CopyPlacement(state, promotion);
        this.leave = new GracefulLeave(state, this::reconcile);
    }

    /** Times a chunk of a re-replication from this node waited for {@code rereplication-rate} (for tests). */
    long rereplicationPacedWaits() {
        return placement.pacedWaits();
    }

    /** Runs {@link CopyPlacement#reconcile} (on the service thread: the tasks the jobs submit). */
    private void reconcile() {
        placement.reconcile();
    }

    /** Registers the channel handler and the directory listener. */
    public void start() {
        service.checkOpen();
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
            state.seenMembers.add(m.nodeId());
        }
        state.markStarted();
        service.submit(this::reconcile);
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
        service.checkOpen();
        if (own.nodeId() != self) {
            throw new IllegalArgumentException("not a segment of this node: " + own + ", node " + self);
        }
        if (!config.enabled()) {
            return; // backups = 0: no group, no lock, no stream; the segment is served as without replication
        }
        int group = GroupId.of(self, own.index());
        ReplicaGroup g = new ReplicaGroup(group, self, own, Ballot.initial(self), 0, state.partBytes,
                config.chunkBytes(), state.timeout, state::inSyncChanged);
        Hosted h = new Hosted(group, own);
        h.primary(g);
        primaries.put(group, g);
        transport.table().host(h);
        claims.put(group, state.primaryClaim(g));
        service.schedulePublish();
        service.submit(this::reconcile);
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
            CopyStream s = state.streams.get(node);
            if (s != null) {
                s.append(ReplicationCodec.drop(group, g.epoch()));
                s.flush();
            }
        }
        g.stop(Ballot.NONE, "segment " + GroupId.toString(group) + " was unexported");
        // the stopped group stays in the table until the segment goes (a verb in between fails, never runs
        // unreplicated); a new export at this index replaces the entry
        claims.remove(group);
        service.schedulePublish();
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
        leave.leave(budget);
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
        state.streams.values().forEach(s -> b.append("\n  ").append(s.describe()));
        copySide.describe(b);
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
        if (service.closed()) {
            return;
        }
        service.markClosed(); // closed from here: every job stops deciding
        if (state.started()) {
            directory.removeListener(listener);
            transport.messages().unregister(CHANNEL);
        }
        service.close();
        state.streams.values().forEach(CopyStream::close);
        for (ReplicaGroup g : primaries.values()) {
            // stopped, and left in the table: while the transport still serves, a verb on the segment fails (not
            // primary) instead of changing it unreplicated; the transport's close removes the segment
            g.stop(Ballot.NONE, "node " + self + " closed its replication");
        }
        for (CopyReplica c : copies.values()) {
            state.dropCopy(c);
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

    private final class Listener implements DirectoryListener {
        @Override
        public void memberUp(PeerInfo member) {
            state.seenMembers.add(member.nodeId());
            service.submit(Replicator.this::reconcile);
        }

        @Override
        public void memberRemoved(PeerInfo member, String reason) {
            int node = member.nodeId();
            service.submit(() -> placement.removed(node, reason));
        }

        @Override
        public void segmentAdded(SegmentDescriptor segment) {
            service.submit(Replicator.this::reconcile);
        }

        @Override
        public void groupChanged(ReplicaGroupView before, ReplicaGroupView after) {
            service.submit(Replicator.this::reconcile);
        }
    }

    // ---------------------------------------------------------------- the channel handler

    private byte[] onMessage(int from, byte[] payload) {
        if (payload.length == 0) {
            throw new io.membus.core.error.ProtocolException("node " + from, "empty replication message");
        }
        return switch (payload[0]) {
            case ReplicationCodec.STREAM -> copySide.stream(from, payload);
            case ReplicationCodec.FENCE -> copySide.fenced(from, payload);
            case ReplicationCodec.LEAVING -> leave.departs(from);
            case ReplicationCodec.HANDOVER -> promotion.handOverAsked(from, payload);
            default -> throw new io.membus.core.error.ProtocolException("node " + from,
                    "unknown replication message type " + payload[0]);
        };
    }
}
