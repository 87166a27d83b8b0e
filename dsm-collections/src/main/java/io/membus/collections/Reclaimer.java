package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.SizeClasses;
import io.membus.alloc.StaleBlockReferenceException;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Frees the entry blocks this node took out of a map, once no reader can still be
 * reading them. An entry whose slot word was replaced by a CAS of this node is
 * <em>retired</em> here; its block is freed only after the map's grace period:
 * every lookup that started before the CAS either ends within half the grace or
 * starts over (see {@link MapStore}), so nobody reads the block once it is freed.
 * An entry still named by a frozen slot of an old table waits, in addition, until
 * this node saw the root move past that table ({@link #rootAdvanced}).
 *
 * <p>The free itself goes through {@link GlobalAllocator#free}: the pointer's block
 * header is read, checked against the entry's own copy of it, and freed with the
 * generation CAS, so a block is never freed twice or freed as someone else's.
 *
 * <p><b>Note:</b> thread-safe: any thread retires; {@link #drain} frees on the calling
 * thread, outside the internal lock (the lock is never held across a verb).
 */
final class Reclaimer {
    private static final Logger LOG = LoggerFactory.getLogger(Reclaimer.class);
    private static final int DRAIN_BATCH = 32;

    private final GlobalAllocator heap;
    private final long graceNanos;
    private final ReentrantLock lock = new ReentrantLock();
    /** Retired blocks with the time they were retired, oldest first. Guarded by {@link #lock}. */
    private final ArrayDeque<long[]> limbo = new ArrayDeque<>();
    /** Blocks to retire once the root moved past the table of that sequence number. Guarded by {@link #lock}. */
    private final TreeMap<Long, List<Long>> afterTable = new TreeMap<>();
    private final java.util.concurrent.atomic.AtomicLong freed = new java.util.concurrent.atomic.AtomicLong();

    Reclaimer(GlobalAllocator heap, long graceNanos) {
        this.heap = heap;
        this.graceNanos = graceNanos;
    }

    /** The entry block at {@code ptr} is no longer named by any slot word this map will read. */
    void retire(long ptr) {
        long now = System.nanoTime();
        lock.lock();
        try {
            limbo.addLast(new long[]{ptr, now});
        } finally {
            lock.unlock();
        }
    }

    /** The block at {@code ptr} is still named by a frozen slot of the table of sequence {@code seq}. */
    void retireAfterTable(long seq, long ptr) {
        lock.lock();
        try {
            afterTable.computeIfAbsent(seq, s -> new ArrayList<>()).add(ptr);
        } finally {
            lock.unlock();
        }
    }

    /** The root names the table of sequence {@code rootSeq}: every table before it is no longer read. */
    void rootAdvanced(long rootSeq) {
        long now = System.nanoTime();
        lock.lock();
        try {
            Map<Long, List<Long>> passed = afterTable.headMap(rootSeq, false);
            for (List<Long> ptrs : passed.values()) {
                for (long p : ptrs) {
                    limbo.addLast(new long[]{p, now});
                }
            }
            passed.clear();
        } finally {
            lock.unlock();
        }
    }

    /** Frees up to a batch of blocks whose grace has passed. Never blocks on another drainer. */
    void drain() {
        if (!lock.tryLock()) {
            return;
        }
        long[] due = new long[DRAIN_BATCH];
        int n = 0;
        try {
            long now = System.nanoTime();
            while (n < DRAIN_BATCH && !limbo.isEmpty() && now - limbo.peekFirst()[1] >= graceNanos) {
                due[n++] = limbo.pollFirst()[0];
            }
        } finally {
            lock.unlock();
        }
        for (int i = 0; i < n; i++) {
            free(due[i]);
        }
    }

    /** Blocks waiting for their grace or for a table to be passed. */
    int pending() {
        lock.lock();
        try {
            int n = limbo.size();
            for (List<Long> l : afterTable.values()) {
                n += l.size();
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    long freed() {
        return freed.get();
    }

    /** Waits out the grace of everything in limbo (at most one grace period) and frees it. */
    void drainAll() {
        long deadline = System.nanoTime() + graceNanos + 1_000_000_000L;
        while (true) {
            drain();
            long wait;
            lock.lock();
            try {
                if (limbo.isEmpty()) {
                    return;
                }
                wait = graceNanos - (System.nanoTime() - limbo.peekFirst()[1]);
            } finally {
                lock.unlock();
            }
            if (System.nanoTime() > deadline) {
                return;
            }
            if (wait > 0) {
                try {
                    Thread.sleep(Math.max(1, wait / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    private void free(long ptr) {
        try {
            byte[] b = heap.memory().read(ptr, 16);
            long header = MapLayout.unsealHeader(MapLayout.getLong(b, 0), ptr);
            long copy = MapLayout.getLong(b, 8);
            if (header != copy) {
                LOG.error("not freeing map entry block={}: its header {} is not the entry's copy {} (freed elsewhere?)",
                        RemotePtr.toString(ptr), Long.toHexString(header), Long.toHexString(copy));
                return;
            }
            long capacity = HeapLayout.kindOf(header) == HeapLayout.KIND_SMALL
                    ? SizeClasses.blockSize(HeapLayout.blockClassOf(header)) - HeapLayout.BLOCK_HEADER_LENGTH : 0;
            heap.free(BlockRef.of(ptr, header, capacity));
            freed.incrementAndGet();
        } catch (StaleBlockReferenceException e) {
            LOG.error("map entry block={} was already freed: {}", RemotePtr.toString(ptr), e.getMessage());
        } catch (DsmException e) {
            // unreachable node: the block stays allocated (it is reported, not retried forever)
            LOG.warn("could not free map entry block={}: {}", RemotePtr.toString(ptr), e.getMessage());
        }
    }
}
