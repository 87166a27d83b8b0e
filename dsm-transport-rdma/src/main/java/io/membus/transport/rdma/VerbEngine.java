package io.membus.transport.rdma;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.Deadlines;
import io.membus.core.transport.FaultInjector;
import net.openhft.chronicle.core.UnsafeMemory;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static io.membus.transport.rdma.SendWrLayout.IBV_WR_ATOMIC_CMP_AND_SWP;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_ATOMIC_FETCH_AND_ADD;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_RDMA_READ;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_RDMA_WRITE;

/**
 * Posts verbs on one {@link SendQueue} and completes their futures from its
 * completions: the work-request bookkeeping of one reliable connection.
 *
 * <h2>Work-request ids</h2>
 * Every work request gets the next sequence number as its {@code wr_id}; its slot is
 * {@code wr_id & (depth - 1)}. A reliable connection completes work requests in
 * posting order, so the completion expected next is always the oldest outstanding
 * sequence number: a completion with any other id is a protocol violation and
 * breaks the connection. A verb longer than one slot's staging buffer is posted as
 * consecutive work requests and completes with its last one.
 *
 * <h2>Backpressure and order</h2>
 * When the ring is full (or a verb ahead is held by an injected delay) verbs wait
 * in a FIFO backlog, posted as completions free slots; nothing blocks the caller.
 * Issue order is posting order is completion order.
 *
 * <h2>Failure</h2>
 * Each verb has a deadline from its issue ({@link Deadlines}). The first failed
 * completion fails its verb with the exception {@link CompletionErrors} maps it
 * to, and breaks the engine (the queue pair is in error state): every other verb
 * in flight or waiting fails with {@link NodeUnavailableException}, and so does
 * every verb issued later.
 *
 * <p><b>Note:</b> thread-safe: any thread may issue verbs; {@link #complete} is
 * called by the queue pair's one completion thread. State is guarded by one lock;
 * futures are completed outside it, in posting order, on the completion thread (or
 * the issuing thread when a verb fails before it is posted).
 */
public final class VerbEngine {
    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;
    private static final long BYTE_ARRAY_OFFSET = UnsafeMemory.UNSAFE.arrayBaseOffset(byte[].class);

    private final SendQueue queue;
    private final int peerNode;
    private final Duration timeout;
    private final FaultInjector faults;
    private final RemoteCatalog catalog;
    private final int mask;
    private final int stagingBytes;
    private final SendWrFlyweight flyweight = new SendWrFlyweight(); // guarded by lock
    private final Op[] slotOps;                                         // guarded by lock
    private final int[] slotParts;                                      // guarded by lock
    private final ArrayDeque<Op> backlog = new ArrayDeque<>();          // guarded by lock
    private final Object lock = new Object();
    private long nextSeq;       // guarded by lock
    private long completedSeq;  // guarded by lock
    private String brokenReason; // guarded by lock; null while healthy
    private boolean drainScheduled; // guarded by lock
    private volatile java.util.function.Consumer<String> brokenListener = reason -> { };

    /**
     * @param catalog the peer's catalog, to name the exact error of a refused verb (may be {@code null})
     */
    public VerbEngine(SendQueue queue, int peerNode, Duration timeout, FaultInjector faults, RemoteCatalog catalog) {
        int depth = queue.depth();
        if (depth < 1 || Integer.bitCount(depth) != 1) {
            throw new IllegalArgumentException("queue depth must be a power of two: depth=" + depth);
        }
        this.queue = queue;
        this.peerNode = peerNode;
        this.timeout = timeout;
        this.faults = faults;
        this.catalog = catalog;
        this.mask = depth - 1;
        this.stagingBytes = queue.stagingBytes();
        if (stagingBytes < Long.BYTES) {
            throw new IllegalArgumentException("staging buffers must hold a word: stagingBytes=" + stagingBytes);
        }
        this.slotOps = new Op[depth];
        this.slotParts = new int[depth];
    }

    /** Reads {@code length} bytes at {@code remoteAddress}; {@code ptr} and {@code remoteKey} name it in errors. */
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, long remoteAddress, int length) {
        Op op = new Op(IBV_WR_RDMA_READ, ptr, remoteKey, remoteAddress, length, new byte[length], 0, 0, 0);
        issue(op, "read");
        return op.typed();
    }

    /** Writes {@code src[offset..offset+length)} at {@code remoteAddress}; the bytes are copied before return. */
    public CompletableFuture<Void> write(long ptr, long remoteKey, long remoteAddress, byte[] src, int offset,
                                         int length) {
        Op op = new Op(IBV_WR_RDMA_WRITE, ptr, remoteKey, remoteAddress, length, src, offset, 0, 0);
        issue(op, "write");
        return op.typed();
    }

    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long remoteAddress, long expected,
                                                  long update) {
        Op op = new Op(IBV_WR_ATOMIC_CMP_AND_SWP, ptr, remoteKey, remoteAddress, Long.BYTES, null, 0, expected, update);
        issue(op, "compareAndSwap");
        return op.typed();
    }

    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long remoteAddress, long delta) {
        Op op = new Op(IBV_WR_ATOMIC_FETCH_AND_ADD, ptr, remoteKey, remoteAddress, Long.BYTES, null, 0, delta, 0);
        issue(op, "fetchAndAdd");
        return op.typed();
    }

    /**
     * Sets what runs (on the timer thread, after the queue pair is destroyed) when
     * the engine breaks: the connection closes itself so the next {@code connect}
     * opens a new one. Set before the first verb.
     */
    public void onBroken(java.util.function.Consumer<String> listener) {
        this.brokenListener = listener;
    }

    /** Verbs posted and not yet completed (for tests and status). */
    public int outstanding() {
        synchronized (lock) {
            return (int) (nextSeq - completedSeq);
        }
    }

    /** Verbs waiting for a free slot or an injected delay. */
    public int backlog() {
        synchronized (lock) {
            return backlog.size();
        }
    }

    /** Why the engine broke, or {@code null} while it is healthy. */
    public String brokenReason() {
        synchronized (lock) {
            return brokenReason;
        }
    }

    /** Fails every verb in flight or waiting, and every later verb, with {@link NodeUnavailableException}. */
    public void close(String reason) {
        List<Op> failed;
        synchronized (lock) {
            if (brokenReason != null) {
                return;
            }
            failed = breakLocked(reason);
        }
        NodeUnavailableException e = new NodeUnavailableException(peerNode, reason);
        failed.forEach(op -> op.future.completeExceptionally(e));
    }

    private void issue(Op op, String operation) {
        Deadlines.within(op.future, timeout, operation, peerNode);
        long notBefore = 0;
        if (faults != null && faults.active()) {
            FaultInjector.Rule rule = faults.rule(peerNode);
            if (rule != null && rule.drop()) {
                return; // never posted, never answered: the deadline fires
            }
            if (rule != null && rule.delayNanos() > 0) {
                notBefore = System.nanoTime() + rule.delayNanos();
            }
        }
        String broken;
        synchronized (lock) {
            broken = brokenReason;
            if (broken == null) {
                op.notBefore = notBefore;
                if (notBefore != 0 || !backlog.isEmpty() || !postLocked(op)) {
                    if (op.kind == IBV_WR_RDMA_WRITE) {
                        op.detach(); // the caller may reuse its buffer once write returns
                    }
                    backlog.add(op);
                    scheduleDrainLocked();
                }
            }
        }
        if (broken != null) {
            op.future.completeExceptionally(new NodeUnavailableException(peerNode, broken));
        }
    }

    /**
     * Posts as many parts of {@code op} as free slots allow.
     *
     * @return whether every part is posted
     */
    private boolean postLocked(Op op) {
        int parts = op.parts(stagingBytes);
        while (op.partsPosted < parts) {
            if (nextSeq - completedSeq > mask) {
                return false; // ring full
            }
            long seq = nextSeq;
            int slot = (int) seq & mask;
            int part = op.partsPosted;
            long partOffset = (long) part * stagingBytes;
            int partLength = (int) Math.min(stagingBytes, op.length - partOffset);
            long staging = queue.stagingAddress(slot);
            flyweight.wrap(queue.workRequestAddress(slot));
            switch (op.kind) {
                case IBV_WR_RDMA_READ -> flyweight.read(seq, staging, partLength, queue.localKey(),
                        op.remoteAddress + partOffset, CatalogEntry.rkeyOf(op.remoteKey));
                case IBV_WR_RDMA_WRITE -> {
                    if (partLength > 0) {
                        MEMORY.copyMemory(op.data, (int) (op.dataOffset + partOffset), staging, partLength);
                    }
                    flyweight.write(seq, staging, partLength, queue.localKey(), op.remoteAddress + partOffset,
                            CatalogEntry.rkeyOf(op.remoteKey));
                }
                case IBV_WR_ATOMIC_CMP_AND_SWP -> flyweight.compareAndSwap(seq, staging, queue.localKey(),
                        op.remoteAddress, CatalogEntry.rkeyOf(op.remoteKey), op.compareAdd, op.swap);
                default -> flyweight.fetchAndAdd(seq, staging, queue.localKey(), op.remoteAddress,
                        CatalogEntry.rkeyOf(op.remoteKey), op.compareAdd);
            }
            slotOps[slot] = op;
            slotParts[slot] = part;
            nextSeq++;
            op.partsPosted++;
            try {
                queue.post(slot);
            } catch (IOException | RuntimeException e) {
                nextSeq--; // never posted: no completion will come for it
                slotOps[slot] = null;
                op.partsPosted--;
                List<Op> failed = breakLocked("post failed: " + e.getMessage());
                failed.add(op);
                NodeUnavailableException ex = new NodeUnavailableException(peerNode, brokenReason, e);
                // completing under the lock is safe here: callbacks must not block (Verbs contract)
                failed.forEach(o -> o.future.completeExceptionally(ex));
                return true;
            }
        }
        return true;
    }

    /**
     * Reports the completion of work request {@code wrId}: called by the queue
     * pair's completion thread, in completion order.
     */
    public void complete(long wrId, int status, int vendorErr) {
        Op single = null;        // the common case: one verb completes; no list, no lambda
        Object singleValue = null;
        List<Runnable> done = null; // failures: every verb they fail, in posting order
        synchronized (lock) {
            if (wrId != completedSeq || completedSeq == nextSeq) {
                if (brokenReason == null) {
                    String reason = "unexpected completion: wrId=" + wrId + ", expected=" + completedSeq
                            + ", posted=" + nextSeq + ", status=" + WcStatus.name(status);
                    List<Op> failed = breakLocked(reason);
                    DsmException e = new DsmException(ErrorCode.INTERNAL, reason + "; the connection was closed");
                    done = new ArrayList<>(failed.size());
                    for (Op op : failed) {
                        done.add(() -> op.future.completeExceptionally(e));
                    }
                }
                // else: a flushed or late completion after the engine broke
                if (wrId == completedSeq && completedSeq < nextSeq) {
                    completedSeq++;
                }
            } else {
                int slot = (int) wrId & mask;
                Op op = slotOps[slot];
                int part = slotParts[slot];
                slotOps[slot] = null;
                completedSeq++;
                if (brokenReason != null) {
                    // failed already with the engine: nothing to deliver
                } else if (status != WcStatus.SUCCESS) {
                    // the queue pair is in error state now, even when this verb's deadline already fired
                    List<Op> failed = breakLocked("an earlier verb failed with " + WcStatus.name(status)
                            + " and the queue pair is in error state");
                    failed.remove(op);
                    NodeUnavailableException ne = new NodeUnavailableException(peerNode, brokenReason);
                    done = new ArrayList<>(failed.size() + 1);
                    if (!op.future.isDone()) {
                        DsmException e = CompletionErrors.toException(status, vendorErr, op.kind, op.ptr,
                                op.remoteKey, op.length, peerNode, catalog);
                        done.add(() -> op.future.completeExceptionally(e));
                    }
                    for (Op o : failed) {
                        done.add(() -> o.future.completeExceptionally(ne));
                    }
                } else if (op.future.isDone()) {
                    // its deadline fired: the late result is dropped, the slot is free again
                } else {
                    long staging = queue.stagingAddress(slot);
                    switch (op.kind) {
                        case IBV_WR_RDMA_READ -> {
                            long partOffset = (long) part * stagingBytes;
                            int partLength = (int) Math.min(stagingBytes, op.length - partOffset);
                            if (partLength > 0) {
                                MEMORY.copyMemory(staging, op.data, BYTE_ARRAY_OFFSET + partOffset, partLength);
                            }
                        }
                        case IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD ->
                                op.result = MEMORY.readLong(staging); // boxed once, on completion
                        default -> {
                        }
                    }
                    if (part == op.parts(stagingBytes) - 1) {
                        single = op;
                        singleValue = switch (op.kind) {
                            case IBV_WR_RDMA_READ -> op.data;
                            case IBV_WR_RDMA_WRITE -> null;
                            default -> op.result;
                        };
                    }
                }
                if (brokenReason == null) {
                    drainLocked();
                }
            }
        }
        if (single != null) {
            single.future.complete(singleValue);
        }
        if (done != null) {
            done.forEach(Runnable::run);
        }
    }

    /** Posts waiting verbs in order while slots are free and the head is due. */
    private void drainLocked() {
        while (!backlog.isEmpty() && brokenReason == null) {
            Op head = backlog.peek();
            if (head.future.isDone() && head.partsPosted == 0) {
                backlog.poll(); // timed out while waiting: never posted
                continue;
            }
            if (head.notBefore != 0 && head.notBefore - System.nanoTime() > 0) {
                scheduleDrainLocked();
                return;
            }
            if (!postLocked(head)) {
                return;
            }
            backlog.poll();
        }
    }

    private void scheduleDrainLocked() {
        Op head = backlog.peek();
        if (drainScheduled || head == null || head.notBefore == 0) {
            return; // a completion will drain the ring-full case
        }
        drainScheduled = true;
        Deadlines.schedule(() -> {
            synchronized (lock) {
                drainScheduled = false;
                drainLocked();
            }
        }, head.notBefore - System.nanoTime());
    }

    /** Marks the engine broken and returns every verb still pending (in flight or waiting). */
    private List<Op> breakLocked(String reason) {
        brokenReason = reason;
        List<Op> failed = new ArrayList<>();
        for (long s = completedSeq; s < nextSeq; s++) {
            Op op = slotOps[(int) s & mask];
            if (op != null && !failed.contains(op)) {
                failed.add(op);
            }
        }
        failed.addAll(backlog);
        backlog.clear();
        // destroyed off this lock: the completion thread may hold the queue's poll lock and wait for ours
        Deadlines.schedule(() -> {
            queue.close();
            brokenListener.accept(reason);
        }, 0);
        return failed;
    }

    /** One verb, possibly posted as several work requests. */
    private static final class Op {
        final int kind;
        final long ptr;
        final long remoteKey;
        final long remoteAddress;
        final int length;
        byte[] data;
        int dataOffset;
        final long compareAdd;
        final long swap;
        /** Completes with the verb's value: {@code byte[]} (read), {@code null} (write), {@code Long} (atomics). */
        final CompletableFuture<Object> future = new CompletableFuture<>();
        long result;
        int partsPosted;
        long notBefore;

        Op(int kind, long ptr, long remoteKey, long remoteAddress, int length, byte[] data, int dataOffset,
           long compareAdd, long swap) {
            this.kind = kind;
            this.ptr = ptr;
            this.remoteKey = remoteKey;
            this.remoteAddress = remoteAddress;
            this.length = length;
            this.data = data;
            this.dataOffset = dataOffset;
            this.compareAdd = compareAdd;
            this.swap = swap;
        }

        /** The future as the verb's result type (one future per verb: no mapping stage). */
        @SuppressWarnings("unchecked")
        <T> CompletableFuture<T> typed() {
            return (CompletableFuture<T>) (CompletableFuture<?>) future;
        }

        int parts(int stagingBytes) {
            return length <= stagingBytes ? 1 : (int) ((length + (long) stagingBytes - 1) / stagingBytes);
        }

        /** Copies the caller's bytes (a write that waits must not keep a reference to the caller's array). */
        void detach() {
            data = java.util.Arrays.copyOfRange(data, dataOffset, dataOffset + length);
            dataOffset = 0;
        }
    }
}
