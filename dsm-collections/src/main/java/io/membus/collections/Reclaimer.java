package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.SizeClasses;
import io.membus.alloc.StaleBlockReferenceException;
import io.membus.core.Backoff;
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
 * starts over (see {@link SlotScan}), so nobody reads the block once it is freed.
 * An entry still named by a frozen slot of an old table waits, in addition, until
 * this node saw the root move past that table ({@link #rootAdvanced}).
 *
 * <p>The free itself goes through {@link GlobalAllocator#free}: the pointer's block
 * header is read, checked against the entry's own copy of it, and freed with the
 * generation CAS, so a block is never freed twice or freed as someone else's.
 *
 * <p><b>Note:</b> thread-safe: any thread retires; {@link #drain} hands due blocks to one
 * daemon freeing thread shared by the JVM's maps ({@link #drainAll} frees on the calling
 * thread and waits for those in flight); the internal lock is never held across a verb.
 */
final class Reclaimer {
    private static final Logger LOG = LoggerFactory.getLogger(Reclaimer.class);
    private static final int DRAIN_BATCH = 32;
    private static final int MAX_ATTEMPTS = 5;
    private static final long[] NONE = new long[0];
    /**
     * How {@link #drainAll} waits for the rest of a grace (or for frees in flight): parks from
     * 1 ms doubling to 10 ms between looks, so it ends at most about 10 ms after the last block
     * came due.
     */
    private static final Backoff.Policy DRAIN_WAIT = new Backoff.Policy(0, 0, 1_000_000, 10_000_000);

    private final GlobalAllocator heap;
    private final long graceNanos;
    private final java.util.function.LongSupplier clock;
    /** Blocks whose free failed with a transient error: the header to free them with, and the attempts so far. */
    private final java.util.concurrent.ConcurrentHashMap<Long, long[]> retries = new java.util.concurrent.ConcurrentHashMap<>();
    private final ReentrantLock lock = new ReentrantLock();
    /** Retired blocks with the time they were retired, oldest first. Guarded by {@link #lock}. */
    private final ArrayDeque<long[]> limbo = new ArrayDeque<>();
    /** Blocks to retire once the root moved past the table of that sequence number. Guarded by {@link #lock}. */
    private final TreeMap<Long, List<Long>> afterTable = new TreeMap<>();
    private final java.util.concurrent.atomic.AtomicLong freed = new java.util.concurrent.atomic.AtomicLong();
    /** Frees handed to {@link #FREER} and not finished yet. */
    private final java.util.concurrent.atomic.AtomicInteger inFlight = new java.util.concurrent.atomic.AtomicInteger();
    /**
     * One daemon thread for every map of this JVM: frees take two or three verbs, which
     * changes should not wait for.
     */
    private static final java.util.concurrent.ExecutorService FREER = java.util.concurrent.Executors
            .newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "membus-map-reclaim");
                t.setDaemon(true);
                return t;
            });

    Reclaimer(GlobalAllocator heap, long graceNanos) {
        this(heap, graceNanos, System::nanoTime);
    }

    /** With {@code clock} as the time (in nanoseconds) blocks are retired and come due at; tests step it. */
    Reclaimer(GlobalAllocator heap, long graceNanos, java.util.function.LongSupplier clock) {
        this.heap = heap;
        this.graceNanos = graceNanos;
        this.clock = clock;
    }

    /** The entry block at {@code ptr} is no longer named by any slot word this map will read. */
    void retire(long ptr) {
        long now = clock.getAsLong();
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
        long now = clock.getAsLong();
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

    /**
     * Hands a batch of blocks whose grace has passed to the freeing thread; never blocks.
     * Only a whole batch ({@value #DRAIN_BATCH} blocks) is handed over, or whatever is due
     * once the oldest block waited twice its grace: a change that found one block due and
     * woke the freeing thread for it paid a thread wake-up per change, the CPU of a round
     * trip on a busy machine.
     */
    void drain() {
        long[] due = takeDue(true);
        if (due.length == 0) {
            return;
        }
        inFlight.incrementAndGet();
        try {
            FREER.execute(() -> {
                try {
                    for (long p : due) {
                        free(p);
                    }
                } finally {
                    inFlight.decrementAndGet();
                }
            });
        } catch (java.util.concurrent.RejectedExecutionException e) {
            inFlight.decrementAndGet();
            for (long p : due) {
                free(p);
            }
        }
    }

    /** Frees, on this thread, up to a batch of blocks whose grace has passed. */
    void drainHere() {
        for (long p : takeDue(false)) {
            free(p);
        }
    }

    /**
     * Up to a batch of the blocks whose grace has passed, taken out of limbo. With
     * {@code wholeBatch}, none unless a whole batch is due or the oldest waited twice its
     * grace.
     */
    private long[] takeDue(boolean wholeBatch) {
        if (!lock.tryLock()) {
            return NONE;
        }
        try {
            long now = clock.getAsLong();
            long[] oldest = limbo.peekFirst();
            if (oldest == null || now - oldest[1] < graceNanos) {
                return NONE;
            }
            int n = 0;
            if (wholeBatch && now - oldest[1] < 2 * graceNanos) {
                for (long[] b : limbo) { // oldest first: the due ones are a prefix
                    if (n == DRAIN_BATCH || now - b[1] < graceNanos) {
                        break;
                    }
                    n++;
                }
                if (n < DRAIN_BATCH) {
                    return NONE;
                }
            }
            long[] due = new long[DRAIN_BATCH];
            n = 0;
            while (n < DRAIN_BATCH && !limbo.isEmpty() && now - limbo.peekFirst()[1] >= graceNanos) {
                due[n++] = limbo.pollFirst()[0];
            }
            return n == DRAIN_BATCH ? due : java.util.Arrays.copyOf(due, n);
        } finally {
            lock.unlock();
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

    /** Waits out the grace of everything in limbo (at most one grace period) and frees it, and the frees in flight. */
    void drainAll() {
        long deadline = System.nanoTime() + graceNanos + 30_000_000_000L;
        Backoff pauses = new Backoff(DRAIN_WAIT, deadline);
        while (true) {
            drainHere();
            long wait;
            lock.lock();
            try {
                if (limbo.isEmpty() && inFlight.get() == 0) {
                    return;
                }
                if (limbo.isEmpty()) {
                    wait = 1_000_000;
                } else {
                    wait = graceNanos - (clock.getAsLong() - limbo.peekFirst()[1]);
                }
            } finally {
                lock.unlock();
            }
            if (wait > 0) {
                try {
                    if (!pauses.pauseInterruptibly()) {
                        return; // the deadline passed
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            } else if (pauses.expired()) {
                return;
            }
        }
    }

    private void free(long ptr) {
        long[] again = retries.get(ptr);
        long header = again != null ? again[0] : 0;
        try {
            if (header == 0) {
                byte[] b = heap.memory().read(ptr, 16);
                header = MapLayout.unsealHeader(MapLayout.getLong(b, 0), ptr);
                long copy = MapLayout.getLong(b, 8);
                if (header != copy) {
                    LOG.error("not freeing map entry block={}: its header {} is not the entry's copy {} (freed elsewhere?)",
                            RemotePtr.toString(ptr), Long.toHexString(header), Long.toHexString(copy));
                    return;
                }
            }
            long capacity = HeapLayout.kindOf(header) == HeapLayout.KIND_SMALL
                    ? SizeClasses.blockSize(HeapLayout.blockClassOf(header)) - HeapLayout.BLOCK_HEADER_LENGTH : 0;
            heap.free(BlockRef.of(ptr, header, capacity));
            freed.incrementAndGet();
        } catch (StaleBlockReferenceException e) {
            // a retried free whose first CAS had landed after all: the block is free
            if (again == null || again[0] == 0) {
                LOG.error("map entry block={} was already freed: {}", RemotePtr.toString(ptr), e.getMessage());
            }
        } catch (DsmException e) {
            // a slow or unreachable node: try again after another grace with the header read first (so a retry
            // can only free this very generation of the block), a few times, then report and keep it
            long[] state = retries.computeIfAbsent(ptr, p -> new long[]{0, 0});
            state[0] = header;
            if (++state[1] < MAX_ATTEMPTS) {
                retire(ptr);
                return;
            }
            LOG.warn("could not free map entry block={} after {} attempts: {}", RemotePtr.toString(ptr), state[1],
                    e.getMessage());
        }
        retries.remove(ptr);
    }
}
