package io.membus.core;

import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.replication.GroupId;
import io.membus.core.transport.Verbs;
import io.membus.core.time.TimerWheel;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;

/**
 * The verbs {@link GroupRouter} holds for one replica group while no node serves it, in
 * issue order: the {@link ConnectionOpenings opening} of a group instead of a connection.
 * Released once, by the directory change that names a node serving the group (or the group
 * lost, or no longer known); each verb fails on its own deadline before that (one
 * {@link TimerWheel} entry per hold, armed at the earliest deadline); a hold whose verbs
 * all passed their deadlines leaves the router, so the verbs after them follow the
 * directory again instead of waiting on a change that may never come. A release issues the
 * verbs outside the monitor, one at a time, in order; a verb that arrives while it runs is
 * queued behind them and issued by the same release, so nothing overtakes a held verb and
 * no thread waits on another.
 *
 * <p><b>Note:</b> thread-safe: state under the monitor; issuing and completing futures
 * outside it. The wheel's {@link #expired()} takes the same monitor, so a release and a
 * deadline never both decide one verb ({@link Held#take()} is the single decision).
 */
final class GroupHold extends TimerWheel.Timeout {
    static final int ADDED = 0;
    static final int RELEASING = 1;
    static final int RELEASED = 2;

    private final GroupRouter router;
    private final int group;
    /** A hold of refused verbs: the primary and epoch the directory named when they were refused (0: none). */
    private final int stalePrimary;
    private final long staleEpoch;
    private final ArrayDeque<Held<?>> waiting = new ArrayDeque<>(); // guarded by this
    private int state = ADDED; // ADDED = holding; guarded by this
    private long armedAt; // guarded by this; valid while waiting is not empty and state is holding
    private ReplicaGroupView view; // guarded by this: what the release issues by

    GroupHold(GroupRouter router, int group, int stalePrimary, long staleEpoch) {
        this.router = router;
        this.group = group;
        this.stalePrimary = stalePrimary;
        this.staleEpoch = staleEpoch;
    }

    /** Whether {@code v} lets the held verbs go: a primary other than the refusing one, lost, or unknown. */
    boolean releasable(ReplicaGroupView v) {
        if (v == null || v.state() == ReplicaGroupView.State.LOST) {
            return true;
        }
        return v.state() == ReplicaGroupView.State.SERVING
                && !(stalePrimary != 0 && v.primary() == stalePrimary && v.epoch() == staleEpoch);
    }

    /** @return {@link #ADDED} (held, or queued behind a running release), {@link #RELEASING}, {@link #RELEASED} */
    int add(Held<?> h) {
        synchronized (this) {
            if (state == RELEASED) {
                return RELEASED;
            }
            if (state == RELEASING) {
                if (h.refused) {
                    return RELEASING; // it must wait for another change, not follow this one
                }
                waiting.add(h);
                return ADDED;
            }
            waiting.add(h);
            if (waiting.size() == 1 || h.deadline - armedAt < 0) {
                armedAt = h.deadline;
                TimerWheel.SHARED.arm(this, h.deadline);
            }
            return ADDED;
        }
    }

    void release(ReplicaGroupView v) {
        synchronized (this) {
            if (state != ADDED) {
                return;
            }
            state = RELEASING;
            view = v;
            TimerWheel.SHARED.cancel(this);
        }
        while (true) {
            Held<?> next;
            synchronized (this) {
                next = waiting.poll();
                if (next == null) {
                    state = RELEASED;
                    router.removeHold(group, this);
                    return;
                }
            }
            next.release(view);
        }
    }

    @Override
    protected void expired() {
        List<Held<?>> late = null;
        synchronized (this) {
            if (state != ADDED) {
                return;
            }
            long now = System.nanoTime();
            long earliest = 0;
            boolean any = false;
            for (Iterator<Held<?>> it = waiting.iterator(); it.hasNext(); ) {
                Held<?> h = it.next();
                if (now - h.deadline >= 0) {
                    it.remove();
                    if (late == null) {
                        late = new ArrayList<>();
                    }
                    late.add(h);
                } else if (!any || h.deadline - earliest < 0) {
                    earliest = h.deadline;
                    any = true;
                }
            }
            if (any) {
                armedAt = earliest;
                TimerWheel.SHARED.arm(this, earliest);
            } else { // nothing left: verbs route by the directory again (a stale hold must not outlive its verbs)
                state = RELEASED;
                router.removeHold(group, this);
            }
        }
        if (late != null) {
            late.forEach(Held::timeOut); // outside the monitor: callbacks may issue verbs
        }
    }

    /**
     * One held verb: what to issue, its deadline, and the future its caller holds.
     *
     * <p><b>Note:</b> thread-safe: its fate (release, deadline, or its caller giving up) is
     * decided once, by an atomic flag.
     */
    static final class Held<T> {
        private final GroupRouter router;
        final long ptr;
        final Function<Verbs, CompletableFuture<T>> verb;
        final long deadline;
        final int hops;
        final boolean refused;
        final long since = System.nanoTime();
        final HeldFuture<T> result = new HeldFuture<>(this);
        /** Set by whoever decides its fate first: a release, its deadline, or its blocking caller giving up. */
        private final AtomicBoolean taken = new AtomicBoolean();

        Held(GroupRouter router, long ptr, Function<Verbs, CompletableFuture<T>> verb, long deadline, int hops,
             boolean refused) {
            this.router = router;
            this.ptr = ptr;
            this.verb = verb;
            this.deadline = deadline;
            this.hops = hops;
            this.refused = refused;
        }

        /** Issues it as {@code view} says (the group's primary; the pointer's node for a group no longer known). */
        void release(ReplicaGroupView view) {
            if (!take()) {
                return; // its deadline passed, or its blocking caller gave up on it: not sent
            }
            if (System.nanoTime() - deadline >= 0) {
                failNotSent();
            } else if (view != null && view.state() == ReplicaGroupView.State.LOST) {
                result.completeExceptionally(GroupRouter.lost(view));
            } else {
                int target = view == null ? RemotePtr.nodeId(ptr) : view.primary();
                CompletableFuture<T> f;
                try {
                    f = router.issue(target, ptr, verb, deadline, hops);
                } catch (RuntimeException e) {
                    f = CompletableFuture.failedFuture(e);
                }
                VerbFutures.relay(router.within(f, deadline, ptr, target), result);
            }
        }

        /** Whether this call is the one that decides its fate (release, or fail as not sent): exactly one does. */
        boolean take() {
            return !taken.get() && taken.compareAndSet(false, true);
        }

        /** Fails it as not sent (its deadline passed while no node served its group), unless it was released. */
        void timeOut() {
            if (take()) {
                failNotSent();
            }
        }

        private void failNotSent() {
            result.completeExceptionally(notSentTimeout());
        }

        DsmTimeoutException notSentTimeout() {
            int group = GroupId.ofPointer(ptr);
            return DsmTimeoutException.notSent("promotion in progress for segment "
                    + GroupId.toString(group) + ": no node served it within the deadline (verb on "
                    + RemotePtr.toString(ptr) + " held " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - since)
                    + " ms" + (refused ? ", after the node the directory named refused it as not primary" : "")
                    + ")", RemotePtr.nodeId(ptr), router.operationTimeout());
        }
    }

    /**
     * The future of a held verb: a blocking caller whose wait ends while the verb is still
     * held withdraws it ({@link #withdraw}) and reports it not sent, whatever the timer
     * thread's lateness.
     *
     * <p><b>Note:</b> thread-safe, as {@link RoutedFuture}.
     */
    static final class HeldFuture<T> extends RoutedFuture<T> {
        private final Held<T> held;

        HeldFuture(Held<T> held) {
            this.held = held;
        }

        @Override
        DsmTimeoutException withdraw() {
            if (!held.take()) {
                return null;
            }
            DsmTimeoutException e = held.notSentTimeout();
            completeExceptionally(e);
            return e;
        }
    }
}
