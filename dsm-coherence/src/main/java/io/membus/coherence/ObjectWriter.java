package io.membus.coherence;

import io.membus.alloc.BlockRef;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.Placement;
import io.membus.coherence.CoherentHeap.Result;
import io.membus.coherence.CoherentHeap.WriteStop;
import io.membus.coherence.ObjectReader.Snapshot;
import io.membus.core.Backoff;
import io.membus.core.OperationDeadline;
import io.membus.core.RemotePtr;
import io.membus.core.Words;
import io.membus.core.error.DsmException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.CompletableFuture;
import java.util.function.LongFunction;
import java.util.function.UnaryOperator;

/**
 * The write path of coherent objects (see "Writes", "Interrupts" and (I1), (I2), (I4),
 * (I6) in {@code docs/coherence.md}): creating an object, and every operation that takes
 * its write lock — {@code update} (set, compare-and-set, read-modify-write), the
 * {@code exclusive} sections of structures that guard data kept elsewhere, and
 * {@code free}. Each reads the object validated, locks its header by CAS (recovering a
 * lock left behind through {@link LockRecovery}), reads the lease and sharers only then,
 * has {@link Invalidator} make sure no node serves an older copy, writes the slot that is
 * not current, and publishes by one CAS that fails if the lock was broken; a failure
 * before the publish releases the lock with a new version over the current slot.
 *
 * <p><b>Note:</b> thread-safe: it keeps no state of its own; every operation's state is on
 * its own stack, its lock is the object's header word in remote memory (a verb's CAS),
 * and the publish CAS orders the slot write before every read that sees the new version.
 */
final class ObjectWriter {
    private static final Logger LOG = LoggerFactory.getLogger(CoherentHeap.class);

    private final HeapContext ctx;
    private final ObjectReader reader;
    private final Invalidator invalidator;
    private final LockRecovery recovery;
    private final CopyCache cache;

    ObjectWriter(HeapContext ctx, ObjectReader reader, Invalidator invalidator, LockRecovery recovery,
                 CopyCache cache) {
        this.ctx = ctx;
        this.reader = reader;
        this.invalidator = invalidator;
        this.recovery = recovery;
        this.cache = cache;
    }

    /** Allocates an object of {@code slotCapacity} holding {@code bytes}, published unlocked last. */
    BlockRef create(byte[] bytes, int slotCapacity, Placement placement) {
        BlockRef block = ctx.allocator.allocate(ObjectLayout.objectSize(slotCapacity), placement);
        try {
            long version = ObjectLayout.firstVersion(HeapLayout.generationOf(block.header()));
            byte[] head = new byte[ObjectLayout.SLOTS];
            Words.putLong(head, ObjectLayout.HEADER, ObjectLayout.lockedBy(ObjectLayout.unlocked(0, version), ctx.self));
            Words.putLong(head, ObjectLayout.META, ObjectLayout.meta(slotCapacity));
            ctx.memory.write(block.payload(), head);
            writeSlot(block, slotCapacity, 0, bytes);
            // published unlocked last: no reader accepts the object before its value is there
            ctx.memory.writeLong(block.payload() + ObjectLayout.HEADER, ObjectLayout.unlocked(0, version));
        } catch (RuntimeException e) {
            ctx.allocator.free(block);
            throw e;
        }
        return block;
    }

    Result update(RemoteRef<?> ref, UnaryOperator<byte[]> change, WriteStop stop) {
        // one deadline for the whole write: every verb of it ends by then (OperationDeadline)
        long scope = OperationDeadline.enter(ctx.config.timeout());
        try {
            return updateWithin(ref, change, stop);
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    private Result updateWithin(RemoteRef<?> ref, UnaryOperator<byte[]> change, WriteStop stop) {
        long deadline = ctx.deadline();
        long ptr = ref.ptr();
        Backoff backoff = null;
        while (true) {
            Snapshot s = reader.validatedRead(ref, deadline);
            long h = s.header();
            if (ObjectLayout.locked(h)) {
                recovery.maybeRecover(ref, h);
                backoff = ctx.pause(backoff, deadline, "write", ptr);
                continue;
            }
            byte[] next = change.apply(s.bytes());
            if (next == null) {
                return new Result(s.bytes(), null, ObjectLayout.version(h));
            }
            ctx.checkSize(next, "coherent object value at " + RemotePtr.toString(ptr)); // before the lock
            long mine = ObjectLayout.lockedBy(h, ctx.self);
            if (ctx.memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, h, mine) != h) {
                backoff = ctx.pause(backoff, deadline, "write", ptr);
                continue;
            }
            // the lock is ours: only now read the lease and the sharers (a reader that joins later sees the lock)
            boolean published = false;
            boolean interrupted = false;
            BlockRef freshOutOfLine = null;
            try {
                ctx.memory.writeLong(ref.payload() + ObjectLayout.LOCKED_AT, ctx.clock.nowMicros());
                if (stop == WriteStop.AFTER_LOCK) {
                    published = true; // simulated crash: leave the lock as a dead writer would
                    return new Result(s.bytes(), null, ObjectLayout.version(h));
                }
                byte[] ls = ctx.memory.read(ref.payload() + ObjectLayout.LEASE, 16);
                interrupted = invalidator.invalidateSharers(ref, Words.getLong(ls, 0), Words.getLong(ls, 8), deadline);
                int spare = 1 - ObjectLayout.slot(h);
                BlockRef oldOutOfLine = outOfLine(ref, spare);
                freshOutOfLine = writeSlot(ref.block(), ref.slotCapacity(), spare, next);
                if (stop == WriteStop.AFTER_SPARE_SLOT) {
                    published = true;
                    return new Result(s.bytes(), null, ObjectLayout.version(h));
                }
                long version = ObjectLayout.version(h) + 1;
                long seen = ctx.memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, mine,
                        ObjectLayout.unlocked(spare, version));
                if (seen != mine) {
                    published = true; // nothing of ours to release: the lock is someone else's now
                    if (freshOutOfLine != null) {
                        ctx.allocator.free(freshOutOfLine);
                    }
                    throw new LockBrokenException(ptr, mine, seen);
                }
                published = true;
                cache.invalidate(ptr);
                if (oldOutOfLine != null) {
                    // readers still validating against the older version fail their header check and retry
                    try {
                        ctx.allocator.free(oldOutOfLine);
                    } catch (DsmException e) {
                        LOG.warn("could not free the old out-of-line value of {}: {}", RemotePtr.toString(ptr),
                                e.getMessage());
                    }
                }
                return new Result(s.bytes(), next, version);
            } finally {
                if (!published) {
                    // failed before publishing: release the lock with a new version over the current slot
                    release(ref, mine, h);
                }
                if (interrupted) {
                    Thread.currentThread().interrupt(); // the ack wait went on; the caller learns of it now
                }
            }
        }
    }

    /** See {@link CoherentHeap#exclusive}. */
    <R> R exclusive(RemoteRef<?> ref, LongFunction<R> action) {
        long scope = OperationDeadline.enter(ctx.config.timeout());
        try {
            return exclusiveWithin(ref, action);
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    private <R> R exclusiveWithin(RemoteRef<?> ref, LongFunction<R> action) {
        long deadline = ctx.deadline();
        long ptr = ref.ptr();
        Backoff backoff = null;
        while (true) {
            byte[] b = ctx.memory.read(ptr, 16);
            HeapContext.checkBlock(ptr, ref.generationHeader(), Words.getLong(b, 0), "lock");
            long h = Words.getLong(b, 8);
            if (ObjectLayout.locked(h)) {
                recovery.maybeRecover(ref, h);
                backoff = ctx.pause(backoff, deadline, "lock", ptr);
                continue;
            }
            long mine = ObjectLayout.lockedBy(h, ctx.self);
            long lockedAt = System.nanoTime();
            if (ctx.memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, h, mine) != h) {
                backoff = ctx.pause(backoff, deadline, "lock", ptr);
                continue;
            }
            boolean interrupted = false;
            try {
                byte[] now = new byte[8];
                Words.putLong(now, 0, ctx.clock.nowMicros());
                CompletableFuture<Void> stamp = ctx.memory.writeAsync(ref.payload() + ObjectLayout.LOCKED_AT, now);
                byte[] ls = ctx.memory.read(ref.payload() + ObjectLayout.LEASE, 16);
                ctx.memory.await(stamp);
                interrupted = invalidator.invalidateSharers(ref, Words.getLong(ls, 0), Words.getLong(ls, 8), deadline);
                // half the lock timeout: the other half is the margin for the last change's verb in flight
                long lastChange = lockedAt + ctx.config.lockTimeout().toNanos() / 2;
                return action.apply(lastChange);
            } finally {
                release(ref, mine, h);
                cache.invalidate(ptr);
                if (interrupted) {
                    Thread.currentThread().interrupt(); // the ack wait went on; the caller learns of it now
                }
            }
        }
    }

    /** Frees the object: later reads and writes through any handle fail with UseAfterFreeException. */
    void free(RemoteRef<?> ref) {
        long scope = OperationDeadline.enter(ctx.config.timeout());
        try {
            freeWithin(ref);
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    private void freeWithin(RemoteRef<?> ref) {
        long deadline = ctx.deadline();
        Backoff backoff = null;
        while (true) {
            Snapshot s = reader.validatedRead(ref, deadline);
            long h = s.header();
            if (ObjectLayout.locked(h)) {
                recovery.maybeRecover(ref, h);
                backoff = ctx.pause(backoff, deadline, "free", ref.ptr());
                continue;
            }
            long mine = ObjectLayout.lockedBy(h, ctx.self);
            if (ctx.memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, h, mine) != h) {
                backoff = ctx.pause(backoff, deadline, "free", ref.ptr());
                continue;
            }
            byte[] ls = ctx.memory.read(ref.payload() + ObjectLayout.LEASE, 16);
            boolean interrupted = invalidator.invalidateSharers(ref, Words.getLong(ls, 0), Words.getLong(ls, 8),
                    deadline);
            for (int slot = 0; slot < 2; slot++) {
                BlockRef out = outOfLine(ref, slot);
                if (out != null) {
                    try {
                        ctx.allocator.free(out);
                    } catch (DsmException e) {
                        LOG.debug("out-of-line value of {} already freed: {}", RemotePtr.toString(ref.ptr()),
                                e.getMessage());
                    }
                }
            }
            ctx.allocator.free(ref.block());
            cache.forget(ref.ptr());
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            return;
        }
    }

    private void release(RemoteRef<?> ref, long mine, long h) {
        // an interrupted thread must still release (a waiting verb would fail at once): flag off for the CAS;
        // after the operation's deadline too, with a short budget of its own (OperationDeadline.CLEANUP): a lock
        // left behind costs every other writer the lock timeout
        boolean interrupted = Thread.interrupted();
        long scope = OperationDeadline.enterCleanup();
        try {
            ctx.memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, mine,
                    ObjectLayout.unlocked(ObjectLayout.slot(h), ObjectLayout.version(h) + 1));
        } catch (DsmException e) {
            LOG.warn("could not release the write lock of {} ({}); a survivor recovers it after the lock timeout",
                    RemotePtr.toString(ref.ptr()), e.getMessage());
        } finally {
            OperationDeadline.exit(scope);
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The out-of-line block slot {@code s} points to, or null. */
    private BlockRef outOfLine(RemoteRef<?> ref, int s) {
        byte[] b = ctx.memory.read(ref.payload() + ObjectLayout.slotOffset(s, ref.slotCapacity()),
                ObjectLayout.SLOT_PREFIX + ObjectLayout.OUT_OF_LINE_BYTES);
        if ((int) (Words.getLong(b, 0) >>> 32) != ObjectLayout.OUT_OF_LINE) {
            return null;
        }
        try {
            return BlockRef.of(Words.getLong(b, 8), Words.getLong(b, 16), Words.getLong(b, 24));
        } catch (DsmException e) {
            return null;
        }
    }

    /** Writes {@code bytes} into slot {@code s}; returns the out-of-line block it allocated, if any. */
    private BlockRef writeSlot(BlockRef block, int cap, int s, byte[] bytes) {
        byte[] slot;
        BlockRef out = null;
        if (bytes.length <= cap) {
            slot = new byte[ObjectLayout.SLOT_PREFIX + bytes.length];
            Words.putLong(slot, 0, bytes.length & 0xffffffffL);
            System.arraycopy(bytes, 0, slot, ObjectLayout.SLOT_PREFIX, bytes.length);
        } else {
            out = ctx.allocator.allocate(bytes.length, Placement.node(block.nodeId()));
            try {
                ctx.allocator.write(out, 0, bytes);
            } catch (DsmException e) {
                if (!e.mayHaveRun()) { // refused before it was sent: it can never land, so the block goes back
                    try {
                        ctx.allocator.free(out);
                    } catch (RuntimeException f) {
                        e.addSuppressed(f);
                    }
                }
                throw e;
            }
            slot = new byte[ObjectLayout.SLOT_PREFIX + ObjectLayout.OUT_OF_LINE_BYTES];
            Words.putLong(slot, 0, (long) ObjectLayout.OUT_OF_LINE << 32 | (bytes.length & 0xffffffffL));
            Words.putLong(slot, 8, out.ptr());
            Words.putLong(slot, 16, out.header());
            Words.putLong(slot, 24, out.capacity());
        }
        ctx.memory.write(block.payload() + ObjectLayout.slotOffset(s, cap), slot);
        return out;
    }
}
