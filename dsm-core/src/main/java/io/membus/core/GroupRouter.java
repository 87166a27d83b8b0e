package io.membus.core;

import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.SegmentLostException;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupId;
import io.membus.core.time.Deadlines;
import io.membus.core.transport.Transport;
import io.membus.core.transport.Verbs;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * {@link RemoteMemory}'s routing (docs/replication.md §2.3): which node a verb on a pointer
 * goes to now. No replica group known: the pointer's own node (no lookup at all until the
 * directory has shown a group). {@code SERVING}: the group's primary. {@code PROMOTING}:
 * the verb is held in its group's {@link GroupHold}, costing no thread, in issue order,
 * until the directory shows a primary or the verb's deadline passes. {@code LOST}:
 * {@link SegmentLostException}. A verb answered {@link NotPrimaryException} did not run:
 * it is re-issued to the refusing node's hint when that is a live member, else held, within
 * its deadline.
 *
 * <p><b>Note:</b> thread-safe. {@link #replicated()} is a volatile flag set once; the group
 * state is read from the directory on each verb (its lookups see every change whose
 * listener ran); the holds are a concurrent map (a count lets a verb skip it) whose entries
 * guard themselves; no monitor is held while a verb is issued or a future completed. Verbs
 * of one group issued by one thread go to one primary at a time, and held verbs are
 * released in issue order.
 */
final class GroupRouter {
    /** What {@link #route} answers for a verb that must wait: its group is promoting, or earlier verbs of it wait. */
    static final int HELD = -1;
    /**
     * Re-issues to a {@link NotPrimaryException#primaryHint()} in a row before the verb waits
     * for the directory instead: two nodes naming each other must not bounce a verb until its
     * deadline.
     */
    private static final int MAX_HINT_HOPS = 4;

    private final Transport transport;
    private final SegmentDirectory directory;
    private final ConnectionOpenings openings;
    private final LocalVerbs local;
    private final Duration operationTimeout;
    /**
     * Whether the directory has ever shown a replica group (set once, never cleared): until
     * then every verb goes to its pointer's node with no group lookup, as before replication.
     */
    private volatile boolean replicated;
    /** Verbs held per replica group ({@link GroupId}) while no primary serves it. */
    private final ConcurrentHashMap<Integer, GroupHold> holds = new ConcurrentHashMap<>();
    /** Entries in {@code holds}, raised before one is added: zero lets a verb skip the map. */
    private final AtomicInteger holdCount = new AtomicInteger();

    /**
     * Registers a listener on {@code directory} (for the replica groups' changes, which
     * release held verbs); it stays registered for the directory's life.
     */
    GroupRouter(Transport transport, SegmentDirectory directory, ConnectionOpenings openings, LocalVerbs local,
                Duration operationTimeout) {
        this.transport = transport;
        this.directory = directory;
        this.openings = openings;
        this.local = local;
        this.operationTimeout = operationTimeout;
        directory.addListener(new DirectoryListener() {
            @Override
            public void groupChanged(ReplicaGroupView before, ReplicaGroupView after) {
                onGroupChanged(before, after);
            }
        });
        if (!directory.groups().isEmpty()) { // after the listener: a group added in between is seen by one of them
            replicated = true;
        }
    }

    /** Whether any replica group was ever shown (until then routing is the pointer's node, no lookup). */
    boolean replicated() {
        return replicated;
    }

    Duration operationTimeout() {
        return operationTimeout;
    }

    /**
     * The node that serves {@code ptr}'s replica group now: the pointer's own node when no
     * group is known (replication off: no lookup, no allocation), the group's primary while
     * it is served, {@link #HELD} while it is promoting or earlier verbs of it are held.
     *
     * @throws SegmentLostException when the group is lost
     */
    int route(long ptr) {
        int node = RemotePtr.nodeId(ptr);
        return replicated ? routeGroup(ptr, node) : node;
    }

    /** {@link #route} once replication is known on: {@code node} is the pointer's. */
    int routeGroup(long ptr, int node) {
        // no capturing lambda: allocation-free
        ReplicaGroupView v = directory.group(node, RemotePtr.segmentIndex(ptr)).orElse(null);
        if (v == null) {
            return node;
        }
        if (holdCount.get() != 0 && holds.containsKey(v.group())) {
            return HELD; // earlier verbs of the group wait: this one queues behind them
        }
        switch (v.state()) {
            case SERVING:
                return v.primary();
            case PROMOTING:
                return HELD;
            default:
                throw lost(v);
        }
    }

    static SegmentLostException lost(ReplicaGroupView v) {
        return new SegmentLostException(v.group(), "state=LOST, last epoch=" + Ballot.toString(v.epoch())
                + " (its primary and every in-sync copy left the cluster)");
    }

    /** Issues {@code verb} where {@code ptr}'s group is served now, holds it, or fails it (lost, null pointer). */
    <T> CompletableFuture<T> routed(long ptr, Function<Verbs, CompletableFuture<T>> verb, long deadline, int hops) {
        int node = RemotePtr.nodeId(ptr);
        if (ptr == RemotePtr.NULL) {
            return CompletableFuture.failedFuture(new InvalidPointerException(ptr, 0, node));
        }
        int target;
        try {
            target = routeGroup(ptr, node);
        } catch (SegmentLostException e) {
            return CompletableFuture.failedFuture(e);
        }
        if (target == HELD) {
            return hold(ptr, verb, deadline, hops, 0);
        }
        return issue(target, ptr, verb, deadline, hops);
    }

    /**
     * Issues {@code verb} to {@code target} (this node's own table when it is this node), and
     * re-issues it when the answer is {@link NotPrimaryException} (the verb did not run).
     */
    <T> CompletableFuture<T> issue(int target, long ptr, Function<Verbs, CompletableFuture<T>> verb, long deadline,
                                   int hops) {
        CompletableFuture<T> f;
        if (target == transport.nodeId() && transport.localAtomicsCoherent()) {
            f = verb.apply(local);
        } else {
            f = openings.onNode(target, verb::apply, () -> "pointer " + RemotePtr.toString(ptr));
        }
        if (f.isDone() && !f.isCompletedExceptionally()) {
            return f;
        }
        RoutedFuture<T> result = new RoutedFuture<>();
        if (f instanceof io.membus.core.transport.WaitHelp.Waitable<?> w) {
            result.source = w;
        }
        // the caller waits for result (RemoteMemory.await, or RoutedFuture's get/join): the relay must not make
        // the transport find another thread to complete f (tcp: a flight reader for a read held on a lane)
        io.membus.core.transport.WaitHelp.whenCompleteOwnerWaits(f, (value, error) -> {
            Throwable cause = VerbFutures.unwrap(error);
            if (cause instanceof NotPrimaryException np) {
                CompletableFuture<T> next = reissue(ptr, verb, deadline, hops, np);
                if (next instanceof RoutedFuture<T> routedNext) {
                    result.then = routedNext; // held again: a blocking caller may still withdraw it
                }
                VerbFutures.relay(next, result);
            } else if (cause != null) {
                result.completeExceptionally(cause);
            } else {
                result.complete(value);
            }
        });
        return result;
    }

    /**
     * A verb refused with {@code np} (it did not run): to the hinted primary when that is
     * a live member (at most {@link #MAX_HINT_HOPS} times in a row), else held until the
     * directory shows the group served by another node or at another epoch. Past its
     * deadline it fails with {@code np} itself.
     */
    <T> CompletableFuture<T> reissue(long ptr, Function<Verbs, CompletableFuture<T>> verb, long deadline, int hops,
                                     NotPrimaryException np) {
        if (System.nanoTime() - deadline >= 0) {
            return CompletableFuture.failedFuture(np);
        }
        int hint = np.primaryHint();
        if (hint > 0 && hint != np.nodeId() && hops < MAX_HINT_HOPS
                && (hint == transport.nodeId() || directory.member(hint).isPresent())) {
            return within(issue(hint, ptr, verb, deadline, hops + 1), deadline, ptr, hint);
        }
        return hold(ptr, verb, deadline, hops + 1, np.nodeId());
    }

    /**
     * Holds {@code verb} in its group's {@link GroupHold} (made if needed), behind the verbs
     * held before it. {@code refusedBy}: the node that answered it {@link NotPrimaryException}
     * (its hint could not be used), so while the directory still names that node at the
     * same epoch the verb waits for a change; 0: it waits for any primary.
     */
    private <T> CompletableFuture<T> hold(long ptr, Function<Verbs, CompletableFuture<T>> verb, long deadline,
                                          int hops, int refusedBy) {
        int node = RemotePtr.nodeId(ptr);
        int index = RemotePtr.segmentIndex(ptr);
        int group = GroupId.of(node, index);
        boolean refused = refusedBy != 0;
        GroupHold.Held<T> held = new GroupHold.Held<>(this, ptr, verb, deadline, hops, refused);
        if (System.nanoTime() - deadline >= 0) {
            held.timeOut();
            return held.result;
        }
        while (true) {
            GroupHold h = holds.get(group);
            if (h == null) {
                GroupHold fresh = newHold(group, node, index, refusedBy);
                holdCount.incrementAndGet();
                h = holds.putIfAbsent(group, fresh);
                if (h != null) {
                    holdCount.decrementAndGet();
                    continue;
                }
                h = fresh;
            }
            int added = h.add(held);
            if (added == GroupHold.ADDED) {
                // a change applied before the hold was in the map had no hold to release: look again
                ReplicaGroupView now = directory.group(node, index).orElse(null);
                if (h.releasable(now)) {
                    h.release(now);
                }
                return held.result;
            }
            if (added == GroupHold.RELEASING && refused) {
                // refused again while its hold is being released: it waits in a new hold for the next change
                holds.replace(group, h, newHold(group, node, index, refusedBy)); // one out, one in: the count stays
                continue;
            }
            Thread.onSpinWait(); // released: it leaves the map at once (see GroupHold.release)
            if (added == GroupHold.RELEASED && holds.get(group) != h) {
                return routed(ptr, verb, deadline, hops);
            }
        }
    }

    /**
     * A hold for group {@code (node, index)}; for verbs refused by {@code refusedBy}, stale
     * while the directory names that node at the epoch it names now.
     */
    private GroupHold newHold(int group, int node, int index, int refusedBy) {
        ReplicaGroupView now = refusedBy == 0 ? null : directory.group(node, index).orElse(null);
        boolean stale = now != null && now.state() == ReplicaGroupView.State.SERVING && now.primary() == refusedBy;
        return new GroupHold(this, group, stale ? refusedBy : 0, stale ? now.epoch() : 0);
    }

    /** Called by a hold that released or timed out all its verbs: later verbs follow the directory again. */
    void removeHold(int group, GroupHold hold) {
        if (holds.remove(group, hold)) {
            holdCount.decrementAndGet();
        }
    }

    /** Fails {@code f} with {@link DsmTimeoutException} (it may have run) unless it completed by {@code deadline}. */
    <T> CompletableFuture<T> within(CompletableFuture<T> f, long deadline, long ptr, int node) {
        if (f.isDone()) {
            return f;
        }
        CompletableFuture<T> bounded = new CompletableFuture<>(); // never fail a future the transport owns
        VerbFutures.relay(f, bounded);
        return Deadlines.within(bounded, Duration.ofNanos(Math.max(1, deadline - System.nanoTime())),
                "verb on " + RemotePtr.toString(ptr) + " (re-routed to node " + node + ")", node);
    }

    /** A group's view changed: release its held verbs when a node serves it now (or fail them: lost). */
    private void onGroupChanged(ReplicaGroupView before, ReplicaGroupView after) {
        if (after != null) {
            replicated = true;
        }
        if (holdCount.get() == 0) {
            return;
        }
        ReplicaGroupView any = after != null ? after : before;
        if (any == null) {
            return;
        }
        GroupHold h = holds.get(any.group());
        if (h != null && h.releasable(after)) {
            h.release(after);
        }
    }
}
