package io.membus.core.transport;

import io.membus.core.OpenResources;
import io.membus.core.directory.PeerInfo;
import io.membus.core.error.NodeUnavailableException;

import io.membus.core.fault.FaultInjector;
import io.membus.core.time.Deadlines;
import io.membus.core.transport.pipeline.Verb;
import io.membus.core.transport.pipeline.VerbPipeline;
import io.membus.core.transport.pipeline.Wire;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * A connection whose verbs are memory operations the initiator runs itself on
 * the target's {@link SegmentTable} (the {@code local} transport, and {@code shm}
 * on its mapping of the target's files): one-sided by construction.
 *
 * <p>Verbs run on the calling thread and their futures are complete when the
 * method returns, so issue order is completion order. With an injected fault,
 * or while an earlier verb is still held by one, the verb goes through the
 * connection's {@link VerbPipeline} (the one in-order engine every transport
 * uses): held until its release (delay; released by the wheel thread, which
 * then runs it) or never run (drop), every later verb queued behind held ones,
 * so the order holds; the deadline then applies. Outcomes are reported to the
 * transport's {@link VerbObserver} on both paths.
 *
 * <p><b>Note:</b> thread-safe.
 */
public abstract class DirectConnection implements Connection {
    private final PeerInfo peer;
    private final FaultInjector faults;
    private final VerbObserver observer;
    private final VerbPipeline<Verb> pipeline;
    private final Duration operationTimeout;
    private volatile boolean open = true;
    private volatile String closeReason = "connection closed";
    /** This connection's entry in {@link OpenResources#CONNECTIONS}, removed by {@link #close(String)}. */
    private final long openId;

    protected DirectConnection(PeerInfo peer, FaultInjector faults, Duration operationTimeout) {
        this(peer, faults, operationTimeout, VerbObserver.NONE);
    }

    protected DirectConnection(PeerInfo peer, FaultInjector faults, Duration operationTimeout,
                               VerbObserver observer) {
        this.peer = peer;
        this.faults = faults;
        this.observer = observer;
        this.operationTimeout = operationTimeout;
        this.pipeline = new VerbPipeline<>(peer.nodeId(), operationTimeout, Integer.MAX_VALUE, observer,
                new Wire<>() {
                    @Override
                    public boolean post(Verb v) {
                        runHeld(v);
                        return true;
                    }
                }, true);
        this.openId = OpenResources.CONNECTIONS.opened(getClass().getSimpleName() + " to " + peer);
    }

    /**
     * The target's segments, once the target was checked to be reachable by this
     * initiator now.
     *
     * @throws NodeUnavailableException when the target is gone or fenced
     */
    protected abstract SegmentTable target();

    /** The rule the target applies to verbs from this node, or {@code null}. */
    protected FaultInjector.Rule targetRule() {
        return null;
    }

    /**
     * The target's segments when a verb may run on the caller's thread right now — the
     * connection is open, no fault rule applies and no verb is held — else null (then
     * post the verb). What {@link io.membus.core.RemoteMemory}'s blocking calls use to run
     * a verb with no future, no lambda and no result array.
     */
    public SegmentTable tableNow() {
        if (!open || faults.active() || pipeline.pending() > 0 || targetRule() != null) {
            return null;
        }
        try {
            return target();
        } catch (RuntimeException e) {
            return null; // the posted verb fails with the typed reason (and closes the connection)
        }
    }

    /** The target's segments, when a verb may run on them on the caller's thread now ({@link #tableNow()}). */
    @Override
    public BlockingVerbs blockingNow() {
        return tableNow();
    }

    /** Verbs held by a fault rule or waiting behind one, and their count on the way (for a metrics gauge). */
    public int backlog() {
        return pipeline.backlog();
    }

    /** Verbs of this connection not yet completed: held, dropped and waiting for their deadline (for a gauge). */
    @Override
    public int inFlight() {
        return pipeline.pending();
    }

    @Override
    public PeerInfo peer() {
        return peer;
    }

    @Override
    public boolean isOpen() {
        return open;
    }

    @Override
    public void close(String reason) {
        synchronized (this) {
            if (!open) {
                return; // the first reason stays
            }
            closeReason = reason;
            open = false;
        }
        OpenResources.CONNECTIONS.closed(openId);
        // held verbs never ran: they fail as not sent, as do verbs issued from now on
        NodeUnavailableException e = NodeUnavailableException.notSent(peer.nodeId(), reason);
        pipeline.close(e, e, () -> NodeUnavailableException.notSent(peer.nodeId(), reason));
    }

    @Override
    public void close() {
        close("connection closed");
    }

    @Override
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        if (direct()) {
            long t0 = startTime();
            try {
                SegmentTable t = target();
                byte[] r = t.readNoWait(ptr, remoteKey, length);
                observed(VerbObserver.READ, length, t0);
                return acked(t, ptr, r);
            } catch (RuntimeException e) {
                return failed(VerbObserver.READ, e);
            }
        }
        return posted(new Verb(VerbObserver.READ, ptr, remoteKey, length, 0, 0, null, 0));
    }

    @Override
    public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
        if (badRange != null) {
            return CompletableFuture.failedFuture(badRange);
        }
        if (direct()) {
            long t0 = startTime();
            try {
                SegmentTable t = target();
                t.writeNoWait(ptr, remoteKey, src, offset, length);
                observed(VerbObserver.WRITE, length, t0);
                return acked(t, ptr, null);
            } catch (RuntimeException e) {
                return failed(VerbObserver.WRITE, e);
            }
        }
        // the bytes must be copied now: the caller may reuse its buffer once write returns
        byte[] copy = java.util.Arrays.copyOfRange(src, offset, offset + length);
        return posted(new Verb(VerbObserver.WRITE, ptr, remoteKey, length, 0, 0, copy, 0));
    }

    @Override
    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        if (direct()) {
            long t0 = startTime();
            try {
                SegmentTable t = target();
                long old = t.compareAndSwapNoWait(ptr, remoteKey, expected, update);
                observed(VerbObserver.CAS, 8, t0);
                return acked(t, ptr, old);
            } catch (RuntimeException e) {
                return failed(VerbObserver.CAS, e);
            }
        }
        return posted(new Verb(VerbObserver.CAS, ptr, remoteKey, 8, expected, update, null, 0));
    }

    @Override
    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
        if (direct()) {
            long t0 = startTime();
            try {
                SegmentTable t = target();
                long old = t.fetchAndAddNoWait(ptr, remoteKey, delta);
                observed(VerbObserver.FAA, 8, t0);
                return acked(t, ptr, old);
            } catch (RuntimeException e) {
                return failed(VerbObserver.FAA, e);
            }
        }
        return posted(new Verb(VerbObserver.FAA, ptr, remoteKey, 8, delta, 0, null, 0));
    }

    @Override
    public void compareAndSwap(long ptr, long remoteKey, long expected, long update, LongCompletion done) {
        if (direct()) {
            long t0 = startTime();
            long old;
            SegmentTable t;
            try {
                t = target();
                old = t.compareAndSwapNoWait(ptr, remoteKey, expected, update);
                observed(VerbObserver.CAS, 8, t0);
            } catch (RuntimeException e) {
                done.completed(0, failure(VerbObserver.CAS, e));
                return;
            }
            ackedLong(t, ptr, old, done);
            return;
        }
        issue(new Verb(VerbObserver.CAS, ptr, remoteKey, 8, expected, update, null, 0, done));
    }

    @Override
    public void fetchAndAdd(long ptr, long remoteKey, long delta, LongCompletion done) {
        if (direct()) {
            long t0 = startTime();
            long old;
            SegmentTable t;
            try {
                t = target();
                old = t.fetchAndAddNoWait(ptr, remoteKey, delta);
                observed(VerbObserver.FAA, 8, t0);
            } catch (RuntimeException e) {
                done.completed(0, failure(VerbObserver.FAA, e));
                return;
            }
            ackedLong(t, ptr, old, done);
            return;
        }
        issue(new Verb(VerbObserver.FAA, ptr, remoteKey, 8, delta, 0, null, 0, done));
    }

    @Override
    public Batch batch() {
        return new DeferredBatch(this);
    }

    /**
     * The future of a verb that ran on {@code t}: complete now when {@code ptr}'s segment is
     * not replicated there or every in-sync copy has what the verb changed or saw, else when
     * the group's acknowledgement comes (or fails), within the operation timeout.
     */
    private <T> CompletableFuture<T> acked(SegmentTable t, long ptr, T value) {
        return Deadlines.within(t.acked(ptr, value), operationTimeout,
                "replicated verb (waiting for the copies of its segment)", peer.nodeId());
    }

    /** {@link #acked} for an atomic completing into a {@link LongCompletion}. */
    private void ackedLong(SegmentTable t, long ptr, long old, LongCompletion done) {
        acked(t, ptr, old).whenComplete((v, e) -> done.completed(e == null ? v : 0, e == null ? null
                : e instanceof java.util.concurrent.CompletionException && e.getCause() != null ? e.getCause() : e));
    }

    /** Whether a verb runs on the calling thread now: open, no fault rule, nothing held or on the way. */
    private boolean direct() {
        return open && !faults.active() && pipeline.pending() == 0 && targetRule() == null;
    }

    /** The clock at a direct verb's start, read only when an observer wants latencies. */
    private long startTime() {
        return observer == VerbObserver.NONE ? 0 : System.nanoTime();
    }

    private void observed(int kind, int bytes, long startNanos) {
        if (observer != VerbObserver.NONE) {
            observer.completed(peer.nodeId(), kind, bytes, System.nanoTime() - startNanos);
        }
    }

    private <T> CompletableFuture<T> failed(int kind, RuntimeException e) {
        return CompletableFuture.failedFuture(failure(kind, e));
    }

    private RuntimeException failure(int kind, RuntimeException e) {
        if (observer != VerbObserver.NONE) {
            observer.failed(peer.nodeId(), kind);
        }
        if (e instanceof NodeUnavailableException) {
            close(e.getMessage()); // the target is gone: later verbs fail at once, and connect() opens anew
        }
        return e;
    }

    private <T> CompletableFuture<T> posted(Verb v) {
        issue(v);
        return v.future();
    }

    private void issue(Verb v) {
        // closed: the pipeline is closed too (or is being closed) and fails the verb as not sent
        pipeline.issue(v, FaultInjector.hold(faults.active() ? faults.rule(peer.nodeId()) : null, targetRule()));
    }

    /** Completes a released verb now, or when its replica group acknowledges what it changed or saw. */
    private void completeAcked(SegmentTable t, Verb v, Object value, long word, boolean isLong) {
        io.membus.core.replication.AckGate g = t.gate(v.ptr);
        long need = g == null ? 0 : g.need();
        if (g == null || g.acked(need)) {
            if (isLong) {
                pipeline.completeLong(v, word);
            } else {
                pipeline.complete(v, value);
            }
            return;
        }
        g.whenAcked(need, failure -> {
            if (failure != null) {
                pipeline.fail(v, failure);
            } else if (isLong) {
                pipeline.completeLong(v, word);
            } else {
                pipeline.complete(v, value);
            }
        });
    }

    /** Runs a verb the pipeline releases (under its lock, in issue order), and reports its outcome. */
    private void runHeld(Verb v) {
        SegmentTable t;
        try {
            t = target();
            switch (v.kind) {
                case VerbObserver.READ -> completeAcked(t, v, t.readNoWait(v.ptr, v.remoteKey, v.length), 0, false);
                case VerbObserver.WRITE -> {
                    t.writeNoWait(v.ptr, v.remoteKey, v.data, v.dataOffset, v.length);
                    completeAcked(t, v, null, 0, false);
                }
                case VerbObserver.CAS -> completeAcked(t, v, null,
                        t.compareAndSwapNoWait(v.ptr, v.remoteKey, v.a, v.b), true);
                default -> completeAcked(t, v, null, t.fetchAndAddNoWait(v.ptr, v.remoteKey, v.a), true);
            }
        } catch (NodeUnavailableException e) {
            pipeline.fail(v, e);
            close(e.getMessage()); // later held verbs fail as not sent
        } catch (RuntimeException e) {
            pipeline.fail(v, e);
        }
    }
}
