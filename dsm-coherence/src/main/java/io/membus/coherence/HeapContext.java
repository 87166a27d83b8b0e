package io.membus.coherence;

import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.UseAfterFreeException;
import io.membus.core.Backoff;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ValueTooLargeException;
import io.membus.core.message.Messaging;
import io.membus.core.time.Clock;

/**
 * What every part of one node's {@link CoherentHeap} shares: the allocator, memory,
 * messages, clock and config, this node's id and clock bound, the largest value, the
 * closed flag, and the checks and deadline every operation starts with.
 *
 * <p><b>Note:</b> thread-safe: the fields are final but {@link #maxValueSize} and
 * {@link #closed}, which are volatile (a change is seen by every operation that starts
 * after it).
 */
final class HeapContext {
    /** The largest value {@link #maxValueSize(long)} takes: a value is written with one verb. */
    static final long MAX_VALUE_SIZE_LIMIT = (16L << 20) - 4096;

    final GlobalAllocator allocator;
    final RemoteMemory memory;
    /** Null when the heap has no messages (then writers wait out leases and no skew is measured). */
    final Messaging messaging;
    final Clock clock;
    final CoherenceConfig config;
    final int self;
    /** The clock bound ε in microseconds. */
    final long epsMicros;
    private volatile long maxValueSize = 8L << 20;
    private volatile boolean closed;

    HeapContext(GlobalAllocator allocator, Messaging messaging, Clock clock, CoherenceConfig config) {
        this.allocator = allocator;
        this.memory = allocator.memory();
        this.messaging = messaging;
        this.clock = clock;
        this.config = config;
        this.self = memory.localNodeId();
        this.epsMicros = config.clockBound().toNanos() / 1000;
    }

    void maxValueSize(long bytes) {
        if (bytes < 1 || bytes > MAX_VALUE_SIZE_LIMIT) {
            throw new DsmConfigException(CoherentHeap.MAX_VALUE_SIZE_SETTING, String.valueOf(bytes),
                    "1 .. " + MAX_VALUE_SIZE_LIMIT + " bytes (one verb carries a value)");
        }
        this.maxValueSize = bytes;
    }

    long maxValueSize() {
        return maxValueSize;
    }

    /** Refuses a value larger than {@link #maxValueSize()}, before anything is allocated or locked. */
    void checkSize(byte[] bytes, String what) {
        long max = maxValueSize;
        if (bytes.length > max) {
            throw new ValueTooLargeException(what, bytes.length, max, CoherentHeap.MAX_VALUE_SIZE_SETTING);
        }
    }

    boolean closed() {
        return closed;
    }

    /** Marks the heap closed; returns false when it was already. */
    boolean close() {
        if (closed) {
            return false;
        }
        closed = true;
        return true;
    }

    /** Fails at once with {@link DsmClosedException} once the heap was closed. */
    void checkOpen() {
        if (closed) {
            throw new DsmClosedException("the coherent heap of node " + self + " (and every RemoteRef of it)");
        }
    }

    /** The operation's deadline: its {@link OperationDeadline} scope's (opened at its start), or the timeout from now. */
    long deadline() {
        checkOpen(); // every operation on a handle starts here
        return OperationDeadline.until(System.nanoTime(), config.timeout().toNanos());
    }

    /** Whether this node may cache at all: the sharer bitmap has a bit for it. */
    boolean hasSharerBit() {
        return self <= ObjectLayout.MAX_SHARER_NODE;
    }

    /** Fails with {@link UseAfterFreeException} when the block header read ({@code raw}) is not the handle's. */
    static void checkBlock(long ptr, long generationHeader, long raw, String op) {
        if (raw != HeapLayout.seal(generationHeader, ptr)) {
            throw new UseAfterFreeException(ptr, HeapLayout.generationOf(generationHeader),
                    HeapLayout.generationOf(HeapLayout.unseal(raw, ptr)), op);
        }
    }

    /**
     * The next pause of an operation's retry loop, with {@code backoff} (null before the
     * first retry: an operation that needs none allocates none); returns the backoff to
     * pass next time. Fails once the heap is closed, or with a {@link DsmTimeoutException}
     * (nothing of the operation ran) once {@code deadline} has passed.
     */
    Backoff pause(Backoff backoff, long deadline, String op, long ptr) {
        checkOpen();
        Backoff b = backoff != null ? backoff : new Backoff(Backoff.SPIN_THEN_PARK, deadline);
        if (!b.pause()) {
            // before the operation took effect: nothing of it ran
            throw DsmTimeoutException.notSent(op + " of coherent object " + RemotePtr.toString(ptr)
                    + " (it kept changing or stayed locked)", RemotePtr.nodeId(ptr), config.timeout());
        }
        return b;
    }
}
