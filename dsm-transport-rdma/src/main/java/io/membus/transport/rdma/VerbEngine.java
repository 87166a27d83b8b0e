package io.membus.transport.rdma;

import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.time.Deadlines;
import io.membus.core.fault.FaultInjector;
import io.membus.core.transport.LongCompletion;
import io.membus.core.transport.VerbObserver;
import io.membus.core.transport.pipeline.Verb;
import io.membus.core.transport.pipeline.VerbPipeline;
import io.membus.core.transport.pipeline.Wire;
import net.openhft.chronicle.core.UnsafeMemory;

import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

import static io.membus.transport.rdma.SendWrLayout.IBV_WR_ATOMIC_CMP_AND_SWP;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_ATOMIC_FETCH_AND_ADD;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_RDMA_READ;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_RDMA_WRITE;

/**
 * The rdma wire of one reliable connection's {@link VerbPipeline}: posts verbs on one
 * {@link SendQueue} and reports their completions back. The pipeline (shared by every
 * transport) keeps issue order, the backlog, deadlines and fault holds; this class keeps
 * what is rdma's own: work-request ids, the slot ring, staging and the error states of
 * the queue pair.
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
 * When the ring is full {@link #post} says so and the verb waits in the pipeline's
 * backlog, posted as completions free slots; a verb held by an injected delay holds the
 * ones behind it; nothing blocks the caller. Issue order is posting order is completion
 * order.
 *
 * <h2>Failure</h2>
 * Each verb has a deadline from its issue (the pipeline's timer-wheel entry, no task per
 * verb). The first failed completion fails its verb with the exception
 * {@link CompletionErrors} maps it to, and breaks the engine (the queue pair is in error
 * state): every other verb in flight or waiting fails with
 * {@link NodeUnavailableException}, and so does every verb issued later.
 *
 * <p><b>Note:</b> thread-safe: any thread may issue verbs; {@link #complete} is
 * called by the queue pair's one completion thread. State is guarded by the pipeline's
 * lock; outcomes are delivered outside it, in posting order, on the completion thread (or
 * the issuing thread when a verb fails before it is posted, the wheel thread for
 * deadlines).
 */
public final class VerbEngine implements Wire<VerbEngine.Op> {
    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;
    private static final long BYTE_ARRAY_OFFSET = UnsafeMemory.UNSAFE.arrayBaseOffset(byte[].class);

    private final SendQueue queue;
    private final int peerNode;
    private final FaultInjector faults;
    private final RemoteCatalog catalog;
    private final int mask;
    private final int stagingBytes;
    private final VerbPipeline<Op> pipeline;
    private final Object lock;
    private final SendWrFlyweight flyweight = new SendWrFlyweight(); // guarded by lock
    private final Op[] slotOps;                                         // guarded by lock
    private final int[] slotParts;                                      // guarded by lock
    private long nextSeq;       // guarded by lock
    private long completedSeq;  // guarded by lock
    private String brokenReason; // guarded by lock; null while healthy
    private volatile java.util.function.Consumer<String> brokenListener = reason -> { };

    /**
     * @param catalog the peer's catalog, to name the exact error of a refused verb (may be {@code null})
     */
    public VerbEngine(SendQueue queue, int peerNode, Duration timeout, FaultInjector faults, RemoteCatalog catalog) {
        this(queue, peerNode, timeout, faults, catalog, VerbObserver.NONE);
    }

    /**
     * @param catalog  the peer's catalog, to name the exact error of a refused verb (may be {@code null})
     * @param observer where the verbs' outcomes are reported
     */
    public VerbEngine(SendQueue queue, int peerNode, Duration timeout, FaultInjector faults, RemoteCatalog catalog,
                      VerbObserver observer) {
        int depth = queue.depth();
        if (depth < 1 || Integer.bitCount(depth) != 1) {
            throw new IllegalArgumentException("queue depth must be a power of two: depth=" + depth);
        }
        this.queue = queue;
        this.peerNode = peerNode;
        this.faults = faults;
        this.catalog = catalog;
        this.mask = depth - 1;
        this.stagingBytes = queue.stagingBytes();
        if (stagingBytes < Long.BYTES) {
            throw new IllegalArgumentException("staging buffers must hold a word: stagingBytes=" + stagingBytes);
        }
        this.slotOps = new Op[depth];
        this.slotParts = new int[depth];
        // the window is the ring's: post() says when it is full
        this.pipeline = new VerbPipeline<>(peerNode, timeout, Integer.MAX_VALUE, observer, this, true);
        this.lock = pipeline.lock();
    }

    /** Reads {@code length} bytes at {@code remoteAddress}; {@code ptr} and {@code remoteKey} name it in errors. */
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, long remoteAddress, int length) {
        Op op = new Op(VerbObserver.READ, ptr, remoteKey, remoteAddress, length, new byte[length], 0, 0, 0, null);
        issue(op);
        return op.future();
    }

    /** Writes {@code src[offset..offset+length)} at {@code remoteAddress}; the bytes are copied before return. */
    public CompletableFuture<Void> write(long ptr, long remoteKey, long remoteAddress, byte[] src, int offset,
                                         int length) {
        Op op = new Op(VerbObserver.WRITE, ptr, remoteKey, remoteAddress, length, src, offset, 0, 0, null);
        synchronized (lock) {
            issue(op);
            if (op.partsPosted < op.parts(stagingBytes)) {
                op.detach(); // it waits: the caller may reuse its buffer once write returns
            }
        }
        pipeline.deliver();
        return op.future();
    }

    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long remoteAddress, long expected,
                                                  long update) {
        Op op = new Op(VerbObserver.CAS, ptr, remoteKey, remoteAddress, Long.BYTES, null, 0, expected, update, null);
        issue(op);
        return op.future();
    }

    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long remoteAddress, long delta) {
        Op op = new Op(VerbObserver.FAA, ptr, remoteKey, remoteAddress, Long.BYTES, null, 0, delta, 0, null);
        issue(op);
        return op.future();
    }

    /** {@link #compareAndSwap(long, long, long, long, long)} completing with a primitive (no future, no boxing). */
    public void compareAndSwap(long ptr, long remoteKey, long remoteAddress, long expected, long update,
                               LongCompletion done) {
        issue(new Op(VerbObserver.CAS, ptr, remoteKey, remoteAddress, Long.BYTES, null, 0, expected, update, done));
    }

    /** {@link #fetchAndAdd(long, long, long, long)} completing with a primitive (no future, no boxing). */
    public void fetchAndAdd(long ptr, long remoteKey, long remoteAddress, long delta, LongCompletion done) {
        issue(new Op(VerbObserver.FAA, ptr, remoteKey, remoteAddress, Long.BYTES, null, 0, delta, 0, done));
    }

    /**
     * Sets what runs (on the timer thread, after the queue pair is destroyed) when
     * the engine breaks: the connection closes itself so the next {@code connect}
     * opens a new one. Set before the first verb.
     */
    public void onBroken(java.util.function.Consumer<String> listener) {
        this.brokenListener = listener;
    }

    /** Work requests posted and not yet completed (for tests and status). */
    public int outstanding() {
        synchronized (lock) {
            return (int) (nextSeq - completedSeq);
        }
    }

    /** Verbs waiting for a free slot or an injected delay. */
    public int backlog() {
        return pipeline.backlog();
    }

    /** Verbs posted whose completion is awaited (timed-out ones excluded), for a metrics gauge. */
    public int inFlight() {
        return pipeline.inFlight();
    }

    /** Why the engine broke, or {@code null} while it is healthy. */
    public String brokenReason() {
        synchronized (lock) {
            return brokenReason;
        }
    }

    /** Fails every verb in flight or waiting, and every later verb, with {@link NodeUnavailableException}. */
    public void close(String reason) {
        synchronized (lock) {
            if (brokenReason != null) {
                return;
            }
            NodeUnavailableException e = new NodeUnavailableException(peerNode, reason);
            breakLocked(reason, e, e);
        }
        pipeline.deliver();
    }

    private void issue(Op op) {
        pipeline.issue(op, faults == null ? 0 : faults.holdNanos(peerNode));
    }

    @Override
    public boolean mustFinish(Op op) {
        return op.partsPosted > 0; // its posted parts own slots: the rest must follow
    }

    /**
     * Posts as many parts of {@code op} as free slots allow (under the pipeline's lock).
     *
     * @return whether every part is posted
     */
    @Override
    public boolean post(Op op) {
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
                case VerbObserver.READ -> flyweight.read(seq, staging, partLength, queue.localKey(),
                        op.remoteAddress + partOffset, CatalogEntry.rkeyOf(op.remoteKey));
                case VerbObserver.WRITE -> {
                    if (partLength > 0) {
                        MEMORY.copyMemory(op.data, (int) (op.dataOffset + partOffset), staging, partLength);
                    }
                    flyweight.write(seq, staging, partLength, queue.localKey(), op.remoteAddress + partOffset,
                            CatalogEntry.rkeyOf(op.remoteKey));
                }
                case VerbObserver.CAS -> flyweight.compareAndSwap(seq, staging, queue.localKey(),
                        op.remoteAddress, CatalogEntry.rkeyOf(op.remoteKey), op.a, op.b);
                default -> flyweight.fetchAndAdd(seq, staging, queue.localKey(), op.remoteAddress,
                        CatalogEntry.rkeyOf(op.remoteKey), op.a);
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
                String reason = "post failed: " + e.getMessage();
                NodeUnavailableException ex = new NodeUnavailableException(peerNode, reason, e);
                breakLocked(reason, ex, ex); // fails this verb too: the pipeline counts it as on the wire
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
        synchronized (lock) {
            if (wrId != completedSeq || completedSeq == nextSeq) {
                if (brokenReason == null) {
                    String reason = "unexpected completion: wrId=" + wrId + ", expected=" + completedSeq
                            + ", posted=" + nextSeq + ", status=" + WcStatus.name(status);
                    DsmException e = DsmException.internal(reason + "; the connection was closed");
                    breakLocked(reason, e, e);
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
                    DsmException e = CompletionErrors.toException(status, vendorErr, op.kind(), op.ptr,
                            op.remoteKey, op.length, peerNode, catalog);
                    pipeline.fail(op, e); // ignored when its deadline fired
                    String reason = "an earlier verb failed with " + WcStatus.name(status)
                            + " and the queue pair is in error state";
                    NodeUnavailableException ne = new NodeUnavailableException(peerNode, reason);
                    breakLocked(reason, ne, ne);
                } else {
                    long staging = queue.stagingAddress(slot);
                    switch (op.kind) {
                        case VerbObserver.READ -> {
                            long partOffset = (long) part * stagingBytes;
                            int partLength = (int) Math.min(stagingBytes, op.length - partOffset);
                            if (partLength > 0) {
                                MEMORY.copyMemory(staging, op.data, BYTE_ARRAY_OFFSET + partOffset, partLength);
                            }
                        }
                        case VerbObserver.CAS, VerbObserver.FAA -> op.result = MEMORY.readLong(staging);
                        default -> {
                        }
                    }
                    if (part == op.parts(stagingBytes) - 1) {
                        // a verb whose deadline fired is resolved already: the late result is dropped
                        switch (op.kind) {
                            case VerbObserver.READ -> pipeline.complete(op, op.data);
                            case VerbObserver.WRITE -> pipeline.complete(op, null);
                            default -> pipeline.completeLong(op, op.result);
                        }
                    }
                }
                if (brokenReason == null) {
                    pipeline.pump(); // the freed slot takes the next waiting verb
                }
            }
        }
        pipeline.deliver();
    }

    /**
     * Marks the engine broken: the pipeline fails every verb still pending (in flight
     * with {@code onWire}, waiting with {@code waiting}) and every later one.
     */
    private void breakLocked(String reason, Throwable onWire, Throwable waiting) {
        brokenReason = reason;
        pipeline.close(onWire, waiting, () -> new NodeUnavailableException(peerNode, reason));
        // destroyed off this lock: the completion thread may hold the queue's poll lock and wait for ours
        Deadlines.schedule(() -> {
            queue.close();
            brokenListener.accept(reason);
        }, 0);
    }

    /** One verb, possibly posted as several work requests. */
    static final class Op extends Verb {
        final long remoteAddress;
        long result;
        int partsPosted;

        Op(int kind, long ptr, long remoteKey, long remoteAddress, int length, byte[] data, int dataOffset,
           long compareAdd, long swap, LongCompletion sink) {
            super(kind, ptr, remoteKey, length, compareAdd, swap, data, dataOffset, sink);
            this.remoteAddress = remoteAddress;
        }

        /** The work request opcode, as {@link CompletionErrors} takes it. */
        int kind() {
            return switch (kind) {
                case VerbObserver.READ -> IBV_WR_RDMA_READ;
                case VerbObserver.WRITE -> IBV_WR_RDMA_WRITE;
                case VerbObserver.CAS -> IBV_WR_ATOMIC_CMP_AND_SWP;
                default -> IBV_WR_ATOMIC_FETCH_AND_ADD;
            };
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
