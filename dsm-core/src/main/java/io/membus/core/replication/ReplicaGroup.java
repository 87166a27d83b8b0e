package io.membus.core.replication;

import io.membus.core.Segment;
import io.membus.core.replication.GroupCopies.Copy;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.transport.TransportThreads;

import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The primary side of one replica group on this node: it sequences the group's
 * changes, applies them to the group's memory, forwards their effects to every copy,
 * and tells waiting answers when every in-sync copy has them ({@link AckGate}).
 *
 * <h2>The change path</h2>
 * A change ({@link #write}, {@link #writeFromAddress}, {@link #writeLong},
 * {@link #compareAndSwap}, {@link #fetchAndAdd}) runs under the group's lock: it takes
 * sequence {@code lastSeq + 1}, <em>publishes</em> it ({@code lastSeq}, volatile) before its
 * effect reaches memory (a store-store fence between), applies the effect, and appends its
 * after-bytes (a write's bytes; an atomic's 8-byte word after the operation) to every
 * copy's {@link CopyStream}. A compare-and-swap that fails changes nothing: it takes no
 * sequence and sends nothing. After the lock, the streams are flushed.
 *
 * <h2>Answers</h2>
 * A verb's answer may leave once {@link #acked(long) acked}({@link #need()}), {@code need()}
 * read after the verb ran: a change reads at least its own sequence, a read at least the
 * sequence of every effect it could have seen (its data was read before {@code need()},
 * {@code need()} issues a load-load fence first, and the change published its sequence
 * before its effect). The watermark is the minimum of the in-sync copies' applied
 * sequences (never lower than before); with no in-sync copy every change is acknowledged at
 * once (the group is one failure from lost: status and the WARN line say so). The waiting
 * answers are {@link AckWaiters}'s: released by whoever moves the watermark past them.
 *
 * <h2>Window</h2>
 * Before taking the lock a change waits (bounded by its deadline) while a copy's stream
 * holds its window of unacknowledged records full. A transport thread (a tcp I/O thread)
 * never waits: its change goes beyond the window; what bounds it then is the initiators'
 * own windows of verbs in flight per connection, so a stream holds at most the window plus
 * what the connections of one I/O thread have in flight.
 *
 * <h2>Copies</h2>
 * In-sync copies count in the watermark; a joining copy (re-replication, see
 * {@link #copyChunk}) receives the effects below its cursor and the chunks, and counts from
 * the acknowledgement of its DONE record. A copy leaves only by {@link #removeCopy} (its node
 * was removed from membership), never on a timeout. The set is a {@link GroupCopies}.
 *
 * <p><b>Note:</b> thread-safe. Changes and copy-set changes hold the group lock (a
 * {@link ReentrantLock}); {@link #need()}, {@link #acked(long)} and the stop state are
 * volatile reads; waiters are guarded by their queue's monitor ({@link AckWaiters}) and run
 * outside every lock.
 */
public final class ReplicaGroup implements AckGate {
    private final int group;
    private final int self;
    private final Segment memory;
    private final long epoch;
    private final int partBytes;
    private final int chunkBytes;
    private final Duration waitTimeout;
    private final Listener listener;
    private final ReentrantLock lock = new ReentrantLock();
    /** The copies (guarded by lock; their streams' array is read without it). */
    private final GroupCopies copies = new GroupCopies();
    private volatile long lastSeq;
    private volatile long watermark;
    private volatile NotPrimaryException stopped;
    private volatile int stoppedHint;
    private volatile long stoppedEpoch;
    /** What waiting answers fail with once stopped (their changes may be on copies). */
    private volatile NodeUnavailableException waitFailure;
    /** The answers waiting for this group's copies (the {@link AckGate} side). */
    private final AckWaiters waiters;

    /** What the group tells its {@link Replicator}. */
    interface Listener {
        /** The in-sync set changed (a copy finished joining, or was removed): publish the claim. */
        void inSyncChanged(ReplicaGroup group);
    }

    /**
     * @param lastSeq    the sequence the group's memory is at (0 for a new group; the promoted copy's applied)
     * @param partBytes  the most after-bytes one stream record carries (a larger write is split)
     * @param waitTimeout how long a change waits for a full window when its thread has no deadline
     */
    ReplicaGroup(int group, int self, Segment memory, long epoch, long lastSeq, int partBytes, int chunkBytes,
                 Duration waitTimeout, Listener listener) {
        this.group = group;
        this.self = self;
        this.memory = memory;
        this.epoch = epoch;
        this.lastSeq = lastSeq;
        this.watermark = lastSeq;
        this.partBytes = partBytes;
        this.chunkBytes = chunkBytes;
        this.waitTimeout = waitTimeout;
        this.listener = listener;
        this.waiters = new AckWaiters(this, self, waitTimeout);
    }

    public int group() {
        return group;
    }

    public long epoch() {
        return epoch;
    }

    public Segment memory() {
        return memory;
    }

    /** The sequence of the latest change (published before its effect). */
    public long lastSeq() {
        return lastSeq;
    }

    /** Every change up to this sequence is on every in-sync copy. */
    public long watermark() {
        return watermark;
    }

    /** Whether this node still serves the group (not fenced by a newer epoch, not closed). */
    public boolean serving() {
        return stopped == null;
    }

    /** Throws what a verb on a group no longer served here fails with, if it is not served. */
    public void checkServing() {
        if (stopped != null) {
            throw new NotPrimaryException(self, group, stoppedHint, stoppedEpoch);
        }
    }

    // ---- AckGate

    @Override
    public long need() {
        VarHandle.loadLoadFence(); // the verb's reads of memory come before the sequence read
        return lastSeq;
    }

    @Override
    public boolean acked(long seq) {
        return seq <= watermark;
    }

    @Override
    public void whenAcked(long seq, Done done) {
        waiters.whenAcked(seq, done);
    }

    @Override
    public void await(long seq, long deadlineNanos) {
        waiters.await(seq, deadlineNanos);
    }

    /** What waiting answers fail with once stopped, or null while served (volatile). */
    NodeUnavailableException waitFailure() {
        return waitFailure;
    }

    // ---- changes

    /** Writes {@code src[from..from+length)} at {@code offset}. */
    public void write(long offset, byte[] src, int from, int length) {
        beforeChange();
        lockChange();
        try {
            checkServing();
            long seq = publish();
            memory.write(offset, src, from, length);
            forward(seq, offset, length);
        } finally {
            lock.unlock();
        }
        waiters.releaseAfterChange();
        flush();
    }

    /** Writes {@code length} bytes of native memory at {@code address} to {@code offset}. */
    public void writeFromAddress(long offset, long address, int length) {
        beforeChange();
        lockChange();
        try {
            checkServing();
            long seq = publish();
            memory.writeFromAddress(offset, address, length);
            forward(seq, offset, length);
        } finally {
            lock.unlock();
        }
        waiters.releaseAfterChange();
        flush();
    }

    /** Writes the 8-byte aligned word at {@code offset}. */
    public void writeLong(long offset, long value) {
        beforeChange();
        lockChange();
        try {
            checkServing();
            long seq = publish();
            memory.writeLong(offset, value);
            forwardWord(seq, offset, value);
        } finally {
            lock.unlock();
        }
        waiters.releaseAfterChange();
        flush();
    }

    /** Compare-and-swap of the aligned word at {@code offset}; a failed one takes no sequence. */
    public long compareAndSwap(long offset, long expected, long update) {
        beforeChange();
        long old;
        lockChange();
        try {
            checkServing();
            old = memory.readLong(offset);
            if (old != expected) {
                return old; // no change: a read (its answer waits for need() like a read's)
            }
            long seq = publish();
            old = memory.compareAndSwap(offset, expected, update); // succeeds: every change holds the lock
            forwardWord(seq, offset, update);
        } finally {
            lock.unlock();
        }
        waiters.releaseAfterChange();
        flush();
        return old;
    }

    /** Fetch-and-add of the aligned word at {@code offset}. */
    public long fetchAndAdd(long offset, long delta) {
        beforeChange();
        long old;
        lockChange();
        try {
            checkServing();
            long seq = publish();
            old = memory.fetchAndAdd(offset, delta);
            forwardWord(seq, offset, old + delta);
        } finally {
            lock.unlock();
        }
        waiters.releaseAfterChange();
        flush();
        return old;
    }

    /** Takes the group lock for a change, counting whether another thread held it ({@link ReplicationCounts}). */
    private void lockChange() {
        if (!lock.tryLock()) {
            ReplicationCounts.lockContended.increment();
            lock.lock();
        }
    }

    /** Waits while a copy's window is full (not on a transport thread: see the class comment). */
    private void beforeChange() {
        checkServing();
        if (TransportThreads.isTransportThread()) {
            return;
        }
        CopyStream[] streams = streams();
        if (streams.length == 0) {
            return;
        }
        long deadline = io.membus.core.OperationDeadline.until(System.nanoTime(), waitTimeout.toNanos());
        for (CopyStream s : streams) {
            s.awaitWindow(deadline);
        }
    }

    private CopyStream[] streams() {
        return copies.streams();
    }

    /** Takes the next sequence and publishes it before the effect (under the lock). */
    private long publish() {
        long seq = lastSeq + 1;
        lastSeq = seq;
        VarHandle.storeStoreFence(); // the sequence is visible before any byte of the effect
        return seq;
    }

    private void forwardWord(long seq, long offset, long after) {
        byte[] b = new byte[8];
        io.membus.core.Words.putLong(b, 0, after);
        forwardBytes(seq, offset, b, 8);
    }

    /** Forwards the after-bytes of memory {@code [offset, offset+length)} (under the lock, after the effect). */
    private void forward(long seq, long offset, int length) {
        if (copies.isEmpty()) {
            watermark = seq;
            return;
        }
        byte[] after = new byte[length];
        memory.read(offset, after, 0, length);
        forwardBytes(seq, offset, after, length);
    }

    private void forwardBytes(long seq, long offset, byte[] after, int length) {
        boolean anyInSync = false;
        List<byte[]> parts = null;
        for (Copy c : copies) {
            if (c.inSync) {
                anyInSync = true;
            } else if (c.doneSeq < 0 && offset >= c.cursor) {
                continue; // a joining copy gets these bytes with a later chunk
            }
            if (parts == null) {
                parts = parts(seq, offset, after, length);
                ReplicationCounts.changes.increment();
            }
            for (byte[] p : parts) {
                c.stream.append(p);
            }
        }
        if (!anyInSync) {
            watermark = seq;
        }
    }

    private List<byte[]> parts(long seq, long offset, byte[] after, int length) {
        List<byte[]> parts = new ArrayList<>(1 + length / partBytes);
        int at = 0;
        do {
            int n = Math.min(partBytes, length - at);
            parts.add(ReplicationCodec.effect(group, epoch, seq, offset + at, after, at, n, at + n == length));
            at += n;
        } while (at < length);
        return parts;
    }

    private void flush() {
        for (CopyStream s : streams()) {
            s.flush();
        }
    }

    // ---- copies

    /** Adds copies that are in sync already (a promotion: they hold exactly this group's state at {@link #lastSeq()}). */
    void addInSync(int node, CopyStream stream) {
        lock.lock();
        try {
            Copy c = new Copy(node, stream);
            c.inSync = true;
            c.applied = lastSeq;
            c.doneSeq = lastSeq;
            c.cursor = memory.size();
            copies.add(c);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Starts a new copy on {@code node}: a JOIN record, then {@link #copyChunk} until it
     * returns false. The copy counts in the watermark once its DONE is acknowledged.
     */
    void startJoin(int node, CopyStream stream) {
        lock.lock();
        try {
            checkServing();
            Copy c = new Copy(node, stream);
            c.applied = lastSeq;
            copies.add(c);
            stream.append(ReplicationCodec.join(group, epoch, lastSeq, memory.size(), memory.flags(),
                    memory.remoteKey()));
        } finally {
            lock.unlock();
        }
        stream.flush();
    }

    /**
     * Copies the next chunk of memory to joining copy {@code node} (under the lock, in
     * sequence with the effects), or appends its DONE after the last chunk.
     *
     * @return true while chunks remain (call again), false once DONE was appended or the copy is gone
     */
    boolean copyChunk(int node) {
        CopyStream stream;
        boolean more;
        lock.lock();
        try {
            checkServing();
            Copy c = find(node);
            if (c == null || c.inSync || c.doneSeq >= 0) {
                return false;
            }
            stream = c.stream;
            long size = memory.size();
            if (c.cursor < size) {
                int n = (int) Math.min(chunkBytes, size - c.cursor);
                byte[] bytes = new byte[n];
                memory.read(c.cursor, bytes, 0, n);
                for (int at = 0; at < n; at += partBytes) {
                    int len = Math.min(partBytes, n - at);
                    stream.append(ReplicationCodec.chunk(group, epoch, lastSeq, c.cursor + at, bytes, at, len));
                }
                c.cursor += n;
                more = true;
            } else {
                c.doneSeq = lastSeq;
                stream.append(ReplicationCodec.done(group, epoch, lastSeq));
                more = false;
            }
        } finally {
            lock.unlock();
        }
        stream.flush();
        return more;
    }

    /** Whether the stream of copy {@code node} holds its window full (re-replication paces on it). */
    boolean windowFull(int node) {
        lock.lock();
        try {
            Copy c = find(node);
            return c != null && c.stream.windowFull();
        } finally {
            lock.unlock();
        }
    }

    /** A copy acknowledged {@code applied} (and whether it counts itself in sync). */
    void acknowledged(int node, long applied, boolean copyInSync) {
        boolean changed = false;
        lock.lock();
        try {
            Copy c = find(node);
            if (c == null) {
                return;
            }
            c.applied = Math.max(c.applied, applied);
            if (!c.inSync && copyInSync && c.doneSeq >= 0 && c.applied >= c.doneSeq) {
                c.inSync = true;
                changed = true;
            }
            recompute();
        } finally {
            lock.unlock();
        }
        waiters.release();
        if (changed) {
            listener.inSyncChanged(this);
        }
    }

    /** Removes the copy on {@code node} (membership removed it); waiting answers it held are released. */
    boolean removeCopy(int node) {
        boolean wasInSync;
        lock.lock();
        try {
            Copy c = find(node);
            if (c == null) {
                return false;
            }
            copies.remove(c);
            wasInSync = c.inSync;
            recompute();
        } finally {
            lock.unlock();
        }
        waiters.release();
        if (wasInSync) {
            listener.inSyncChanged(this);
        }
        return true;
    }

    /** The watermark from the in-sync copies; never lower than before (guarded by lock). */
    private void recompute() {
        long min = copies.minInSyncApplied();
        long w = min == Long.MAX_VALUE ? lastSeq : min;
        if (w > watermark) {
            watermark = w;
        }
    }

    private Copy find(int node) {
        return copies.find(node);
    }

    /** The in-sync copies' node ids, in the order they became in sync. */
    public int[] inSync() {
        lock.lock();
        try {
            return copies.inSync();
        } finally {
            lock.unlock();
        }
    }

    /** The joining copies' node ids. */
    public int[] joining() {
        lock.lock();
        try {
            return copies.joining();
        } finally {
            lock.unlock();
        }
    }

    /** Bytes of joining copy {@code node} sent so far, or -1. */
    long joinProgress(int node) {
        lock.lock();
        try {
            Copy c = find(node);
            return c == null || c.inSync ? -1 : c.cursor;
        } finally {
            lock.unlock();
        }
    }

    /** Every copy's node (in sync and joining). */
    int[] holders() {
        lock.lock();
        try {
            return copies.holders();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Stops serving: a copy is at a newer epoch ({@code copyEpoch}, made by a promotion), or
     * the group is dropped here. Waiting answers fail with
     * {@link NodeUnavailableException} (their changes may be on copies: outcome unknown);
     * later verbs fail with {@link NotPrimaryException} naming the new coordinator.
     */
    void stop(long newerEpoch, String why) {
        lock.lock();
        try {
            if (waitFailure != null) {
                return; // stopped already (a frozen group, see freeze, is stopped here for good)
            }
            int hint = newerEpoch == Ballot.NONE ? 0 : Ballot.coordinator(newerEpoch);
            waitFailure = new NodeUnavailableException(self, "node " + self + " no longer serves segment "
                    + GroupId.toString(group) + ": " + why);
            stoppedHint = hint;
            stoppedEpoch = Math.max(epoch, newerEpoch);
            stopped = new NotPrimaryException(self, group, hint, stoppedEpoch);
        } finally {
            lock.unlock();
        }
        waiters.failAll(waitFailure);
    }

    /**
     * The first step of a hand-over (a graceful leave, docs/replication.md §17.9): later
     * verbs fail {@link NotPrimaryException} (not run) naming {@code hint}, the copy that
     * takes the group over, while the answers of changes already sequenced still complete
     * when their copies acknowledge them (unlike {@link #stop}). From here {@link #lastSeq()}
     * no longer grows: the leaving primary waits until {@link #watermark()} reaches it.
     */
    void freeze(int hint) {
        lock.lock(); // every change sequences under it: none is half done once this returns
        try {
            if (stopped != null) {
                return;
            }
            stoppedHint = hint;
            stoppedEpoch = epoch;
            stopped = new NotPrimaryException(self, group, hint, epoch);
        } finally {
            lock.unlock();
        }
    }

    /** Whether every sequenced change is on every in-sync copy (nothing waits for an acknowledgement). */
    boolean quiet() {
        return watermark >= lastSeq;
    }

    /** {@link #toString()} with the waiters and the copies (diagnostics). */
    String describe() {
        StringBuilder b = new StringBuilder(toString());
        waiters.describe(b);
        lock.lock();
        try {
            copies.describe(b);
        } finally {
            lock.unlock();
        }
        return b.toString();
    }

    @Override
    public String toString() {
        return "ReplicaGroup{segment=" + GroupId.toString(group) + ", epoch=" + Ballot.toString(epoch) + ", lastSeq="
                + lastSeq + ", acked=" + watermark + (stopped != null ? ", stopped" : "") + "}";
    }
}
