package io.membus.core.transport;

import io.membus.core.error.NodeUnavailableException;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * A connection whose verbs are memory operations the initiator runs itself on
 * the target's {@link SegmentTable} (the {@code local} transport, and {@code shm}
 * on its mapping of the target's files): one-sided by construction.
 *
 * <p>Verbs run on the calling thread and their futures are complete when the
 * method returns, so issue order is completion order. With an injected fault
 * the verb is instead held on the timer thread (delay) or never run (drop), and
 * every later verb on the connection queues behind held ones, so the order holds;
 * the deadline then applies.
 *
 * <p><b>Note:</b> thread-safe.
 */
public abstract class DirectConnection implements Connection {
    private final PeerInfo peer;
    private final FaultInjector faults;
    private final Duration operationTimeout;
    private final Object delayLock = new Object();
    private volatile boolean open = true;
    private volatile String closeReason = "connection closed";
    private volatile int held; // verbs held on the timer; written under delayLock
    private long lastRelease; // nanoTime the last held verb runs at, guarded by delayLock
    private final java.util.ArrayDeque<Held> heldVerbs = new java.util.ArrayDeque<>(); // guarded by delayLock

    protected DirectConnection(PeerInfo peer, FaultInjector faults, Duration operationTimeout) {
        this.peer = peer;
        this.faults = faults;
        this.operationTimeout = operationTimeout;
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
        if (!open || faults.active() || held > 0 || targetRule() != null) {
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

    @Override
    public PeerInfo peer() {
        return peer;
    }

    @Override
    public boolean isOpen() {
        return open;
    }

    @Override
    public synchronized void close(String reason) {
        if (!open) {
            return; // the first reason stays
        }
        closeReason = reason;
        open = false;
    }

    @Override
    public void close() {
        close("connection closed");
    }

    @Override
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        return run("read", () -> target().read(ptr, remoteKey, length));
    }

    @Override
    public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
        if (badRange != null) {
            return CompletableFuture.failedFuture(badRange);
        }
        if (faults.active() || held > 0) {
            // the bytes must be copied now: the caller may reuse its buffer once write returns
            byte[] copy = java.util.Arrays.copyOfRange(src, offset, offset + length);
            return run("write", () -> {
                target().write(ptr, remoteKey, copy, 0, length);
                return null;
            });
        }
        return run("write", () -> {
            target().write(ptr, remoteKey, src, offset, length);
            return null;
        });
    }

    @Override
    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        return run("compareAndSwap", () -> target().compareAndSwap(ptr, remoteKey, expected, update));
    }

    @Override
    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
        return run("fetchAndAdd", () -> target().fetchAndAdd(ptr, remoteKey, delta));
    }

    @Override
    public Batch batch() {
        return new DeferredBatch(this);
    }

    private <T> CompletableFuture<T> run(String operation, Supplier<T> verb) {
        if (!open) {
            return CompletableFuture.failedFuture(NodeUnavailableException.notSent(peer.nodeId(), closeReason));
        }
        if (faults.active() || held > 0 || targetRule() != null) {
            return runWithFaults(operation, verb);
        }
        return execute(verb);
    }

    private <T> CompletableFuture<T> execute(Supplier<T> verb) {
        try {
            return CompletableFuture.completedFuture(verb.get());
        } catch (NodeUnavailableException e) {
            close(e.getMessage()); // the target is gone: later verbs fail at once, and connect() opens anew
            return CompletableFuture.failedFuture(e);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private <T> CompletableFuture<T> runWithFaults(String operation, Supplier<T> verb) {
        FaultInjector.Rule mine = faults.rule(peer.nodeId());
        FaultInjector.Rule theirs = targetRule();
        CompletableFuture<T> future = new CompletableFuture<>();
        Deadlines.within(future, operationTimeout, operation, peer.nodeId());
        if ((mine != null && mine.drop()) || (theirs != null && theirs.drop())) {
            return future; // never executed, never answered: the deadline fires
        }
        long delay = (mine != null ? mine.delayNanos() : 0) + (theirs != null ? theirs.delayNanos() : 0);
        synchronized (delayLock) {
            if (delay == 0 && held == 0) {
                return execute(verb);
            }
            long release = Math.max(System.nanoTime() + delay, lastRelease);
            lastRelease = release;
            held++;
            heldVerbs.add(new Held(release, () -> {
                if (future.isDone()) {
                    return; // timed out while held: never executed
                }
                if (!open) {
                    future.completeExceptionally(NodeUnavailableException.notSent(peer.nodeId(), closeReason));
                    return;
                }
                execute(verb).whenComplete((v, e) -> {
                    if (e != null) {
                        future.completeExceptionally(e);
                    } else {
                        future.complete(v);
                    }
                });
            }));
            Deadlines.schedule(this::releaseDue, release - System.nanoTime());
        }
        return future;
    }

    /**
     * Runs, on the timer thread and in issue order, every held verb whose release
     * time has come. Release times never decrease along the queue, so the head is
     * always the next verb due.
     */
    private void releaseDue() {
        while (true) {
            Held next;
            synchronized (delayLock) {
                next = heldVerbs.peek();
                if (next == null || next.release - System.nanoTime() > 0) {
                    return;
                }
                heldVerbs.poll();
            }
            try {
                next.run.run();
            } finally {
                // only after the verb ran: a verb that sees held == 0 cannot overtake it
                synchronized (delayLock) {
                    held--;
                }
            }
        }
    }

    private record Held(long release, Runnable run) {
    }
}
