package io.membus.core.replication;

import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.error.DsmException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Where copies go (docs/replication.md §6, §17.5): the reconciliation that brings every group
 * toward its goal after a directory event ({@link #reconcile}: promotions to run, stale
 * copies to drop, copies to place), a member's removal ({@link #removed}), re-replication
 * (a new copy's JOIN, its chunks paced by the stream's window, its DONE) and the one line per
 * node that says groups are short of copies.
 *
 * <p><b>Note:</b> runs on the service thread only ({@code membus-repl-<node>}), one task at a
 * time; its sets are concurrent and {@link #shortSaid} volatile, so that a read from another
 * thread (a diagnostic) sees them whole. What it shares with the other jobs is
 * {@link ReplicatorState}'s.
 */
final class CopyPlacement extends ReplicatorJob {
    /** The engine's lines keep one logger name, {@code Replicator}, whichever of its jobs says them. */
    private static final Logger LOG = LoggerFactory.getLogger(Replicator.class);
    /** Chunks one re-replication step copies before it lets other work of the service run. */
    private static final int CHUNKS_PER_STEP = 8;
    private static final long PACE_NANOS = 2_000_000L;
    private final Promotion promotion;
    private final Set<Integer> rereplicating = ConcurrentHashMap.newKeySet();
    private final Set<Integer> warnedShort = ConcurrentHashMap.newKeySet();
    /** Times a chunk waited for {@code rereplication-rate} (written by the service thread, read by tests). */
    private final java.util.concurrent.atomic.LongAdder pacedWaits = new java.util.concurrent.atomic.LongAdder();
    /** Whether this node said it is short of copies (one line per node, not per group; reset once none is short). */
    private volatile boolean shortSaid;

    CopyPlacement(ReplicatorState state, Promotion promotion) {
        super(state);
        this.promotion = promotion;
    }

    /** Times a chunk of a re-replication waited for {@code rereplication-rate} on this node (for tests). */
    long pacedWaits() {
        return pacedWaits.sum();
    }

    /** Membership removed {@code node}: it leaves every group served here, its stream stops. */
    void removed(int node, String reason) {
        if (node == state.self) {
            return; // this node's own removal: it is shut down by its owner; until then it serves what copies allow
        }
        boolean graceful = state.departing.remove(node);
        List<String> left = new ArrayList<>();
        for (ReplicaGroup g : state.primaries.values()) {
            if (g.removeCopy(node)) {
                left.add(GroupId.toString(g.group()));
                if (!graceful) {
                    state.lostCopy.add(g.group());
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
        CopyStream s = state.streams.remove(node);
        if (s != null) {
            s.close();
        }
        reconcile();
    }

    /** Brings every group toward its goal: promotions to run, copies to place, stale copies to drop. */
    void reconcile() {
        if (state.service.closed()) {
            return;
        }
        for (ReplicaGroupView v : state.directory.groups()) {
            if (v.state() == ReplicaGroupView.State.PROMOTING) {
                promotion.promoteIfCoordinator(v);
            }
        }
        for (CopyReplica c : state.copies.values()) {
            ReplicaGroupView v = state.directory.group(GroupId.node(c.group()), GroupId.index(c.group())).orElse(null);
            if (v != null && v.state() == ReplicaGroupView.State.SERVING && v.primary() != state.self
                    && v.epoch() > c.epoch() && !ReplicatorState.contains(v.inSync(), state.self)) {
                LOG.info("replication: dropping the copy of segment {} at epoch {}: the group moved to epoch {} without"
                        + " it", GroupId.toString(c.group()), Ballot.toString(c.epoch()), Ballot.toString(v.epoch()));
                state.dropCopy(c);
            }
        }
        if (!state.config.enabled()) {
            return;
        }
        Set<Integer> memoryNodes = state.directory.memoryNodes();
        List<ReplicaGroup> newlyShort = new ArrayList<>();
        int liveMemoryNodes = 1;
        for (ReplicaGroup g : state.primaries.values()) {
            if (!g.serving()) {
                warnedShort.remove(g.group());
                continue;
            }
            int[] holders = g.holders();
            if (holders.length >= state.config.backups()) {
                warnedShort.remove(g.group());
                state.lostCopy.remove(g.group());
                continue;
            }
            int[] exclude = Arrays.copyOf(holders, holders.length + 1);
            exclude[holders.length] = state.self;
            List<Integer> live = new ArrayList<>();
            for (int n : memoryNodes) {
                if (state.directory.member(n).isPresent() && !state.transport.isFenced(n) && !state.departing.contains(n)) {
                    live.add(n);
                }
            }
            liveMemoryNodes = Math.max(1, live.size() + (live.contains(state.self) ? 0 : 1));
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
            loss |= state.lostCopy.contains(g.group());
            have = Math.min(have, g.inSync().length);
            names.add(GroupId.toString(g.group()));
        }
        if (shortSaid && !loss) {
            LOG.debug("replication: segment {} has {} of {} backups too", String.join(", ", names), have,
                    state.config.backups());
            return;
        }
        shortSaid = true;
        String text = "replication: node {} runs segment {} with {} of {} backups (memory nodes: {};"
                + " membus.replication.backups = {}); {} get copies when memory nodes join";
        Object[] args = {state.self, String.join(", ", names), have, state.config.backups(), liveMemoryNodes,
                state.config.backups(), names.size() == 1 ? "it will" : "they will"};
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
            g.startJoin(target, state.stream(target));
        } catch (DsmException e) {
            rereplicating.remove(g.group());
            return;
        }
        CopyPacer pacer = new CopyPacer(state.config.rereplicationRate(), state.config.chunkBytes(), System::nanoTime);
        state.service.submit(() -> copyChunks(g, target, pacer));
    }

    /**
     * Copies a few chunks, then yields the thread; paced by the copy's stream window and by
     * {@code membus.replication.rereplication-rate} ({@code pacer}: a chunk the rate does not
     * allow yet waits on the shared timer, never on a thread).
     */
    private void copyChunks(ReplicaGroup g, int target, CopyPacer pacer) {
        try {
            if (state.service.closed() || !g.serving() || state.primaries.get(g.group()) != g) {
                rereplicating.remove(g.group());
                return;
            }
            for (int i = 0; i < CHUNKS_PER_STEP; i++) {
                if (g.windowFull(target)) {
                    state.service.later(() -> copyChunks(g, target, pacer), PACE_NANOS);
                    return;
                }
                long wait = pacer.reserve();
                if (wait > 0) {
                    pacedWaits.increment();
                    state.service.later(() -> copyChunks(g, target, pacer), wait);
                    return;
                }
                if (!g.copyChunk(target)) {
                    rereplicating.remove(g.group()); // DONE sent (or the copy is gone): in sync on its ack
                    state.service.submit(this::reconcile);
                    return;
                }
            }
            state.service.submit(() -> copyChunks(g, target, pacer));
        } catch (DsmException e) {
            rereplicating.remove(g.group());
        }
    }
}
