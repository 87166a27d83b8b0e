package io.membus.core.replication;

import io.membus.core.Backoff;
import io.membus.core.RemoteMemory;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;

/**
 * Promotion (docs/replication.md §5, §17.4): this node's in-sync copy becomes its group's
 * primary at a higher ballot, when the group's primary was removed from membership and this
 * node coordinates ({@link #promoteIfCoordinator}, from the reconciliation) or when a
 * leaving primary asks it to take the group over ({@link #handOverAsked}, HANDOVER, §17.9).
 * It fences itself and the other live in-sync copies, keeps those at its applied sequence,
 * drops the others, serves, publishes its claim.
 *
 * <p><b>Note:</b> thread-safe. Promotions run on the service thread (one at a time);
 * {@link #handOverAsked} runs on a message thread and only checks and submits. The copy's
 * fence is under the copy's monitor; the promoted group is put in the table before its
 * claim is published, and its memory is the copy's (no byte copied).
 */
final class Promotion extends ReplicatorJob {
    /** The engine's lines keep one logger name, {@code Replicator}, whichever of its jobs says them. */
    private static final Logger LOG = LoggerFactory.getLogger(Replicator.class);
    /** A fence a copy did not answer is asked again every 100 ms, by the promotion's deadline. */
    private static final Backoff.Policy FENCE_RETRY = Backoff.Policy.every(100_000_000L);
    /** The engine's reconciliation ({@link CopyPlacement#reconcile}), the task this job submits after a change. */
    private final Runnable reconcile;

    Promotion(ReplicatorState state, Runnable reconcile) {
        super(state);
        this.reconcile = reconcile;
    }

    /** A leaving primary asks this node's in-sync copy to take its group over (HANDOVER). */
    byte[] handOverAsked(int from, byte[] payload) {
        ReplicationCodec.Reader r = new ReplicationCodec.Reader(payload, 1, "node " + from);
        int group = r.i32();
        long epoch = r.i64();
        long lastSeq = r.i64();
        int[] inSync = new int[r.i32()];
        for (int i = 0; i < inSync.length; i++) {
            inSync[i] = r.i32();
        }
        CopyReplica c = state.copies.get(group);
        if (state.service.closed() || state.leaving() || c == null || !c.inSync() || c.epoch() != epoch
                || c.primary() != from || c.applied() != lastSeq) {
            LOG.info("replication: node {} does not take segment {} over from node {}: {}", state.self,
                    GroupId.toString(group), from, state.service.closed() || state.leaving() ? "it is closing itself"
                            : "its copy is " + c + ", asked for epoch " + Ballot.toString(epoch) + " at sequence " + lastSeq);
            return ReplicationCodec.state(ReplicationCodec.NOT_HELD, c != null ? c.epoch() : 0,
                    c != null ? c.applied() : 0);
        }
        state.service.submit(() -> {
            if (!state.service.closed() && state.copies.get(group) == c) {
                promote(group, epoch, inSync, c, true);
            }
        });
        return ReplicationCodec.state(ReplicationCodec.OK, c.epoch(), c.applied());
    }


    void promoteIfCoordinator(ReplicaGroupView v) {
        int[] inSync = v.inSync();
        if (state.leaving() || inSync.length == 0 || inSync[0] != state.self) {
            return; // a leaving node takes nothing over: it hands its groups to the others
        }
        CopyReplica c = state.copies.get(v.group());
        if (c == null || !c.inSync()) {
            LOG.debug("replication: node {} coordinates segment {} but holds no in-sync copy of it: {}", state.self,
                    GroupId.toString(v.group()), c);
            return;
        }
        if (state.reachable(c.primary())) {
            // the node this copy follows is a live member: its claim is not visible here yet (the directory lags),
            // it was not removed; a promotion starts only from a removal
            return;
        }
        if (!state.seenMembers.contains(c.primary())) {
            // never seen as a member: a starting primary whose entry is not published yet, not a departed one
            LOG.debug("replication: node {} does not promote segment {}: its primary node {} was never seen as a member",
                    state.self, GroupId.toString(v.group()), c.primary());
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
        long ballot = Ballot.next(Math.max(viewEpoch, c.epoch()), state.self);
        long was = c.epoch();
        int former = c.primary();
        byte own = c.fence(ballot, state.self);
        if (own != ReplicationCodec.OK) {
            LOG.warn("replication: node {} cannot promote segment {}: its own copy refused ballot {} ({})", state.self,
                    GroupId.toString(group), Ballot.toString(ballot), c);
            return;
        }
        long applied = c.applied();
        List<Integer> keep = new ArrayList<>();
        List<Integer> drop = new ArrayList<>();
        for (int node : inSync) {
            if (node == state.self) {
                continue;
            }
            byte[] answer = fence(node, group, ballot);
            if (answer == null) {
                continue; // removed from membership meanwhile: left out
            }
            ReplicationCodec.Reader r = new ReplicationCodec.Reader(answer, 1, "node " + node);
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
        Hosted h = state.transport.table().hosted(group);
        if (h == null || h.copy() != c) {
            LOG.warn("replication: node {} stops the promotion of segment {}: its copy was replaced meanwhile ({})",
                    state.self, GroupId.toString(group), h);
            return;
        }
        ReplicaGroup g = new ReplicaGroup(group, state.self, c.memory(), ballot, applied, state.partBytes,
                state.config.chunkBytes(), state.timeout, state::inSyncChanged);
        for (int node : keep) {
            g.addInSync(node, state.stream(node));
        }
        state.copies.remove(group, c);
        state.primaries.put(group, g);
        Hosted promoted = new Hosted(group, c.memory());
        promoted.primary(g);
        state.transport.table().host(promoted);
        state.claims.put(group, state.primaryClaim(g));
        for (int node : drop) {
            CopyStream s = state.stream(node);
            s.append(ReplicationCodec.drop(group, ballot));
            s.flush();
        }
        try {
            state.publishNow();
        } catch (DsmClosedException e) {
            LOG.debug("replication: promotion of segment {} not published: node {} is closing", GroupId.toString(
                    group), state.self);
        } catch (DsmException e) {
            // Serving before the claim is visible is safe (the copies are fenced at this ballot, docs/replication.md
            // §5.2 step 5); stopping here while the claim stays in `claims` would let a later publication name this
            // node the primary of a group it refuses. So it keeps serving and publishes again until it is visible
            // (or this node is downed: then every node fences it and its copies decide).
            LOG.warn("replication: promotion of segment {} not yet published ({}); serving it, publishing again",
                    GroupId.toString(group), e.getMessage());
            state.schedulePublish();
        }
        if (handOver) {
            LOG.info("replication: node {} took segment {} over from node {}, which leaves (epoch {} -> {}); applied"
                            + " sequence {}; in-sync copies: {}{}", state.self, GroupId.toString(group), former,
                    Ballot.toString(was), Ballot.toString(ballot), applied, keep,
                    drop.isEmpty() ? "" : "; dropped (to rebuild): " + drop);
        } else {
            state.lostCopy.add(group); // its primary's memory went with a crash: a shortage now is a real one
            LOG.warn("replication: promoted segment {} (epoch {} -> {}): node {} left; applied sequence {}; in-sync"
                            + " copies: {}{}", GroupId.toString(group), Ballot.toString(was), Ballot.toString(ballot),
                    former, applied, keep, drop.isEmpty() ? "" : "; dropped (to rebuild): " + drop);
        }
        state.service.submit(reconcile);
    }

    /** FENCE to {@code node} until it answers or leaves membership (then null); bounded by the operation timeout per try. */
    private byte[] fence(int node, int group, long ballot) {
        long deadline = System.nanoTime() + state.timeout.toNanos() * 4;
        Backoff again = new Backoff(FENCE_RETRY, deadline);
        while (!state.service.closed()) {
            if (!state.reachable(node)) {
                return null;
            }
            try {
                return RemoteMemory.await(state.memory.onNode(node, conn -> conn.request(Replicator.CHANNEL,
                        ReplicationCodec.fence(group, ballot))), state.timeout.plusSeconds(1));
            } catch (DsmException e) {
                if (System.nanoTime() - deadline > 0) {
                    throw new DsmTimeoutException("fence of segment " + GroupId.toString(group) + " on node " + node,
                            node, state.timeout, "the copy does not answer and is still a member; the promotion retries"
                            + " on the next membership change");
                }
                LOG.warn("replication: fence of segment {} on node {} failed ({}); asking again",
                        GroupId.toString(group), node, e.getMessage());
                try {
                    again.pauseInterruptibly(); // past the deadline it returns at once: the next failure throws
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    return null;
                }
            }
        }
        return null;
    }
}
