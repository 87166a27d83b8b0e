package io.membus.core.replication;

import io.membus.core.Backoff;
import io.membus.core.RemoteMemory;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.error.DsmException;
import io.membus.core.error.NotPrimaryException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * A graceful leave of one node's forwarding engine (docs/replication.md §17.9), both sides:
 * the leaving node's steps ({@link #leave}: tell the others LEAVING, hand its copies back,
 * hand each group it serves over to an in-sync copy, HANDOVER) and what a staying node does
 * when a peer says it leaves ({@link #departs}: that node's copies leave this node's groups,
 * none is placed on it). The copy's side of a HANDOVER, a promotion, is {@link Promotion}'s.
 *
 * <p><b>Note:</b> thread-safe. {@link #leave} runs on the closing thread, {@link #departs}
 * on a message thread; what they share is {@link ReplicatorState}'s (concurrent maps and
 * sets, volatile flags) and the groups' own locks. The leaving flag is a volatile write
 * before the first LEAVING is sent, so a promotion decided after it sees it.
 */
final class GracefulLeave extends ReplicatorJob {
    /** The engine's lines keep one logger name, {@code Replicator}, whichever of its jobs says them. */
    private static final Logger LOG = LoggerFactory.getLogger(Replicator.class);
    /** Polls of a hand-over's waits, each bounded by the leave's deadline (the periods the sleeps had). */
    private static final Backoff.Policy COPY_CATCHES_UP = Backoff.Policy.every(20_000_000L);
    private static final Backoff.Policy CHANGES_DRAIN = Backoff.Policy.every(2_000_000L);
    private static final Backoff.Policy PROMOTION_PUBLISHED = Backoff.Policy.every(5_000_000L);
    /** The engine's reconciliation ({@link CopyPlacement#reconcile}), the task this job submits after a change. */
    private final Runnable reconcile;

    GracefulLeave(ReplicatorState state, Runnable reconcile) {
        super(state);
        this.reconcile = reconcile;
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
    void leave(Duration budget) {
        if (state.service.closed() || !state.started() || !state.config.enabled() || state.leaving()) {
            return;
        }
        state.startLeaving();
        long deadline = System.nanoTime() + budget.toNanos();
        Set<Integer> told = new java.util.HashSet<>();
        for (int node : state.directory.memoryNodes()) {
            if (node == state.self || !state.reachable(node)) {
                continue;
            }
            try {
                RemoteMemory.await(state.memory.onNode(node, conn -> conn.request(Replicator.CHANNEL,
                        ReplicationCodec.leaving())), left(deadline, state.timeout));
                told.add(node);
            } catch (DsmException e) {
                LOG.info("replication: node {} could not tell node {} it leaves ({}); that node sees its removal",
                        state.self, node, e.getMessage());
            }
        }
        List<String> handedBack = new ArrayList<>();
        for (CopyReplica c : state.copies.values()) {
            if (told.contains(c.primary())) {
                handedBack.add(GroupId.toString(c.group()));
                state.dropCopy(c);
            }
        }
        List<String> handed = new ArrayList<>();
        List<String> kept = new ArrayList<>();
        for (ReplicaGroup g : state.primaries.values()) {
            if (!g.serving()) {
                continue;
            }
            int[] inSync = stayingInSync(g);
            // its joining copy finishes (re-replication runs on the service thread)
            Backoff untilACopyIsInSync = new Backoff(COPY_CATCHES_UP, deadline);
            while (inSync.length == 0 && copyCanCome() && untilACopyIsInSync.pause()) {
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
            state.publishNow();
        } catch (DsmException e) {
            LOG.debug("replication: node {} could not publish its claims on leaving: {}", state.self, e.getMessage());
        }
        boolean others = copyCanCome();
        LOG.info("replication: node {} leaves: {} its copies{}{}{}", state.self, handedBack.isEmpty() ? "held none of"
                        : "handed back", handedBack.isEmpty() ? "" : " of segment " + String.join(", ", handedBack),
                handed.isEmpty() ? "" : "; handed over segment " + String.join(", ", handed),
                kept.isEmpty() ? "" : "; segment " + String.join(", ", kept) + (others ? " had no copy to hand over to"
                        : " go with it (no other memory node stays)"));
        if (!kept.isEmpty() && others) {
            LOG.warn("replication: node {} leaves segment {} without a copy although memory nodes stay: its data"
                    + " goes with it (the hand-over did not finish within {} ms)", state.self, String.join(", ", kept),
                    budget.toMillis());
        }
    }

    /** The in-sync copies of {@code g} on live nodes that are not leaving themselves. */
    private int[] stayingInSync(ReplicaGroup g) {
        return Arrays.stream(g.inSync()).filter(n -> state.reachable(n) && !state.departing.contains(n)).toArray();
    }

    /** Whether another live memory node stays, i.e. a copy of this node's groups can be placed or finish. */
    private boolean copyCanCome() {
        for (int n : state.directory.memoryNodes()) {
            if (n != state.self && state.reachable(n) && !state.departing.contains(n)) {
                return true;
            }
        }
        return false;
    }

    /** Step 3 of {@link #leave} for one group: true when {@code inSync[0]} serves it now. */
    private boolean handOver(ReplicaGroup g, int[] inSync, long deadline) {
        int target = inSync[0];
        g.freeze(target);
        Backoff untilQuiet = new Backoff(CHANGES_DRAIN, deadline);
        while (!g.quiet() && untilQuiet.pause()) {
            // the changes in flight drain
        }
        if (!g.quiet()) {
            LOG.warn("replication: node {} could not hand segment {} over: its copies did not acknowledge sequence {}"
                    + " in time (acknowledged {}); it stops serving it and its copies take over when it has left",
                    state.self, GroupId.toString(g.group()), g.lastSeq(), g.watermark());
            g.stop(Ballot.NONE, "node " + state.self + " leaves the cluster");
            return false;
        }
        try {
            byte[] answer = RemoteMemory.await(state.memory.onNode(target, conn -> conn.request(Replicator.CHANNEL,
                    ReplicationCodec.handOver(g.group(), g.epoch(), g.lastSeq(), inSync))), left(deadline, state.timeout));
            ReplicationCodec.Reader r = new ReplicationCodec.Reader(answer, 1, "node " + target);
            if ((byte) r.u8() != ReplicationCodec.OK) {
                throw new NotPrimaryException(target, g.group(), state.self, g.epoch());
            }
        } catch (DsmException e) {
            LOG.warn("replication: node {} could not hand segment {} over to node {} ({}); it stops serving it and"
                    + " its copies take over when it has left", state.self, GroupId.toString(g.group()), target,
                    e.getMessage());
            g.stop(Ballot.NONE, "node " + state.self + " leaves the cluster");
            return false;
        }
        // the copy promotes itself on its service thread and publishes; wait until the directory shows it (bounded),
        // so that no view in between shows the group without a primary
        long seen = Ballot.NONE;
        Backoff untilPublished = new Backoff(PROMOTION_PUBLISHED,
                Math.min(deadline, System.nanoTime() + state.timeout.toNanos()));
        do {
            ReplicaGroupView v = state.directory.group(GroupId.node(g.group()), GroupId.index(g.group())).orElse(null);
            if (v != null && v.state() == ReplicaGroupView.State.SERVING && v.primary() == target
                    && v.epoch() > g.epoch()) {
                seen = v.epoch();
                break;
            }
        } while (untilPublished.pause());
        // the hint names the new primary either way: the ballot the copy takes is next(epoch, target), §17.9
        g.stop(seen != Ballot.NONE ? seen : Ballot.next(g.epoch(), target),
                "node " + state.self + " handed it over to node " + target);
        state.claims.remove(g.group());
        return true;
    }

    private static Duration left(long deadline, Duration cap) {
        long left = Math.max(1_000_000L, deadline - System.nanoTime());
        return Duration.ofNanos(Math.min(left, cap.toNanos()));
    }


    /** A memory node leaves gracefully (LEAVING): its copies leave this node's groups now, none is placed on it. */
    byte[] departs(int from) {
        state.departing.add(from);
        List<String> groups = new ArrayList<>();
        for (ReplicaGroup g : state.primaries.values()) {
            if (g.removeCopy(from)) {
                groups.add(GroupId.toString(g.group()));
            }
        }
        CopyStream s = state.streams.remove(from);
        if (s != null) {
            s.close();
        }
        LOG.info("replication: node {} leaves gracefully{}", from, groups.isEmpty() ? ""
                : "; its copies of segment " + String.join(", ", groups) + " are handed back");
        state.service.submit(reconcile);
        return ReplicationCodec.state(ReplicationCodec.OK, 0, 0);
    }
}
