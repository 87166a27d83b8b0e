package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.InvalidBlockException;
import io.membus.alloc.SizeClasses;
import io.membus.alloc.StaleBlockReferenceException;
import io.membus.core.Backoff;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * Frees the entry blocks this node took out of a map, once no reader can still be
 * reading them. An entry whose slot word was replaced by a CAS of this node is
 * <em>retired</em> here; its block is freed only after the map's grace period:
 * every lookup that started before the CAS either ends within half the grace or
 * starts over (see {@link SlotScan}), so nobody reads the block once it is freed.
 * An entry still named by a frozen slot of an old table waits, in addition, until
 * this node saw the root move past that table ({@link #rootAdvanced}).
 *
 * <p><b>The free.</b> A block is freed with the allocator's generation CAS, which needs
 * the header the block was allocated with. A retired block carries it when the retiring
 * node knows it — the entry was read from its block (the header is checked against the
 * entry's copy), or this node installed the entry itself ({@link #noteInstalled}) — and
 * then its free is that CAS alone. Otherwise (an entry decided from its slot's inline copy
 * and written by another node, entries retired by a migration) the header is read first,
 * with the entry's copy beside it, and the block is freed only when the two agree. A carried
 * header that is not the block's any more (this node's note of an entry that another node
 * replaced, freed and saw reused) makes the CAS fail without freeing anything (a stale generation,
 * or no block of that class when the chunk was reused); that block is then freed through the read.
 * A failed free is tried again after another grace with the header its CAS was sent with when that
 * CAS may have landed, or the one read and checked, else with none (read again): a retry only frees
 * the generation retired. So a block is never freed twice or freed as another entry's.
 * Due blocks are freed together ({@link GlobalAllocator#freeAll}): the header reads of all of
 * them in one batch per node, then all the CASes in one batch per node, both on the pipelined
 * path (no blocking lane of the connection is held), and the free-list pushes one chain per chunk.
 *
 * <p><b>The bound.</b> Retired blocks not yet freed — in limbo, being freed, waiting to be
 * tried again — are at most {@link #DEFAULT_BOUND} per map and node (the constructor's
 * {@code bound}); entries that wait for an old table to be passed are not counted until it
 * is. A change reserves its place before it starts ({@link #admit}): when the map is at the
 * bound, the changing thread frees due blocks itself (back-pressure on the writer, as an
 * allocator's), and when none is due yet it waits for the oldest one's grace, under the
 * operation's deadline: past that the change fails with a timeout before it changed anything
 * ({@link DsmMapException}, reason {@code reclaim-bound}). No block is ever dropped to make room.
 *
 * <p><b>Note:</b> thread-safe: any thread admits, retires and drains; {@link #drain} hands
 * due blocks to one daemon freeing thread shared by the JVM's maps ({@link #drainAll} frees on
 * the calling thread and waits for those in flight); the internal lock is never held across a
 * verb. {@link #held} and the counts are atomics; the limbo and the table waits are guarded by
 * {@link #lock}, whose release publishes a retired block's pointer and header to the thread that
 * frees it.
 */
final class Reclaimer {
    private static final Logger LOG = LoggerFactory.getLogger(Reclaimer.class);
    /**
     * Retired blocks not yet freed, per map and node, beyond which changes wait ({@link #admit}).
     * Above the rate times the grace a healthy map holds anyway (no block is freed before its
     * grace: 32,768 throttled a client putting 21,000 a second at a 1 s grace), so only a freeing
     * that cannot keep up at all meets it.
     */
    static final int DEFAULT_BOUND = 131_072;
    /** A change wakes the freeing thread for this many due blocks (or for what waited twice its grace). */
    private static final int DRAIN_BATCH = 32;
    /** The most blocks one free call takes ({@link GlobalAllocator#freeAll}: one batch per node of each verb). */
    private static final int FREE_BATCH = 1024;
    /**
     * The most free calls one task of the freeing thread makes ({@link #freeWhileDue}); when more
     * is due it is handed over again, behind the other maps' tasks that wait on the one thread.
     */
    private static final int ROUNDS_PER_TASK = 4;
    private static final int MAX_ATTEMPTS = 5;
    /** The longest a change at the bound waits before it looks again (10 ms). */
    private static final long ROOM_LOOK = 10_000_000L;
    /** How many installed entries' headers this node remembers ({@link #noteInstalled}); past it, the notes start over. */
    private static final int NOTES = 65_536;
    private static final long[][] NONE = new long[0][];
    /**
     * How {@link #drainAll} waits for the rest of a grace (or for frees in flight): parks from
     * 1 ms doubling to 10 ms between looks, so it ends at most about 10 ms after the last block
     * came due.
     */
    private static final Backoff.Policy DRAIN_WAIT = new Backoff.Policy(0, 0, 1_000_000, 10_000_000);

    private final GlobalAllocator heap;
    private final RemoteMemory mem;
    private final long graceNanos;
    private final LongSupplier clock;
    private final int bound;
    /** {@link GlobalAllocator#freeAll} of {@link #heap}; tests replace it to inject failures ({@link #failFrees}). */
    private volatile java.util.function.Function<BlockRef[], DsmException[]> freeAll;
    /** Blocks whose free failed with a transient error or a stale header: {header (0: read it), attempts}. */
    private final ConcurrentHashMap<Long, long[]> retries = new ConcurrentHashMap<>();
    /** Headers of the entries this node installed, by block pointer; a hint checked by the free's CAS. */
    private final ConcurrentHashMap<Long, Long> installed = new ConcurrentHashMap<>();
    private final ReentrantLock lock = new ReentrantLock();
    /** Signalled (under {@link #lock}) when blocks stop being held: a change waiting for room looks again. */
    private final Condition room = lock.newCondition();
    /**
     * Changes waiting on {@link #room} (raised under {@link #lock} before the change looks at
     * {@link #held} a last time and waits): only then does giving a place back take the lock.
     */
    private final AtomicInteger roomWaiters = new AtomicInteger();
    /** Retired blocks {ptr, header or 0, retired at}, oldest first. Guarded by {@link #lock}. */
    private final ArrayDeque<long[]> limbo = new ArrayDeque<>();
    /** Blocks {ptr, header or 0} to retire once the root moved past the table of that sequence number. Guarded by {@link #lock}. */
    private final TreeMap<Long, List<long[]>> afterTable = new TreeMap<>();
    /** Blocks retired and not yet freed or given up (limbo, being freed) plus the places changes reserved ({@link #admit}). */
    private final AtomicInteger held = new AtomicInteger();
    /** Blocks taken out of limbo and not yet freed or put back. */
    private final AtomicInteger freeing = new AtomicInteger();
    private final AtomicLong freed = new AtomicLong();
    /** Tasks handed to {@link #FREER} and not finished yet. */
    private final AtomicInteger inFlight = new AtomicInteger();
    /** A task of this reclaimer is queued or running on {@link #FREER} (at most one at a time). */
    private final java.util.concurrent.atomic.AtomicBoolean scheduled = new java.util.concurrent.atomic.AtomicBoolean();
    /**
     * One daemon thread for every map of this JVM: frees take verbs, which changes should not
     * wait for (unless a map is at its bound: {@link #admit}).
     */
    private static final java.util.concurrent.ExecutorService FREER = java.util.concurrent.Executors
            .newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "membus-map-reclaim");
                t.setDaemon(true);
                return t;
            });

    Reclaimer(GlobalAllocator heap, long graceNanos) {
        this(heap, graceNanos, System::nanoTime, DEFAULT_BOUND);
    }

    /**
     * With {@code clock} as the time (in nanoseconds) blocks are retired and come due at (tests
     * step it), and at most {@code bound} blocks held ({@link #admit}).
     */
    Reclaimer(GlobalAllocator heap, long graceNanos, LongSupplier clock, int bound) {
        if (bound < 1) {
            throw new IllegalArgumentException("bound must be at least 1: " + bound);
        }
        this.heap = heap;
        this.mem = heap.memory();
        this.graceNanos = graceNanos;
        this.clock = clock;
        this.bound = bound;
        this.freeAll = heap::freeAll;
    }

    /** Tests only: frees go through {@code f} (given the allocator's own freeAll) instead, to inject failures. */
    void failFrees(java.util.function.BiFunction<java.util.function.Function<BlockRef[], DsmException[]>, BlockRef[],
            DsmException[]> f) {
        java.util.function.Function<BlockRef[], DsmException[]> real = heap::freeAll;
        freeAll = refs -> f.apply(real, refs);
    }

    // ================================================================ admission (the bound)

    /**
     * Reserves the place of the block the caller's change may retire; the caller then either
     * retires (its {@link #retire} takes the place over: call {@link #release} after it too) or
     * only calls {@link #release}. When {@link #bound} blocks are held, frees due blocks on this
     * thread, or waits for the oldest one's grace (or for frees in flight), until there is room
     * or the operation's deadline ({@link OperationDeadline}, else {@code timeoutNanos} from now)
     * has passed.
     *
     * @throws DsmMapException (reason {@code reclaim-bound}, a timeout that did not run) when the
     *         deadline passed first
     */
    void admit(long timeoutNanos) {
        long until = OperationDeadline.until(System.nanoTime(), timeoutNanos);
        while (true) {
            int h = held.get();
            if (h < bound) {
                if (held.compareAndSet(h, h + 1)) {
                    return;
                }
                continue;
            }
            ReclaimCounts.boundHits.increment();
            long[][] due = takeDue(false, FREE_BATCH);
            if (due.length > 0) {
                ReclaimCounts.helped.add(due.length);
                free(due);
            }
            long left = until - System.nanoTime();
            if (due.length > 0 && held.get() < bound) {
                continue;
            }
            if (left <= 0) {
                throw DsmMapException.reclaimBound(held.get(), bound, "none came due before the operation's deadline");
            }
            lock.lock();
            roomWaiters.incrementAndGet(); // before the look at held: a release after that look sees it
            try {
                if (held.get() < bound) {
                    continue;
                }
                // until the oldest block's grace ends, or for frees in flight (signalled when they end; a
                // signal missed under contention costs at most ROOM_LOOK), never past the deadline
                long[] oldest = limbo.peekFirst();
                long wait = Math.min(left, oldest == null ? ROOM_LOOK
                        : Math.min(ROOM_LOOK, graceNanos - (clock.getAsLong() - oldest[2])));
                if (wait > 0) {
                    ReclaimCounts.boundWaits.increment();
                    room.awaitNanos(Math.max(wait, 1_000));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw DsmMapException.reclaimBound(held.get(), bound, "interrupted while waiting for room");
            } finally {
                roomWaiters.decrementAndGet();
                lock.unlock();
            }
        }
    }

    /** Gives back the place {@link #admit} reserved. */
    void release() {
        held.decrementAndGet();
        signalRoom();
    }

    private void signalRoom() {
        // only when a change waits (most changes meet no bound: no lock taken); a waiter that misses this
        // looks again by its wait's end
        if (roomWaiters.get() > 0 && held.get() < bound && lock.tryLock()) {
            try {
                room.signalAll();
            } finally {
                lock.unlock();
            }
        }
    }

    // ================================================================ retiring

    /**
     * This node installed an entry in block {@code ptr} allocated with {@code header}: a
     * later retire of {@code ptr} by this node carries it (a hint, checked by the free's CAS).
     */
    void noteInstalled(long ptr, long header) {
        if (installed.size() >= NOTES) {
            installed.clear(); // notes of entries other nodes replaced stay otherwise; starting over only costs reads
        }
        installed.put(ptr, header);
    }

    /**
     * The entry block at {@code ptr} is no longer named by any slot word this map will read;
     * {@code header}: its block header when the caller knows it (read with the entry), 0 when not.
     */
    void retire(long ptr, long header) {
        long known = carried(ptr, header);
        long now = clock.getAsLong();
        held.incrementAndGet();
        ReclaimCounts.retired.increment();
        lock.lock();
        try {
            limbo.addLast(new long[]{ptr, known, now});
        } finally {
            lock.unlock();
        }
    }

    /** {@link #retire} with no header known. */
    void retire(long ptr) {
        retire(ptr, 0);
    }

    private long carried(long ptr, long header) {
        Long noted = installed.remove(ptr);
        return header != 0 ? header : noted != null ? noted : 0;
    }

    /** The block at {@code ptr} is still named by a frozen slot of the table of sequence {@code seq}. */
    void retireAfterTable(long seq, long ptr) {
        long known = carried(ptr, 0);
        lock.lock();
        try {
            afterTable.computeIfAbsent(seq, s -> new ArrayList<>()).add(new long[]{ptr, known});
        } finally {
            lock.unlock();
        }
    }

    /** The root names the table of sequence {@code rootSeq}: every table before it is no longer read. */
    void rootAdvanced(long rootSeq) {
        long now = clock.getAsLong();
        lock.lock();
        try {
            Map<Long, List<long[]>> passed = afterTable.headMap(rootSeq, false);
            for (List<long[]> blocks : passed.values()) {
                for (long[] b : blocks) {
                    held.incrementAndGet();
                    ReclaimCounts.retired.increment();
                    limbo.addLast(new long[]{b[0], b[1], now});
                }
            }
            passed.clear();
        } finally {
            lock.unlock();
        }
    }

    // ================================================================ freeing

    /**
     * Wakes the freeing thread for this map's due blocks; never blocks. Only for a whole batch
     * ({@value #DRAIN_BATCH} blocks due), or whatever is due once the oldest block waited twice
     * its grace: a change that found one block due and woke the freeing thread for it paid a
     * thread wake-up per change, the CPU of a round trip on a busy machine. Once awake, the
     * freeing thread frees up to {@value #FREE_BATCH} due blocks per call, and again while whole
     * batches are due (at most {@value #ROUNDS_PER_TASK} calls per task, then queued again), so
     * frees that fell behind go out in few, large batches.
     */
    void drain() {
        if (scheduled.get() || !wholeBatchDue()) {
            return;
        }
        if (!scheduled.compareAndSet(false, true)) {
            return;
        }
        inFlight.incrementAndGet();
        try {
            FREER.execute(this::freeWhileDue);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            freeWhileDue();
        }
    }

    /**
     * The freeing thread's task: frees due blocks while whole batches are due, at most
     * {@value #ROUNDS_PER_TASK} calls; then, when more is due, hands itself over again (behind
     * the tasks of the other maps: one map that falls behind does not hold the JVM's one freeing
     * thread).
     */
    private void freeWhileDue() {
        boolean more = false;
        try {
            long[][] due = takeDue(false, FREE_BATCH);
            for (int round = 1; due.length > 0; round++) {
                free(due);
                if (round == ROUNDS_PER_TASK) {
                    more = true;
                    break;
                }
                due = takeDue(true, FREE_BATCH);
            }
        } finally {
            scheduled.set(false);
            inFlight.decrementAndGet();
        }
        if (more) {
            drain(); // queued again only when a whole batch is due (else the next change's drain hands it over)
        }
    }

    /** Whether {@value #DRAIN_BATCH} blocks are due, or the oldest waited twice its grace (a look under the lock, no verb). */
    private boolean wholeBatchDue() {
        if (!lock.tryLock()) {
            return false;
        }
        try {
            return dueCount(clock.getAsLong(), true) > 0;
        } finally {
            lock.unlock();
        }
    }

    /** Frees, on this thread, up to a batch of blocks whose grace has passed. */
    void drainHere() {
        long[][] due = takeDue(false, FREE_BATCH);
        if (due.length > 0) {
            free(due);
        }
    }

    /**
     * Up to {@code max} of the blocks whose grace has passed, taken out of limbo. With
     * {@code wholeBatch}, none unless {@value #DRAIN_BATCH} are due or the oldest waited twice
     * its grace.
     */
    private long[][] takeDue(boolean wholeBatch, int max) {
        if (!lock.tryLock()) {
            return NONE;
        }
        try {
            long now = clock.getAsLong();
            if (dueCount(now, wholeBatch) == 0) {
                return NONE;
            }
            List<long[]> due = new ArrayList<>();
            while (due.size() < max && !limbo.isEmpty() && now - limbo.peekFirst()[2] >= graceNanos) {
                due.add(limbo.pollFirst());
            }
            freeing.addAndGet(due.size());
            return due.toArray(NONE);
        } finally {
            lock.unlock();
        }
    }

    /**
     * 0 when nothing is due (with {@code wholeBatch}: fewer than {@value #DRAIN_BATCH}, and the
     * oldest waited less than twice its grace), else a positive count. Under {@link #lock}.
     */
    private int dueCount(long now, boolean wholeBatch) {
        long[] oldest = limbo.peekFirst();
        if (oldest == null || now - oldest[2] < graceNanos) {
            return 0;
        }
        if (!wholeBatch || now - oldest[2] >= 2 * graceNanos) {
            return 1;
        }
        int n = 0;
        for (long[] b : limbo) { // oldest first: the due ones are a prefix
            if (n == DRAIN_BATCH || now - b[2] < graceNanos) {
                break;
            }
            n++;
        }
        return n < DRAIN_BATCH ? 0 : n;
    }

    /** Blocks retired and not freed yet: waiting for their grace, for a table to be passed, or being freed. */
    int pending() {
        lock.lock();
        try {
            int n = limbo.size() + freeing.get();
            for (List<long[]> l : afterTable.values()) {
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
                if (limbo.isEmpty() && inFlight.get() == 0 && freeing.get() == 0) {
                    return;
                }
                if (limbo.isEmpty()) {
                    wait = 1_000_000;
                } else {
                    wait = graceNanos - (clock.getAsLong() - limbo.peekFirst()[2]);
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

    /**
     * Frees the due blocks {@code due} ({ptr, header or 0, retired at}): reads the headers not
     * carried (one batch per node), then frees all of them with {@link GlobalAllocator#freeAll}.
     * Every block ends freed, given up (counted off {@link #held}), or back in limbo.
     */
    private void free(long[][] due) {
        int n = due.length;
        long[] headers = new long[n];
        boolean[] wasRead = new boolean[n];
        // the header is the retire's carried hint (a note, maybe stale): not read, not kept from an earlier attempt
        boolean[] hint = new boolean[n];
        boolean casSent = false; // freeAll was called: any block's generation CAS may have landed
        byte[][] read = new byte[n][];
        DsmException[] readErrors = new DsmException[n];
        DsmException[] errors;
        BlockRef[] refs = new BlockRef[n];
        try {
            List<Integer> unknown = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                long[] again = retries.get(due[i][0]);
                headers[i] = again != null ? again[0] : due[i][1];
                hint[i] = again == null && headers[i] != 0;
                if (headers[i] == 0) {
                    unknown.add(i);
                }
            }
            if (!unknown.isEmpty()) {
                ReclaimCounts.headerReads.add(unknown.size());
                RemoteMemory.RemoteBatch batch = mem.batch();
                List<CompletableFuture<byte[]>> reads = new ArrayList<>(unknown.size());
                for (int i : unknown) {
                    reads.add(batch.read(due[i][0], 16));
                }
                batch.submit();
                for (int k = 0; k < unknown.size(); k++) {
                    try {
                        read[unknown.get(k)] = mem.await(reads.get(k));
                    } catch (DsmException e) {
                        readErrors[unknown.get(k)] = e;
                    }
                }
            }
            for (int i = 0; i < n; i++) {
                long ptr = due[i][0];
                if (read[i] != null) {
                    long header = MapLayout.unsealHeader(MapLayout.getLong(read[i], 0), ptr);
                    if (header == MapLayout.getLong(read[i], 8)) {
                        headers[i] = header;
                        wasRead[i] = true;
                    } else {
                        LOG.error("not freeing map entry block={}: its header {} is not the entry's copy {} (freed"
                                + " elsewhere?)", RemotePtr.toString(ptr), Long.toHexString(header),
                                Long.toHexString(MapLayout.getLong(read[i], 8)));
                        headers[i] = 0;
                    }
                }
                if (headers[i] != 0) {
                    refs[i] = ref(ptr, headers[i]);
                }
            }
            ReclaimCounts.freeCalls.increment();
            casSent = true;
            errors = freeAll.apply(refs);
        } catch (RuntimeException e) {
            // not one block's verb (the allocator closed, the transport gone): each block is tried again after
            // another grace, a few times, as after its own verb's failure. Its CAS may have landed (the error
            // may come after the CASes, from a push): the retry keeps the header it was sent with, read or
            // carried, so it can only free this very generation (a read header thrown away would be read again,
            // and the block's next entry, once it is reused, freed). A carried hint no CAS was sent with is dropped
            // (the retry reads the header), as after a CAS error that did not run.
            LOG.warn("freeing {} map entry blocks failed: {}", n, e.toString());
            int given = 0;
            List<long[]> later = new ArrayList<>();
            long now = clock.getAsLong();
            for (int i = 0; i < n; i++) {
                if (retryLater(due[i][0], hint[i] && !casSent ? 0 : headers[i], e.toString())) {
                    later.add(new long[]{due[i][0], due[i][1], now});
                } else {
                    given++;
                }
            }
            settle(List.of(), later, n, given);
            return;
        }
        int done = 0;
        List<long[]> back = new ArrayList<>(); // to limbo's head: due at once (a header to read)
        List<long[]> later = new ArrayList<>(); // to limbo's tail: tried again after another grace
        long now = clock.getAsLong();
        for (int i = 0; i < n; i++) {
            long ptr = due[i][0];
            if (refs[i] == null) {
                if (readErrors[i] != null && retryLater(ptr, 0, readErrors[i].getMessage())) {
                    later.add(new long[]{ptr, 0, now});
                } else {
                    retries.remove(ptr);
                    done++; // given up, or not an entry block any more (logged)
                }
                continue;
            }
            DsmException e = errors[i];
            if (e == null) {
                freed.incrementAndGet();
                ReclaimCounts.freed.increment();
                retries.remove(ptr);
                done++;
            } else if (e instanceof StaleBlockReferenceException || e instanceof InvalidBlockException) {
                // the CAS found another header there and changed nothing
                long[] again = retries.get(ptr);
                if (hint[i]) {
                    // a carried header that is not the block's now (its chunk maybe reused for another size class:
                    // InvalidBlockException): freed through the header read instead
                    ReclaimCounts.staleCarried.increment();
                    retries.put(ptr, new long[]{0, again == null ? 0 : again[1]});
                    back.add(new long[]{ptr, 0, due[i][2]});
                } else {
                    // a header read (checked against the entry's copy) or one a CAS that may have landed was sent
                    // with: that CAS landed after all, or the block was freed elsewhere; never read it again
                    if (again == null) { // (a retried free whose first CAS had landed after all: the block is free)
                        LOG.error("map entry block={} was already freed: {}", RemotePtr.toString(ptr), e.getMessage());
                    }
                    retries.remove(ptr);
                    done++;
                }
            } else if (retryLater(ptr, hint[i] && !e.mayHaveRun() ? 0 : headers[i], e.getMessage())) {
                // a carried hint whose CAS did not run is dropped: the retry reads the header (a stale hint kept
                // would make the retry's CAS fail as if the block were freed already, and leak it)
                later.add(new long[]{ptr, headers[i], now}); // (the retry takes its header from retries)
            } else {
                done++;
            }
        }
        settle(back, later, n, done);
    }

    /**
     * Ends a free call of {@code taken} blocks: {@code back} to limbo's head (due at once),
     * {@code later} to its tail (due after another grace), {@code done} blocks (freed or given
     * up) off {@link #held}.
     */
    private void settle(List<long[]> back, List<long[]> later, int taken, int done) {
        lock.lock();
        try {
            for (int k = back.size() - 1; k >= 0; k--) {
                limbo.addFirst(back.get(k));
            }
            limbo.addAll(later);
            freeing.addAndGet(-taken);
        } finally {
            lock.unlock();
        }
        held.addAndGet(-done);
        signalRoom();
    }

    /**
     * A transient failure of the free of block {@code ptr} (a slow or unreachable node): true
     * when it is to be tried again after another grace, with {@code header}: the header a CAS
     * that may have landed was sent with, or one read and checked (so a retry can only free this
     * very generation of the block), else 0 (the retry reads it); false, reported, after a few attempts.
     */
    private boolean retryLater(long ptr, long header, String why) {
        long[] state = retries.computeIfAbsent(ptr, p -> new long[]{0, 0});
        state[0] = header;
        if (++state[1] < MAX_ATTEMPTS) {
            return true;
        }
        LOG.warn("could not free map entry block={} after {} attempts: {}", RemotePtr.toString(ptr), state[1], why);
        retries.remove(ptr);
        return false;
    }

    private static BlockRef ref(long ptr, long header) {
        long capacity = HeapLayout.kindOf(header) == HeapLayout.KIND_SMALL
                ? SizeClasses.blockSize(HeapLayout.blockClassOf(header)) - HeapLayout.BLOCK_HEADER_LENGTH : 0;
        return BlockRef.of(ptr, header, capacity);
    }
}
