package io.membus.core;

import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.BlockingCallOnTransportThreadException;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.SegmentLostException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.replication.AckGate;
import io.membus.core.replication.GroupId;
import io.membus.core.transport.Batch;
import io.membus.core.transport.BlockingVerbs;
import io.membus.core.transport.Connection;
import io.membus.core.transport.Deadlines;
import io.membus.core.transport.DirectConnection;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportThreads;
import io.membus.core.transport.Verbs;
import io.membus.core.transport.pipeline.TimerWheel;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * The whole cluster's memory as seen from one node: verbs on any remote pointer,
 * with the remote key and the connection found from the pointer through the
 * {@link SegmentDirectory} and the {@link Transport}. What the allocator, the
 * coherence layer and the collections use.
 *
 * <p>Pointers to this node's own segments run on its {@link Transport#table()}
 * directly (same checks, no connection) when the transport's local atomics are
 * coherent with peers' verbs, and through a loopback connection otherwise.
 *
 * <p>Naming: plain names ({@code read}, {@code compareAndSwap}, ...) block; the
 * {@code *Async} forms return a future. A blocking form returns or fails by the
 * operation timeout from the call — or the calling thread's {@link OperationDeadline},
 * if earlier — plus {@link OperationDeadline#MARGIN}, and rethrows the typed
 * {@link DsmException}, whose {@link DsmException#mayHaveRun()} says whether the verb
 * may have run; a verb whose operation deadline passed before it was issued fails at
 * once with {@link io.membus.core.error.DsmTimeoutException#notSent}.
 *
 * <p><b>Routing</b> (replication, docs/replication.md §2.3): a pointer names the logical
 * segment {@code (n, s)}; a verb goes to the node that serves that segment's replica
 * group now ({@link SegmentDirectory#group}), carrying the logical pointer and the group's
 * remote key. No group known: the pointer's own node, exactly as without replication (no
 * lookup at all until the directory has shown a group). {@code SERVING}: its primary.
 * {@code PROMOTING}: the verb is held, costing no thread, in issue order per group, until
 * the directory shows a primary ({@link DirectoryListener#groupChanged}) or the verb's
 * deadline passes (then {@link DsmTimeoutException#notSent}, "promotion in progress").
 * {@code LOST}: {@link SegmentLostException} at once. A verb answered
 * {@link NotPrimaryException} did not run: it is re-issued to the refusing node's hint when
 * that is a live member, else held as for {@code PROMOTING}, within its deadline. A verb
 * run on this node's own table (this node serves the group) completes only once the
 * group's {@link AckGate} says every in-sync copy has it. Verbs released from a hold or
 * re-issued keep their original deadline: their futures fail with
 * {@link DsmTimeoutException} by it.
 *
 * <p><b>Note:</b> thread-safe; the ordering and visibility rules are those of
 * {@link Verbs}, per target node, and with replication per replica group: verbs of one
 * group issued by one thread go to one primary at a time, and held verbs are released
 * in issue order (a verb refused by a node that stopped being primary is re-issued after
 * the refusal arrived, so verbs issued after it on the same connection, refused too,
 * follow it). The group state is read from the directory on each verb (its lookups see
 * every change whose listener ran); the holds are guarded by their own monitors, and no
 * monitor is held while a verb is issued or a future completed.
 */
public final class RemoteMemory {
    private final Transport transport;
    private final SegmentDirectory directory;
    private final Duration syncWait;
    private final ConcurrentHashMap<Integer, Opening> openings = new ConcurrentHashMap<>();
    /** Entries in {@code openings}, raised before one is added: zero lets a verb skip the map. */
    private final AtomicInteger openingCount = new AtomicInteger();
    /** Segment descriptors of peers per node id, for direct verbs ({@link #directKey}). */
    private final java.util.concurrent.atomic.AtomicReferenceArray<SegmentDescriptor[]> descriptors =
            new java.util.concurrent.atomic.AtomicReferenceArray<>(RemotePtr.MAX_NODE_ID + 1);
    /** The connection last used per node id (a cache: checked open and of the member's incarnation on use). */
    private final java.util.concurrent.atomic.AtomicReferenceArray<Connection> connections =
            new java.util.concurrent.atomic.AtomicReferenceArray<>(RemotePtr.MAX_NODE_ID + 1);

    /**
     * Whether the directory has ever shown a replica group (set once, never cleared): until
     * then every verb goes to its pointer's node with no group lookup, as before replication.
     */
    private volatile boolean replicated;
    /** Verbs held per replica group ({@link GroupId}) while no primary serves it. */
    private final ConcurrentHashMap<Integer, Hold> holds = new ConcurrentHashMap<>();
    /** Entries in {@code holds}, raised before one is added: zero lets a verb skip the map. */
    private final AtomicInteger holdCount = new AtomicInteger();

    /**
     * Registers a listener on {@code directory} (for the replica groups' changes, which
     * release held verbs); it stays registered for the directory's life.
     */
    public RemoteMemory(Transport transport, SegmentDirectory directory, Duration operationTimeout) {
        this.transport = transport;
        this.directory = directory;
        this.syncWait = operationTimeout.plusSeconds(1);
        this.operationTimeout = operationTimeout;
        this.timeoutNanos = operationTimeout.toNanos();
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

    private final Duration operationTimeout;
    private final long timeoutNanos;

    public Transport transport() {
        return transport;
    }

    /** The deadline of each blocking verb, and of an operation made of verbs ({@link OperationDeadline}). */
    public Duration operationTimeout() {
        return operationTimeout;
    }

    public SegmentDirectory directory() {
        return directory;
    }

    public int localNodeId() {
        return transport.nodeId();
    }

    /**
     * The directory entry of the segment {@code ptr} points into. For a replicated segment
     * it is the group's logical descriptor ({@link ReplicaGroupView#logical()}: node and
     * index of the pointer, the group's size, flags and remote key) while the group is
     * served or promoting, even after the pointer's node died.
     *
     * @throws SegmentLostException when the segment's replica group is lost
     */
    public SegmentDescriptor segmentOf(long ptr) {
        if (ptr == RemotePtr.NULL) {
            throw new InvalidPointerException(ptr, 0, 0);
        }
        if (transport.isClosed()) {
            throw closedException();
        }
        int node = RemotePtr.nodeId(ptr);
        int index = RemotePtr.segmentIndex(ptr);
        if (replicated) {
            ReplicaGroupView v = directory.group(node, index).orElse(null);
            if (v != null && v.logical() != null) {
                if (v.state() == ReplicaGroupView.State.LOST) {
                    throw lost(v);
                }
                return v.logical();
            }
        }
        if (node == transport.nodeId()) {
            Segment s = transport.table().get(index);
            if (s == null) {
                throw new UnknownSegmentException(ptr, 0);
            }
            return s.descriptor();
        }
        SegmentDescriptor d = directory.segment(node, index).orElse(null); // no capturing lambda: a verb allocates nothing
        if (d == null) {
            throw directory.member(node).isPresent() ? new UnknownSegmentException(ptr, 0)
                    : NodeUnavailableException.notSent(node, "not a live member of the cluster (pointer "
                    + RemotePtr.toString(ptr) + ")");
        }
        return d;
    }

    private <T> CompletableFuture<T> on(long ptr, Function<Verbs, CompletableFuture<T>> verb) {
        if (replicated) {
            return routed(ptr, verb, OperationDeadline.until(System.nanoTime(), timeoutNanos), 0);
        }
        int node = RemotePtr.nodeId(ptr);
        if (node == transport.nodeId() && transport.localAtomicsCoherent()) {
            return verb.apply(new LocalVerbs());
        }
        if (ptr == RemotePtr.NULL) {
            return CompletableFuture.failedFuture(new InvalidPointerException(ptr, 0, node));
        }
        return onNode(node, verb::apply, () -> "pointer " + RemotePtr.toString(ptr));
    }

    // ------------------------------------------------------------------ routing (docs/replication.md §2.3)

    /** What {@link #route} answers for a verb that must wait: its group is promoting, or earlier verbs of it wait. */
    private static final int HELD = -1;
    /**
     * Re-issues to a {@link NotPrimaryException#primaryHint()} in a row before the verb waits
     * for the directory instead: two nodes naming each other must not bounce a verb until its
     * deadline.
     */
    private static final int MAX_HINT_HOPS = 4;

    /**
     * The node that serves {@code ptr}'s replica group now: the pointer's own node when no
     * group is known (replication off: no lookup, no allocation), the group's primary while
     * it is served, {@link #HELD} while it is promoting or earlier verbs of it are held.
     *
     * @throws SegmentLostException when the group is lost
     */
    private int route(long ptr) {
        int node = RemotePtr.nodeId(ptr);
        return replicated ? routeGroup(ptr, node) : node;
    }

    private int routeGroup(long ptr, int node) {
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

    private static SegmentLostException lost(ReplicaGroupView v) {
        return new SegmentLostException(v.group(), "state=LOST, last epoch="
                + io.membus.core.replication.Ballot.toString(v.epoch())
                + " (its primary and every in-sync copy left the cluster)");
    }

    /** Issues {@code verb} where {@code ptr}'s group is served now, holds it, or fails it (lost, null pointer). */
    private <T> CompletableFuture<T> routed(long ptr, Function<Verbs, CompletableFuture<T>> verb, long deadline,
                                            int hops) {
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
    private <T> CompletableFuture<T> issue(int target, long ptr, Function<Verbs, CompletableFuture<T>> verb,
                                           long deadline, int hops) {
        CompletableFuture<T> f;
        if (target == transport.nodeId() && transport.localAtomicsCoherent()) {
            f = verb.apply(new LocalVerbs());
        } else {
            f = onNode(target, verb::apply, () -> "pointer " + RemotePtr.toString(ptr));
        }
        if (f.isDone() && !f.isCompletedExceptionally()) {
            return f;
        }
        RoutedFuture<T> result = new RoutedFuture<>();
        f.whenComplete((value, error) -> {
            Throwable cause = unwrap(error);
            if (cause instanceof NotPrimaryException np) {
                CompletableFuture<T> next = reissue(ptr, verb, deadline, hops, np);
                if (next instanceof RoutedFuture<T> routedNext) {
                    result.then = routedNext; // held again: a blocking caller may still withdraw it
                }
                relay(next, result);
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
    private <T> CompletableFuture<T> reissue(long ptr, Function<Verbs, CompletableFuture<T>> verb, long deadline,
                                             int hops, NotPrimaryException np) {
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
     * Holds {@code verb} in its group's {@link Hold} (made if needed), behind the verbs held
     * before it. {@code refusedBy}: the node that answered it {@link NotPrimaryException}
     * (its hint could not be used), so while the directory still names that node at the
     * same epoch the verb waits for a change; 0: it waits for any primary.
     */
    private <T> CompletableFuture<T> hold(long ptr, Function<Verbs, CompletableFuture<T>> verb, long deadline,
                                          int hops, int refusedBy) {
        int node = RemotePtr.nodeId(ptr);
        int index = RemotePtr.segmentIndex(ptr);
        int group = GroupId.of(node, index);
        boolean refused = refusedBy != 0;
        Held<T> held = new Held<>(ptr, verb, deadline, hops, refused);
        if (System.nanoTime() - deadline >= 0) {
            held.timeOut();
            return held.result;
        }
        while (true) {
            Hold h = holds.get(group);
            if (h == null) {
                Hold fresh = newHold(group, node, index, refusedBy);
                holdCount.incrementAndGet();
                h = holds.putIfAbsent(group, fresh);
                if (h != null) {
                    holdCount.decrementAndGet();
                    continue;
                }
                h = fresh;
            }
            int added = h.add(held);
            if (added == Hold.ADDED) {
                // a change applied before the hold was in the map had no hold to release: look again
                ReplicaGroupView now = directory.group(node, index).orElse(null);
                if (h.releasable(now)) {
                    h.release(now);
                }
                return held.result;
            }
            if (added == Hold.RELEASING && refused) {
                // refused again while its hold is being released: it waits in a new hold for the next change
                holds.replace(group, h, newHold(group, node, index, refusedBy)); // one out, one in: the count stays
                continue;
            }
            Thread.onSpinWait(); // released: it leaves the map at once (see Hold.release)
            if (added == Hold.RELEASED && holds.get(group) != h) {
                return routed(ptr, verb, deadline, hops);
            }
        }
    }

    /**
     * A hold for group {@code (node, index)}; for verbs refused by {@code refusedBy}, stale
     * while the directory names that node at the epoch it names now.
     */
    private Hold newHold(int group, int node, int index, int refusedBy) {
        ReplicaGroupView now = refusedBy == 0 ? null : directory.group(node, index).orElse(null);
        boolean stale = now != null && now.state() == ReplicaGroupView.State.SERVING && now.primary() == refusedBy;
        return new Hold(group, stale ? refusedBy : 0, stale ? now.epoch() : 0);
    }

    /** Fails {@code f} with {@link DsmTimeoutException} (it may have run) unless it completed by {@code deadline}. */
    private <T> CompletableFuture<T> within(CompletableFuture<T> f, long deadline, long ptr, int node) {
        if (f.isDone()) {
            return f;
        }
        CompletableFuture<T> bounded = new CompletableFuture<>(); // never fail a future the transport owns
        relay(f, bounded);
        return Deadlines.within(bounded, Duration.ofNanos(Math.max(1, deadline - System.nanoTime())),
                "verb on " + RemotePtr.toString(ptr) + " (re-routed to node " + node + ")", node);
    }

    private static Throwable unwrap(Throwable e) {
        return e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
    }

    private static <T> void relay(CompletableFuture<T> from, CompletableFuture<T> to) {
        from.whenComplete((value, error) -> {
            if (error != null) {
                to.completeExceptionally(unwrap(error));
            } else {
                to.complete(value);
            }
        });
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
        Hold h = holds.get(any.group());
        if (h != null && h.releasable(after)) {
            h.release(after);
        }
    }

    /**
     * The future of a routed verb that was refused {@link NotPrimaryException} and issued
     * again ({@link #then}): a blocking caller whose wait ends while the verb is held again
     * withdraws it through here.
     */
    private static class RoutedFuture<T> extends CompletableFuture<T> {
        /** The future of the verb issued again after a refusal, when that is withdrawable. */
        volatile RoutedFuture<T> then;

        /** The not-sent timeout when the verb was still held (it will never be sent now), else null. */
        DsmTimeoutException withdraw() {
            RoutedFuture<T> next = then;
            DsmTimeoutException e = next == null ? null : next.withdraw();
            if (e != null) {
                completeExceptionally(e);
            }
            return e;
        }
    }

    /**
     * The future of a held verb: a blocking caller whose wait ends while the verb is still
     * held withdraws it ({@link #withdraw}) and reports it not sent, whatever the timer
     * thread's lateness.
     */
    private static final class HeldFuture<T> extends RoutedFuture<T> {
        private final RemoteMemory.Held<T> held;

        HeldFuture(RemoteMemory.Held<T> held) {
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

    /** One held verb: what to issue, its deadline, and the future its caller holds. */
    private final class Held<T> {
        final long ptr;
        final Function<Verbs, CompletableFuture<T>> verb;
        final long deadline;
        final int hops;
        final boolean refused;
        final long since = System.nanoTime();
        final HeldFuture<T> result = new HeldFuture<>(this);
        /** Set by whoever decides its fate first: a release, its deadline, or its blocking caller giving up. */
        private final java.util.concurrent.atomic.AtomicBoolean taken = new java.util.concurrent.atomic.AtomicBoolean();

        Held(long ptr, Function<Verbs, CompletableFuture<T>> verb, long deadline, int hops, boolean refused) {
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
                result.completeExceptionally(lost(view));
            } else {
                int target = view == null ? RemotePtr.nodeId(ptr) : view.primary();
                CompletableFuture<T> f;
                try {
                    f = issue(target, ptr, verb, deadline, hops);
                } catch (RuntimeException e) {
                    f = CompletableFuture.failedFuture(e);
                }
                relay(within(f, deadline, ptr, target), result);
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
                    + ")", RemotePtr.nodeId(ptr), operationTimeout);
        }
    }

    /**
     * The verbs held for one replica group, in issue order: the {@link Opening} of a group
     * instead of a connection. Released once, by the directory change that names a node
     * serving the group (or the group lost, or no longer known); each verb fails on its
     * own deadline before that (one wheel entry per hold, armed at the earliest deadline);
     * a hold whose verbs all passed their deadlines leaves the map, so the verbs after them
     * follow the directory again instead of waiting on a change that may never come. A release issues the verbs outside the monitor, one at a time, in order; a verb that
     * arrives while it runs is queued behind them and issued by the same release, so
     * nothing overtakes a held verb and no thread waits on another.
     *
     * <p><b>Note:</b> thread-safe: state under the monitor; issuing and completing futures
     * outside it.
     */
    private final class Hold extends TimerWheel.Timeout {
        static final int ADDED = 0;
        static final int RELEASING = 1;
        static final int RELEASED = 2;

        private final int group;
        /** A hold of refused verbs: the primary and epoch the directory named when they were refused (0: none). */
        private final int stalePrimary;
        private final long staleEpoch;
        private final ArrayDeque<Held<?>> waiting = new ArrayDeque<>(); // guarded by this
        private int state = ADDED; // ADDED = holding; guarded by this
        private long armedAt; // guarded by this; valid while waiting is not empty and state is holding
        private ReplicaGroupView view; // guarded by this: what the release issues by

        Hold(int group, int stalePrimary, long staleEpoch) {
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
                        if (holds.remove(group, this)) {
                            holdCount.decrementAndGet();
                        }
                        return;
                    }
                }
                next.release(view);
            }
        }

        @Override
        protected void expired() {
            java.util.List<Held<?>> late = null;
            synchronized (this) {
                if (state != ADDED) {
                    return;
                }
                long now = System.nanoTime();
                long earliest = 0;
                boolean any = false;
                for (java.util.Iterator<Held<?>> it = waiting.iterator(); it.hasNext(); ) {
                    Held<?> h = it.next();
                    if (now - h.deadline >= 0) {
                        it.remove();
                        if (late == null) {
                            late = new java.util.ArrayList<>();
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
                    if (holds.remove(group, this)) {
                        holdCount.decrementAndGet();
                    }
                }
            }
            if (late != null) {
                late.forEach(Held::timeOut); // outside the monitor: callbacks may issue verbs
            }
        }
    }

    /**
     * Runs {@code op} on the connection to {@code node} (a loopback connection for
     * this node), found as verbs find theirs: the peer from the directory, the
     * connection from the transport; operations issued while the connection opens
     * wait and are submitted in issue order. A node that is not a live member fails
     * the future with {@link NodeUnavailableException}, a connection that cannot
     * open with its typed cause. What {@link io.membus.core.message.Messaging} uses.
     */
    public <T> CompletableFuture<T> onNode(int node, Function<Connection, CompletableFuture<T>> op) {
        return onNode(node, op, () -> "node " + node);
    }

    private <T> CompletableFuture<T> onNode(int node, Function<Connection, CompletableFuture<T>> verb,
                                            java.util.function.Supplier<String> what) {
        if (transport.isClosed()) {
            return CompletableFuture.failedFuture(closedException());
        }
        PeerInfo peer = node == transport.nodeId() ? transport.self() : directory.member(node).orElse(null);
        if (peer == null) {
            return CompletableFuture.failedFuture(NodeUnavailableException.notSent(node,
                    "not a live member of the cluster (" + what.get() + ")"));
        }
        Opening opening = openingCount.get() == 0 ? null : openings.get(node);
        if (opening == null) {
            CompletableFuture<Connection> c = transport.connect(peer);
            if (c.isDone()) {
                return c.isCompletedExceptionally() ? failedLike(c) : verb.apply(c.join());
            }
            Opening fresh = new Opening(c);
            openingCount.incrementAndGet();
            opening = openings.putIfAbsent(node, fresh);
            if (opening == null) {
                opening = fresh;
                c.whenComplete((connection, error) -> drain(node, fresh));
            } else {
                openingCount.decrementAndGet();
            }
        }
        return opening.submit(verb);
    }

    /** A future failed with the typed cause of {@code failed} (not wrapped in a CompletionException). */
    private static <T> CompletableFuture<T> failedLike(CompletableFuture<?> failed) {
        Throwable cause = failed.handle((v, e) -> e).join();
        return CompletableFuture.failedFuture(cause instanceof CompletionException && cause.getCause() != null
                ? cause.getCause() : cause);
    }

    /** Runs, in issue order, the verbs that waited for a connection to open. */
    private void drain(int node, Opening opening) {
        opening.drain();
        if (openings.remove(node, opening)) {
            openingCount.decrementAndGet();
        }
    }

    /**
     * Verbs issued while a connection to their node is still opening. They wait in
     * issue order and are submitted in that order once it opens: chaining each verb
     * on the connection future instead would run them in an unspecified order
     * ({@code CompletableFuture} dependents complete in reverse), breaking the
     * per-connection issue order of {@link Verbs}.
     */
    private static final class Opening {
        private final CompletableFuture<Connection> connection;
        private final ArrayDeque<Runnable> waiting = new ArrayDeque<>();
        private boolean drained;

        Opening(CompletableFuture<Connection> connection) {
            this.connection = connection;
        }

        <T> CompletableFuture<T> submit(Function<Connection, CompletableFuture<T>> verb) {
            synchronized (this) {
                if (!drained) {
                    CompletableFuture<T> result = new CompletableFuture<>();
                    waiting.add(() -> relay(verb, result));
                    return result;
                }
            }
            // Opened (or failed) and every earlier verb submitted: the future is done.
            return connection.isCompletedExceptionally() ? failedLike(connection) : verb.apply(connection.join());
        }

        synchronized void drain() {
            for (Runnable r; (r = waiting.poll()) != null; ) {
                r.run();
            }
            drained = true;
        }

        private <T> void relay(Function<Connection, CompletableFuture<T>> verb, CompletableFuture<T> result) {
            CompletableFuture<T> issued;
            try {
                issued = connection.isCompletedExceptionally() ? failedLike(connection) : verb.apply(connection.join());
            } catch (RuntimeException e) {
                issued = CompletableFuture.failedFuture(e);
            }
            issued.whenComplete((value, error) -> {
                if (error != null) {
                    result.completeExceptionally(error instanceof CompletionException && error.getCause() != null
                            ? error.getCause() : error);
                } else {
                    result.complete(value);
                }
            });
        }
    }

    private long keyOf(long ptr) {
        return segmentOf(ptr).remoteKey();
    }

    /**
     * A batch of verbs on pointers of any nodes: nothing is posted until
     * {@link RemoteBatch#submit()}, which posts each node's verbs as one {@link Batch}
     * of its connection (one wake-up, one flush per node), in the order they were added.
     */
    public RemoteBatch batch() {
        if (transport.isClosed()) {
            throw closedException();
        }
        return new RemoteBatch();
    }

    /** What a verb issued after this node's transport closed fails with: at once, naming the node. */
    private DsmClosedException closedException() {
        return new DsmClosedException("the remote memory of node " + transport.nodeId() + " (its transport "
                + transport.name() + " is closed: the node or Membus instance that owned it was closed)");
    }

    /**
     * Verbs on pointers of any nodes, posted together by {@link #submit()}: per node, in
     * the order they were added, as one {@link Batch} of that node's connection (this
     * node's own pointers run at submit, on the caller's thread). Each verb's future
     * completes with its result or its typed failure; a pointer with no segment or
     * member fails its own verb's future at once (when it is added), a node whose
     * connection cannot open fails its verbs with that connection's error. Deadlines
     * start at {@code submit()}.
     *
     * <p>With replication "node" is the node serving the pointer's replica group when the
     * verb is added (its primary); a verb of a lost group fails when added; a verb of a
     * promoting group is held on its own at submit (in the order added, per group) and a
     * verb answered {@link NotPrimaryException} is re-issued on its own: the batch's
     * one-flush-per-node holds for the verbs of served groups.
     *
     * <p><b>Note:</b> not thread-safe: one thread fills and submits it, once.
     */
    public final class RemoteBatch {
        private final java.util.Map<Integer, java.util.List<Pending<?>>> byNode = new java.util.LinkedHashMap<>();
        /** Writes whose bytes are copied at submit (replication: a held or re-issued write runs later). */
        private java.util.List<Snapshot> snapshots;
        private int size;
        private boolean submitted;

        private RemoteBatch() {
        }

        public CompletableFuture<byte[]> read(long ptr, int length) {
            BadLengthException bad = SegmentTable.lengthError(ptr, length);
            if (bad != null) {
                return CompletableFuture.failedFuture(bad);
            }
            return add(ptr, key -> v -> v.read(ptr, key, length));
        }

        /** Writes {@code src[offset..offset+length)}; the bytes are read at {@link #submit()}. */
        public CompletableFuture<Void> write(long ptr, byte[] src, int offset, int length) {
            if (replicated) {
                Snapshot snapshot = new Snapshot(src, offset, length);
                if (snapshots == null) {
                    snapshots = new java.util.ArrayList<>();
                }
                snapshots.add(snapshot);
                return add(ptr, key -> v -> v.write(ptr, key, snapshot.src, snapshot.offset, length));
            }
            return add(ptr, key -> v -> v.write(ptr, key, src, offset, length));
        }

        public CompletableFuture<Long> compareAndSwap(long ptr, long expected, long update) {
            return add(ptr, key -> v -> v.compareAndSwap(ptr, key, expected, update));
        }

        public CompletableFuture<Long> fetchAndAdd(long ptr, long delta) {
            return add(ptr, key -> v -> v.fetchAndAdd(ptr, key, delta));
        }

        /** Verbs added and not yet submitted. */
        public int size() {
            return submitted ? 0 : size;
        }

        private <T> CompletableFuture<T> add(long ptr,
                                             java.util.function.LongFunction<Function<Verbs, CompletableFuture<T>>> op) {
            if (submitted) {
                throw new IllegalStateException("batch already submitted: start a new batch");
            }
            CompletableFuture<T> result = new CompletableFuture<>();
            int node = RemotePtr.nodeId(ptr);
            if (ptr == RemotePtr.NULL) {
                result.completeExceptionally(new InvalidPointerException(ptr, 0, node));
                return result;
            }
            long key;
            try {
                key = keyOf(ptr);
                node = route(ptr); // the group's primary, or HELD: those are routed again at submit
            } catch (DsmException e) {
                result.completeExceptionally(e);
                return result;
            }
            byNode.computeIfAbsent(node, n -> new java.util.ArrayList<>())
                    .add(new Pending<>(ptr, op.apply(key), result));
            size++;
            return result;
        }

        /** Posts every verb added, one batch per node. */
        public void submit() {
            if (submitted) {
                throw new IllegalStateException("batch already submitted: start a new batch");
            }
            submitted = true;
            if (snapshots != null) {
                snapshots.forEach(Snapshot::take);
            }
            long deadline = OperationDeadline.until(System.nanoTime(), timeoutNanos);
            byNode.forEach((node, verbs) -> {
                if (node == HELD) { // their groups were promoting at add: each is routed (held) on its own now
                    verbs.forEach(p -> p.route(deadline));
                    return;
                }
                if (node == transport.nodeId() && transport.localAtomicsCoherent()) {
                    LocalVerbs local = new LocalVerbs();
                    verbs.forEach(p -> p.post(local, deadline));
                    return;
                }
                onNode(node, connection -> {
                    Batch b = connection.batch();
                    verbs.forEach(p -> p.post(b, deadline));
                    b.submit();
                    return CompletableFuture.completedFuture(null);
                }, () -> "node " + node).whenComplete((v, e) -> {
                    if (e != null) { // the connection did not open: none of these verbs was posted
                        Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
                        verbs.forEach(p -> p.result.completeExceptionally(cause));
                    }
                });
            });
            byNode.clear();
        }
    }

    /** The bytes of a batched write, copied at submit when the write may run later (replication). */
    private static final class Snapshot {
        byte[] src;
        int offset;
        final int length;

        Snapshot(byte[] src, int offset, int length) {
            this.src = src;
            this.offset = offset;
            this.length = length;
        }

        void take() {
            if (Verbs.sourceRangeError(src, offset, length) == null) { // a bad range fails its own verb
                src = java.util.Arrays.copyOfRange(src, offset, offset + length);
                offset = 0;
            }
        }
    }

    /**
     * One verb of a {@link RemoteBatch}: how to post it, and the future its caller holds. A
     * verb refused {@link NotPrimaryException} (replication) is re-issued on its own.
     */
    private final class Pending<T> {
        final long ptr;
        final Function<Verbs, CompletableFuture<T>> op;
        final CompletableFuture<T> result;

        Pending(long ptr, Function<Verbs, CompletableFuture<T>> op, CompletableFuture<T> result) {
            this.ptr = ptr;
            this.op = op;
            this.result = result;
        }

        /** Routes it on its own (its group was promoting when it was added). */
        void route(long deadline) {
            relay(routed(ptr, op, deadline, 0), result);
        }

        void post(Verbs on, long deadline) {
            CompletableFuture<T> posted;
            try {
                posted = op.apply(on);
            } catch (RuntimeException e) {
                result.completeExceptionally(e);
                return;
            }
            posted.whenComplete((value, error) -> {
                Throwable cause = error == null ? null : unwrap(error);
                if (cause instanceof NotPrimaryException np && replicated) {
                    relay(reissue(ptr, op, deadline, 0, np), result);
                } else if (cause != null) {
                    result.completeExceptionally(cause);
                } else {
                    result.complete(value);
                }
            });
        }
    }

    public CompletableFuture<byte[]> readAsync(long ptr, int length) {
        BadLengthException bad = SegmentTable.lengthError(ptr, length); // before anything is allocated
        if (bad != null) {
            return CompletableFuture.failedFuture(bad);
        }
        try {
            long key = keyOf(ptr);
            return on(ptr, v -> v.read(ptr, key, length));
        } catch (DsmException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    public CompletableFuture<Void> writeAsync(long ptr, byte[] src, int offset, int length) {
        try {
            long key = keyOf(ptr);
            if (replicated) { // a held or re-issued write runs later: the caller may reuse src once this returns
                IllegalArgumentException bad = Verbs.sourceRangeError(src, offset, length);
                if (bad != null) {
                    return CompletableFuture.failedFuture(bad);
                }
                byte[] copy = java.util.Arrays.copyOfRange(src, offset, offset + length);
                return on(ptr, v -> v.write(ptr, key, copy, 0, length));
            }
            return on(ptr, v -> v.write(ptr, key, src, offset, length));
        } catch (DsmException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    public CompletableFuture<Void> writeAsync(long ptr, byte[] src) {
        return writeAsync(ptr, src, 0, src.length);
    }

    public CompletableFuture<Long> compareAndSwapAsync(long ptr, long expected, long update) {
        try {
            long key = keyOf(ptr);
            return on(ptr, v -> v.compareAndSwap(ptr, key, expected, update));
        } catch (DsmException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    public CompletableFuture<Long> fetchAndAddAsync(long ptr, long delta) {
        try {
            long key = keyOf(ptr);
            return on(ptr, v -> v.fetchAndAdd(ptr, key, delta));
        } catch (DsmException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    // ------------------------------------------------------------------ blocking verbs
    // On a memory-semantics path (this node's own segments, or a direct connection with no
    // fault rule and nothing held) a blocking verb runs on the caller's thread with the
    // same checks and no future, lambda or boxing; every other path posts the verb and waits.

    public byte[] read(long ptr, int length) {
        BadLengthException bad = SegmentTable.lengthError(ptr, length); // before the array is allocated
        if (bad != null) {
            throw bad;
        }
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                byte[] dst = new byte[length];
                direct.readInto(ptr, directKey(ptr), dst, 0, length);
                awaitGate(direct, ptr);
                return dst;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr); // refused before any effect: posted below with the directory's key
            }
        }
        return awaitVerb(readAsync(ptr, length));
    }

    /**
     * Reads {@code length} bytes at {@code ptr} into {@code dst[offset..]}: no allocation
     * on a memory-semantics path (the posted path copies the verb's result).
     */
    public void read(long ptr, byte[] dst, int offset, int length) {
        if (offset < 0 || length < 0 || offset > dst.length - length) {
            throw new IllegalArgumentException("destination range out of bounds: offset=" + offset + ", length="
                    + length + ", array=" + dst.length);
        }
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.readInto(ptr, directKey(ptr), dst, offset, length);
                awaitGate(direct, ptr);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        System.arraycopy(awaitVerb(readAsync(ptr, length)), 0, dst, offset, length);
    }

    /**
     * Reads {@code dstA.length} bytes at {@code ptrA} into {@code dstA}, then
     * {@code dstB.length} bytes at {@code ptrB} into {@code dstB}: the second read runs
     * after the first has read, so it sees every write the first saw (and maybe later
     * ones) — what a reader needs that checks a word and then the data it guards. When
     * both pointers are on one node, the pair costs one round trip on a network path (one
     * tcp lane call, or two verbs posted in issue order on one connection); on a memory
     * path the two reads run one after the other. Pointers on two nodes are read one
     * after the other.
     *
     * <p>With replication the pair needs one connection to the node serving both pointers'
     * groups: when they route to two nodes (or one of them is held while its group
     * promotes) the second read is issued after the first completed (two round trips,
     * the same order). On a posted path to a replicated group, too, the second read waits
     * for the first: a first read refused by a node that stopped being primary is re-issued,
     * and must not land after the second.
     *
     * @throws io.membus.core.error.DsmException the first failure (the first read's when both fail)
     */
    public void readInOrder(long ptrA, byte[] dstA, long ptrB, byte[] dstB) {
        int routeA = route(ptrA);
        if (routeA != route(ptrB) || routeA == HELD) {
            read(ptrA, dstA, 0, dstA.length);
            read(ptrB, dstB, 0, dstB.length);
            return;
        }
        BlockingVerbs direct = direct(ptrA);
        if (direct != null) {
            try {
                direct.readInOrder(ptrA, directKey(ptrA), dstA, dstA.length, ptrB, directKey(ptrB), dstB, dstB.length);
                awaitGate(direct, ptrA);
                awaitGate(direct, ptrB);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptrA); // refused before any effect: posted below with the directory's keys
                forgetKey(ptrB);
            }
        }
        long until = OperationDeadline.until(System.nanoTime(), timeoutNanos); // one deadline for the pair
        if (replicated) { // a re-issued first read could land after the second: one after the other
            System.arraycopy(awaitUntil(readAsync(ptrA, dstA.length), until), 0, dstA, 0, dstA.length);
            System.arraycopy(awaitUntil(readAsync(ptrB, dstB.length), until), 0, dstB, 0, dstB.length);
            return;
        }
        CompletableFuture<byte[]> a = readAsync(ptrA, dstA.length); // one connection runs them in issue order
        CompletableFuture<byte[]> b = readAsync(ptrB, dstB.length);
        System.arraycopy(awaitUntil(a, until), 0, dstA, 0, dstA.length);
        System.arraycopy(awaitUntil(b, until), 0, dstB, 0, dstB.length);
    }

    /**
     * Writes {@code src} at {@code ptrW} and then, only if the write succeeded,
     * compare-and-swaps the word at {@code ptrC} from {@code expected} to {@code update}:
     * the swap is ordered after the write and never runs without it (fill, then publish).
     * When both pointers are in one segment and a tcp lane is free, the pair costs one
     * round trip (the CAS travels LINKED to its write); otherwise the write completes
     * before the CAS is issued. With replication both pointers of one segment are in one
     * replica group, so they route to one primary; pointers of two segments (two groups,
     * maybe two primaries) always take the second form: the write, then the CAS.
     *
     * @return the word the CAS found (equal to {@code expected} when it swapped)
     * @throws io.membus.core.error.DsmException the write's failure (its CAS was not run), or the CAS's
     */
    public long writeThenCompareAndSwap(long ptrW, byte[] src, long ptrC, long expected, long update) {
        if (RemotePtr.nodeId(ptrW) == RemotePtr.nodeId(ptrC)
                && RemotePtr.segmentIndex(ptrW) == RemotePtr.segmentIndex(ptrC)) {
            BlockingVerbs direct = direct(ptrW);
            if (direct != null) {
                long key = directKey(ptrW); // one segment, one key: a stale key refuses the write, so the CAS never ran
                try {
                    long found = direct.writeThenCompareAndSwap(ptrW, key, src, 0, src.length, ptrC, key, expected,
                            update);
                    awaitGate(direct, ptrC);
                    return found;
                } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                    forgetKey(ptrW); // refused before any effect: both again below with the directory's key
                }
            }
        }
        write(ptrW, src);
        return compareAndSwap(ptrC, expected, update);
    }

    /**
     * Reads {@code length} bytes at {@code ptr} into native memory at {@code address}
     * (the caller owns {@code length} bytes there: a direct buffer's, a Chronicle native
     * store's). On a memory path the bytes are copied once, segment to destination; over
     * a tcp lane once from the answer; on a posted path through the verb's result.
     */
    public void readToAddress(long ptr, long address, int length) {
        checkNative(address, length);
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.readToAddress(ptr, directKey(ptr), address, length);
                awaitGate(direct, ptr);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        byte[] b = awaitVerb(readAsync(ptr, length));
        NATIVE.copyMemory(b, 0, address, length);
    }

    /** Writes {@code length} bytes of native memory at {@code address} to {@code ptr} (see {@link #readToAddress}). */
    public void writeFromAddress(long ptr, long address, int length) {
        checkNative(address, length);
        BadLengthException bad = SegmentTable.lengthError(ptr, length); // before the posted path's copy
        if (bad != null) {
            throw bad;
        }
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.writeFromAddress(ptr, directKey(ptr), address, length);
                awaitGate(direct, ptr);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        byte[] b = new byte[length];
        NATIVE.copyMemory(address, b, BYTE_ARRAY_BASE, length);
        awaitVerb(writeAsync(ptr, b));
    }

    /**
     * Reads {@code dst.remaining()} bytes at {@code ptr} into {@code dst} at its position,
     * then advances the position. A direct buffer is filled through its address
     * ({@link #readToAddress}), a heap one through its array: no intermediate copy on a
     * memory path or a tcp lane.
     *
     * @throws java.nio.ReadOnlyBufferException when {@code dst} is read-only
     */
    public void read(long ptr, java.nio.ByteBuffer dst) {
        if (dst.isReadOnly()) {
            throw new java.nio.ReadOnlyBufferException();
        }
        int n = dst.remaining();
        if (dst.isDirect()) {
            readToAddress(ptr, net.openhft.chronicle.core.Jvm.address(dst) + dst.position(), n);
        } else {
            read(ptr, dst.array(), dst.arrayOffset() + dst.position(), n);
        }
        dst.position(dst.position() + n);
    }

    /** Writes {@code src.remaining()} bytes of {@code src} from its position to {@code ptr}, then advances the position. */
    public void write(long ptr, java.nio.ByteBuffer src) {
        int n = src.remaining();
        if (src.isDirect()) {
            writeFromAddress(ptr, net.openhft.chronicle.core.Jvm.address(src) + src.position(), n);
        } else if (src.hasArray()) {
            write(ptr, src.array(), src.arrayOffset() + src.position(), n);
        } else { // a read-only heap buffer hides its array
            byte[] b = new byte[n];
            src.duplicate().get(b);
            write(ptr, b, 0, n);
        }
        src.position(src.position() + n);
    }

    private static final net.openhft.chronicle.core.UnsafeMemory NATIVE = net.openhft.chronicle.core.UnsafeMemory.MEMORY;
    private static final long BYTE_ARRAY_BASE = net.openhft.chronicle.core.UnsafeMemory.UNSAFE.arrayBaseOffset(
            byte[].class);

    private static void checkNative(long address, int length) {
        if (length < 0 || (address == 0 && length > 0)) {
            throw new IllegalArgumentException("native range invalid: address=" + address + ", length=" + length
                    + "; pass the address of memory you own (a direct buffer's, a native store's)");
        }
    }

    /** Reads the little-endian word at {@code ptr}. */
    public long readLong(long ptr) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                long v = direct.readLong(ptr, directKey(ptr));
                awaitGate(direct, ptr);
                return v;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        return Words.getLong(awaitVerb(readAsync(ptr, Long.BYTES)), 0);
    }

    public void write(long ptr, byte[] src) {
        write(ptr, src, 0, src.length);
    }

    public void write(long ptr, byte[] src, int offset, int length) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
            if (badRange != null) {
                throw badRange;
            }
            try {
                direct.write(ptr, directKey(ptr), src, offset, length);
                awaitGate(direct, ptr);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        awaitVerb(writeAsync(ptr, src, offset, length));
    }

    /** Writes the little-endian word at {@code ptr}. */
    public void writeLong(long ptr, long value) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                direct.writeLong(ptr, directKey(ptr), value);
                awaitGate(direct, ptr);
                return;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        byte[] b = new byte[Long.BYTES];
        Words.putLong(b, 0, value);
        awaitVerb(writeAsync(ptr, b));
    }

    public long compareAndSwap(long ptr, long expected, long update) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                long v = direct.compareAndSwap(ptr, directKey(ptr), expected, update);
                awaitGate(direct, ptr);
                return v;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        return awaitVerb(compareAndSwapAsync(ptr, expected, update));
    }

    public long fetchAndAdd(long ptr, long delta) {
        BlockingVerbs direct = direct(ptr);
        if (direct != null) {
            try {
                long v = direct.fetchAndAdd(ptr, directKey(ptr), delta);
                awaitGate(direct, ptr);
                return v;
            } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
                forgetKey(ptr);
            }
        }
        return awaitVerb(fetchAndAddAsync(ptr, delta));
    }

    /**
     * Whether a blocking verb on {@code ptr} would run on the caller's thread now (a
     * memory path: this node's segments, or a direct connection with no fault rule and
     * nothing held). Callers that would pipeline verbs to save round trips may issue
     * them one by one instead: on such a path there is no round trip to save.
     */
    public boolean runsDirect(long ptr) {
        return direct(ptr) instanceof SegmentTable;
    }

    /**
     * Where a blocking verb on {@code ptr} may run now, on the caller's thread: this
     * node's segments (when its local atomics are coherent with peers' verbs), a live
     * member's through its open direct connection with no fault rule and nothing held
     * (a verb run on a {@link SegmentTable} never waits, so it is allowed on a transport
     * thread too), or the blocking lane of its connection ({@link Connection#blockingNow()});
     * else null: post the verb and wait.
     */
    private BlockingVerbs direct(long ptr) {
        if (transport.isClosed()) {
            throw closedException();
        }
        int node = RemotePtr.nodeId(ptr);
        if (replicated && ptr != RemotePtr.NULL) {
            node = routeGroup(ptr, node); // the group's primary; a lost group throws here
            if (node == HELD) {
                return null; // the posted path holds it
            }
        }
        if (node == transport.nodeId()) {
            return ptr != RemotePtr.NULL && transport.localAtomicsCoherent() ? transport.table() : null;
        }
        OperationDeadline.check("verb on " + RemotePtr.toString(ptr), node, operationTimeout); // never sent late
        if (node <= 0 || node >= connections.length() || openingCount.get() != 0) {
            return null;
        }
        Connection c = connections.get(node);
        if (c == null || !c.isOpen() || c.peer().incarnation() != memberIncarnation(node)) {
            c = connectNow(node);
            if (c == null) {
                return null;
            }
        }
        return c.blockingNow();
    }

    /**
     * The remote key of {@code ptr}'s segment for a direct verb: this node's own from its
     * table; a peer's from a cache of the directory's descriptors (the directory's lookup
     * boxes its key), kept per node and segment while the descriptor's incarnation is the
     * connection's. A key gone stale (the segment was exported again) is refused by the
     * target's check before any effect; the caller then forgets it and posts the verb
     * with the directory's key.
     */
    private long directKey(long ptr) {
        int node = RemotePtr.nodeId(ptr);
        int index = RemotePtr.segmentIndex(ptr);
        int target = node;
        if (replicated) { // the cache stays per logical segment (the key is the group's); checked against the primary
            target = routeGroup(ptr, node);
            if (target == HELD || target == transport.nodeId()) {
                return keyOf(ptr);
            }
        }
        if (node == transport.nodeId()) {
            return keyOf(ptr);
        }
        SegmentDescriptor[] known = descriptors.get(node);
        if (known == null) {
            known = new SegmentDescriptor[RemotePtr.MAX_SEGMENT_INDEX + 1];
            if (!descriptors.compareAndSet(node, null, known)) {
                known = descriptors.get(node);
            }
        }
        SegmentDescriptor d = known[index];
        Connection c = connections.get(target);
        if (d == null || c == null || d.incarnation() != c.peer().incarnation()) {
            d = segmentOf(ptr);
            known[index] = d; // a racy cache of immutable records: a lost store only costs a lookup
        }
        return d.remoteKey();
    }

    private void forgetKey(long ptr) {
        SegmentDescriptor[] known = descriptors.get(RemotePtr.nodeId(ptr));
        if (known != null) {
            known[RemotePtr.segmentIndex(ptr)] = null;
        }
    }

    /** The incarnation of live member {@code node}, or -1. */
    private long memberIncarnation(int node) {
        PeerInfo p = directory.member(node).orElse(null);
        return p == null ? -1 : p.incarnation();
    }

    /** The open connection to live member {@code node} when the transport has one ready now (cached), else null. */
    private Connection connectNow(int node) {
        PeerInfo peer = directory.member(node).orElse(null);
        if (peer == null) {
            return null;
        }
        CompletableFuture<Connection> f = transport.connect(peer);
        if (!f.isDone() || f.isCompletedExceptionally()) {
            return null;
        }
        Connection c = f.join();
        connections.set(node, c);
        return c;
    }

    /**
     * Waits for a verb's future (bounded by the operation timeout plus a margin) and
     * returns its value, rethrowing a failure as its typed {@link DsmException}.
     */
    public <T> T await(CompletableFuture<T> future) {
        if (OperationDeadline.active()) {
            long left = Math.max(0, OperationDeadline.remainingNanos(syncWait.toNanos()))
                    + OperationDeadline.VERB_GRACE_NANOS;
            return await(future, Duration.ofNanos(Math.min(left, syncWait.toNanos())));
        }
        return await(future, syncWait);
    }

    /**
     * Waits for a blocking verb issued now: until its operation timeout from now (or the
     * thread's {@link OperationDeadline}, if earlier) plus {@link OperationDeadline#VERB_GRACE},
     * the time the transport gets to report the verb's own outcome first.
     */
    private <T> T awaitVerb(CompletableFuture<T> future) {
        return awaitUntil(future, OperationDeadline.until(System.nanoTime(), timeoutNanos));
    }

    private <T> T awaitUntil(CompletableFuture<T> future, long until) {
        if (future.isDone()) {
            return await(future, Duration.ZERO);
        }
        long left = Math.max(0, until - System.nanoTime()) + OperationDeadline.VERB_GRACE_NANOS;
        try {
            return await(future, Duration.ofNanos(left));
        } catch (DsmTimeoutException e) {
            DsmTimeoutException notSent = future instanceof RoutedFuture<?> routed ? routed.withdraw() : null;
            throw notSent != null ? notSent : e; // still held (the timer thread was late): it never ran
        }
    }

    /**
     * Waits at most {@code wait} for {@code future}. A failure is rethrown as its typed
     * {@link DsmException} with the caller's stack ({@link DsmException#forCaller()}:
     * the exception the transport thread threw is the cause); a wait that outlasts
     * {@code wait} (a transport that did not enforce its own deadline) is a
     * {@link DsmTimeoutException}.
     *
     * <p>The wait is not interruptible: a verb in flight may already have run at its
     * target (a CAS that claimed something), so abandoning it would leave the caller
     * not knowing what happened. An interrupt that arrives during the wait is kept
     * (the thread's interrupt status is set again when this returns or throws), and
     * the wait stays bounded by {@code wait}; interruptible callers check the status
     * where stopping is safe, between verbs.
     *
     * @throws BlockingCallOnTransportThreadException when called on a transport thread,
     *         where waiting could deadlock (unless the future is already complete)
     */
    public static <T> T await(CompletableFuture<T> future, Duration wait) {
        if (!future.isDone() && TransportThreads.isTransportThread()) {
            throw new BlockingCallOnTransportThreadException(Thread.currentThread().getName());
        }
        long deadline = System.nanoTime() + wait.toNanos();
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return future.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (InterruptedException e) {
                    interrupted = true; // get() cleared the status: wait on for the verb, set it again after
                }
            }
        } catch (ExecutionException | CompletionException e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            if (cause instanceof DsmException de) {
                throw de.forCaller();
            }
            if (cause instanceof RuntimeException re) {
                throw re;
            }
            throw DsmException.internal("operation failed: " + cause, cause);
        } catch (TimeoutException e) {
            // the call's deadline passed while the verb was issued: it may still run
            throw new DsmTimeoutException("await (the call's deadline passed with the verb issued)", -1, wait);
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * This node's own segments (and the replica groups it serves as primary), run on the
     * caller's thread with the verb checks. A verb of a replicated group completes once
     * the group's {@link AckGate} says every in-sync copy has what it changed or saw
     * ({@link #gated}); with no gate its future is complete when the method returns.
     */
    private final class LocalVerbs implements Verbs {
        @Override
        public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
            try {
                return gated(ptr, transport.table().read(ptr, remoteKey, length));
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
        }

        @Override
        public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
            try {
                transport.table().write(ptr, remoteKey, src, offset, length);
                return gated(ptr, null);
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
        }

        @Override
        public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
            try {
                return gated(ptr, transport.table().compareAndSwap(ptr, remoteKey, expected, update));
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
        }

        @Override
        public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
            try {
                return gated(ptr, transport.table().fetchAndAdd(ptr, remoteKey, delta));
            } catch (RuntimeException e) {
                return CompletableFuture.failedFuture(e);
            }
        }
    }

    /**
     * The future of a verb that ran on this node's table with result {@code value}:
     * complete now when the pointer's segment is not replicated here or its group already
     * acknowledged what the verb may have changed or seen ({@link AckGate#need()} read after
     * the verb ran); else completed by {@link AckGate#whenAcked}, with the failure it reports.
     */
    private <T> CompletableFuture<T> gated(long ptr, T value) {
        AckGate gate = transport.table().gate(ptr);
        if (gate == null) {
            return CompletableFuture.completedFuture(value);
        }
        long need = gate.need();
        if (gate.acked(need)) {
            return CompletableFuture.completedFuture(value);
        }
        CompletableFuture<T> result = new CompletableFuture<>();
        gate.whenAcked(need, failure -> {
            if (failure == null) {
                result.complete(value);
            } else {
                result.completeExceptionally(failure);
            }
        });
        return result;
    }

    /**
     * After a blocking verb ran on a {@link SegmentTable} on this thread (this node's own, or
     * a target's through a direct connection): waits until the group acknowledged it, by the
     * call's deadline ({@link AckGate#await}). Nothing when the table has no gate for it.
     * On a transport thread, where it must not wait, a pending acknowledgement fails the
     * call with {@link DsmTimeoutException} whose {@code mayHaveRun()} is true (the verb ran).
     */
    private void awaitGate(BlockingVerbs ran, long ptr) {
        if (!(ran instanceof SegmentTable table)) {
            return; // a tcp lane: the target answered after its copies acked
        }
        AckGate gate = table.gate(ptr);
        if (gate == null) {
            return;
        }
        long need = gate.need();
        if (gate.acked(need)) {
            return;
        }
        if (TransportThreads.isTransportThread()) { // the verb ran: not "not run" (BlockingCallOnTransportThread)
            throw new DsmTimeoutException("verb on " + RemotePtr.toString(ptr) + " ran, but waiting for its replica"
                    + " group's copies to acknowledge it would block transport thread " + Thread.currentThread().getName(),
                    transport.nodeId(), Duration.ZERO, "call the *Async form on a transport thread; its future completes"
                    + " once the copies acknowledged");
        }
        try {
            gate.await(need, OperationDeadline.until(System.nanoTime(), timeoutNanos));
        } catch (NotPrimaryException e) { // the verb ran: its outcome is unknown, never "not sent" (no re-post)
            throw new NodeUnavailableException(e.nodeId(), "the replica group stopped being served here before the"
                    + " verb on " + RemotePtr.toString(ptr) + " was acknowledged by its copies", e);
        }
    }
}
