package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.Words;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.metrics.OpEvents;

import java.util.Arrays;
import java.util.BitSet;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import static io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH;
import static io.membus.alloc.HeapLayout.BUMP_WORD;
import static io.membus.alloc.HeapLayout.COUNT_WORD;
import static io.membus.alloc.HeapLayout.FREE;
import static io.membus.alloc.HeapLayout.FREE_HEAD_WORD;
import static io.membus.alloc.HeapLayout.KIND_SMALL;
import static io.membus.alloc.HeapLayout.SMALL;
import static io.membus.alloc.HeapLayout.blockClassOf;
import static io.membus.alloc.HeapLayout.blockHeader;
import static io.membus.alloc.HeapLayout.classOf;
import static io.membus.alloc.HeapLayout.epochOf;
import static io.membus.alloc.HeapLayout.head;
import static io.membus.alloc.HeapLayout.headIndex;
import static io.membus.alloc.HeapLayout.headTag;
import static io.membus.alloc.HeapLayout.kindOf;
import static io.membus.alloc.HeapLayout.ownerOf;
import static io.membus.alloc.HeapLayout.stateOf;
import static io.membus.alloc.HeapSegment.MAX_CAS_RETRIES;
import static io.membus.alloc.HeapSegment.SCAN_SLICE;

/**
 * This node's blocks of one size class in one heap segment: a cache of blocks
 * ready to hand out, the chunks of this class it owns, and the chunk it carves from.
 *
 * <p><b>Note:</b> thread-safe. {@link #lock} guards the cache, {@link #owned},
 * {@link #roomy}, {@link #adoptions} and {@link #busy}, and is never held across a
 * remote verb: a free into the cache, or an allocation the cache can serve, never waits
 * for another thread's verbs. The verbs that change this pool's chunks (carving,
 * taking free lists, claiming, trimming) are issued by one thread at a time, the one
 * that set {@link #busy} under the lock ("claim under the lock, issue the verbs outside,
 * publish under the lock"); others that find the cache empty wait on {@link #idle}
 * with the lock released. {@link #cursor} and {@link #cursorEpoch} belong to the busy
 * thread; the lock's release and acquire hand them from one busy thread to the next
 * (happens-before). A refill ahead of need ({@link #startRefillAhead}) is busy from the
 * allocation that hands it to the allocator's threads until it ends, and a caller or a trim
 * ({@link #beginBusy}) may take it over while it is still queued ({@link #aheadQueued}). A pool never takes another pool's lock.
 */
final class ClassPool {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(ClassPool.class);
    /**
     * A refill ahead starts when an allocation leaves fewer than this many batches cached: the
     * blocks left must outlast the refill (a hand-off to an allocator thread and two round
     * trips, several milliseconds on a loaded machine) at the rate callers take them.
     */
    static final int AHEAD_BATCHES = 2;
    /**
     * How many times its usual limit ({@link #cacheLimit}) the owner's cache keeps of a
     * batched free's blocks ({@link GlobalAllocator#freeAll}): a block pushed on its own
     * chunk's free list comes back only through a refill that walks the list one block per
     * round trip, on an allocating thread, so the owner keeps what it frees in bulk (16,384
     * blocks of the 128-byte class: 256 KiB of this JVM's heap for the pointers and headers).
     */
    static final int BATCHED_CACHE_FACTOR = 64;
    private final Remote remote;
    private final int self;
    final HeapSegment heap;
    final int cls;
    final int blockSize;
    final int perChunk;
    final int batch;
    final int cacheLimit;
    final ReentrantLock lock = new ReentrantLock();
    /** Signalled (under {@link #lock}) when {@link #busy} is cleared. */
    private final Condition idle = lock.newCondition();
    /** A thread refills or trims this pool, issuing verbs on its chunks; guarded by {@link #lock}. */
    private boolean busy;
    /** Chunks of this class this node owns (as far as it knows). */
    final BitSet owned = new BitSet();
    /** Owned chunks whose bump word may still be below the capacity. */
    final BitSet roomy = new BitSet();
    /** Counts {@link #adopted} calls, so a busy thread never forgets a chunk adopted after it read the table. */
    private long adoptions;
    /**
     * A refill ahead found nothing in the chunks this node owns (no room to carve, no free
     * list): none is started again until a caller's refill publishes blocks (usually from a
     * chunk it claimed), so an allocation does not hand a fruitless refill to the allocator's
     * threads each time. Guarded by {@link #lock}.
     */
    private boolean aheadFruitless;
    /**
     * A refill ahead was handed to the allocator's threads and has not started: the pool is
     * busy for it. A caller that finds the cache empty meanwhile takes it over (clears this
     * and runs the refill itself, the pool still busy) rather than wait for a thread that
     * has yet to be scheduled; the handed-off run then finds this clear and does nothing.
     * Guarded by {@link #lock}.
     */
    private boolean aheadQueued;
    long[] ptrs = new long[64];
    long[] headers = new long[64];
    int size;
    int cursor = -1;
    long cursorEpoch;

    ClassPool(HeapSegment heap, int cls) {
        this.heap = heap;
        this.remote = heap.remote;
        this.self = heap.self;
        this.cls = cls;
        this.blockSize = SizeClasses.blockSize(cls);
        this.perChunk = heap.perChunk(cls);
        this.batch = Math.max(1, Math.min(64, Math.min(perChunk, heap.config.batchBytes() / blockSize)));
        this.cacheLimit = Math.max(32, 4 * batch);
    }

    /**
     * A block from the cache; when the cache is empty, this thread refills it (verbs
     * without the lock) unless another thread is doing so, in which case it waits for
     * that refill's blocks.
     *
     * @return a block, or {@code null} when no chunk of this heap has room for one
     */
    BlockRef allocate() {
        while (true) {
            BlockRef got = null;
            boolean ahead = false;
            lock.lock();
            try {
                boolean takeOver = false;
                if (size == 0 && busy && !aheadQueued) {
                    AllocatorCounts.waits.increment();
                    OpEvents.mark(OpEvents.ALLOC_WAIT);
                }
                while (size == 0 && busy) {
                    if (aheadQueued) {
                        // the refill ahead has not started (its thread waits for a CPU): this thread, running,
                        // runs the refill itself instead of waiting for it; the pool stays busy, now for this thread
                        aheadQueued = false;
                        takeOver = true;
                        AllocatorCounts.aheadTakenOver.increment();
                        break;
                    }
                    idle.awaitUninterruptibly(); // the busy thread's verbs are each bounded by their deadline
                }
                if (takeOver) {
                    busy = true; // (already: the refill ahead's, handed to this thread)
                } else if (size > 0) {
                    size--;
                    AllocatorCounts.allocations.increment();
                    got = new BlockRef(ptrs[size], headers[size], blockSize - BLOCK_HEADER_LENGTH);
                    if (size < AHEAD_BATCHES * batch && !busy && !aheadFruitless && remote.ahead != null) {
                        busy = true; // until the refill ahead ends: a trim (or a refill) waits for it as for any
                        aheadQueued = true;
                        ahead = true;
                    }
                } else {
                    busy = true;
                }
            } finally {
                lock.unlock();
            }
            if (got != null) {
                if (ahead) {
                    startRefillAhead();
                }
                return got;
            }
            boolean found = false;
            AllocatorCounts.callerRefills.increment();
            OpEvents.mark(OpEvents.ALLOC_REFILL);
            try {
                found = refill();
            } finally {
                endBusy(found);
            }
            if (!found) {
                lock.lock();
                try {
                    if (size == 0) {
                        return null;
                    }
                } finally {
                    lock.unlock(); // a free cached a block meanwhile: take it on the next round
                }
            }
        }
    }

    /**
     * Caller made this pool busy for a refill ahead of need: hands it to the allocator's
     * threads ({@link Remote#ahead}); the pool stays busy until it ends, so a trim, or a
     * caller that finds the cache empty, waits for it as for a caller's refill. When the
     * threads refuse it (queue full, allocator closed) the pool is idle again at once.
     */
    private void startRefillAhead() {
        java.util.function.Predicate<Runnable> run = remote.ahead;
        boolean started = false;
        try {
            started = run != null && run.test(this::refillAhead);
        } finally {
            if (!started) {
                lock.lock();
                try {
                    if (aheadQueued) { // else a caller took it over meanwhile, and ends the pool's busy state itself
                        aheadQueued = false;
                        busy = false;
                        idle.signalAll();
                    }
                } finally {
                    lock.unlock();
                }
            }
        }
    }

    /**
     * The refill ahead, on an allocator thread, the pool busy from the allocation that
     * started it until it ends: a carve from a chunk this node owns, else the free lists of
     * its owned chunks ({@link #refillFromOwned}); it never scans for or claims a chunk —
     * that stays with the caller that finds the cache empty, so which chunks a class takes,
     * and when, is as without refills ahead (a chunk a trim gave back is taken by the next
     * class that needs one). Because the pool is busy from the moment it is started, not
     * from the moment it runs, a trim that begins after it was started waits for it if it runs
     * (or takes it over, and it then does nothing, if it is still queued), and while a trim runs
     * none is started: it never runs after a trim it did not see. When it
     * finds nothing, none starts again until a caller's refill publishes blocks. A failure
     * is left to the next refill: its verbs are each bounded by their deadline, and blocks a
     * failed step may have taken are never handed out (leaked until their chunk is adopted
     * or trimmed, as after a caller's failed refill).
     */
    private void refillAhead() {
        lock.lock();
        try {
            if (!aheadQueued) {
                return; // a caller that found the cache empty took it over (it ends the busy state)
            }
            aheadQueued = false; // this run serves whichever refill ahead is queued now: each ends busy once
        } finally {
            lock.unlock();
        }
        try {
            AllocatorCounts.aheadRefills.increment();
            OpEvents.begin(); // (diagnostics, when on: did this refill's verbs find a lane free?)
            boolean found = refillFromOwned();
            if ((OpEvents.end() & OpEvents.LANE_FALLBACK) != 0) {
                AllocatorCounts.aheadFallbacks.increment();
            }
            if (!found) {
                lock.lock();
                try {
                    aheadFruitless = true; // nothing owned left: none ahead until a caller's refill (a claim) finds some
                } finally {
                    lock.unlock();
                }
            }
        } catch (RuntimeException e) {
            LOG.debug("refill ahead of need failed (the next allocation that finds the cache empty refills it):"
                    + " node={} segment={} class={}: {}", heap.node, heap.segment, cls, e.toString());
        } finally {
            endBusy();
        }
    }

    /**
     * Waits until no thread refills or trims this pool, then makes the caller that thread. A
     * refill ahead that is queued but has not started is taken over instead of waited for (as
     * {@link #allocate} does, but nothing is refilled: the pool stays busy, now for the caller,
     * and the queued run finds {@link #aheadQueued} clear and returns without ending the busy
     * state). Waiting for it could wait forever: the allocator's threads that would run it may all
     * be blocked on this node's pools, busy for the caller's trim (an out-of-memory's trim on an
     * allocator thread, the others allocating in classes the trim holds).
     */
    void beginBusy() {
        lock.lock();
        try {
            while (busy) {
                if (aheadQueued) {
                    aheadQueued = false; // the pool stays busy, now for this thread; it ends it (endBusy)
                    break;
                }
                idle.awaitUninterruptibly(); // a running refill's or trim's verbs are each bounded by their deadline
            }
            busy = true;
        } finally {
            lock.unlock();
        }
    }

    void endBusy() {
        endBusy(false);
    }

    /** Ends this thread's refill or trim; {@code found}: a caller's refill published blocks (refills ahead resume). */
    private void endBusy(boolean found) {
        lock.lock();
        try {
            busy = false;
            if (found) {
                aheadFruitless = false;
            }
            idle.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** Takes a block freed by this node into the cache when this node owns its chunk. */
    boolean cacheFreed(int chunk, long ptr, long header) {
        return cacheFreed(chunk, ptr, header, cacheLimit);
    }

    /**
     * {@link #cacheFreed} up to {@code limit} cached blocks: a batched free
     * ({@link GlobalAllocator#freeAll}) keeps up to {@link #BATCHED_CACHE_FACTOR} {@code × cacheLimit}, since a block it
     * pushes on a free list instead costs the refill that pops it one read.
     */
    boolean cacheFreed(int chunk, long ptr, long header, int limit) {
        lock.lock();
        try {
            if (size >= limit || !owned.get(chunk)) {
                return false;
            }
            add(ptr, header);
            AllocatorCounts.cachedFrees.increment();
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Caller holds the lock. */
    private void add(long ptr, long header) {
        if (size == ptrs.length) {
            ptrs = Arrays.copyOf(ptrs, size * 2);
            headers = Arrays.copyOf(headers, size * 2);
        }
        ptrs[size] = ptr;
        headers[size++] = header;
    }

    /** Adds blocks {@code from .. to-1} of the arrays to the cache, under the lock. */
    private void publish(long[] ps, long[] hs, int from, int to) {
        lock.lock();
        try {
            for (int i = from; i < to; i++) {
                add(ps[i], hs[i]);
            }
            if (to > from) {
                idle.signalAll(); // threads waiting for blocks may take these before the refill ends
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Caller is busy ({@link #beginBusy}). Pushes every block cached when it is called
     * back on its chunk's free list (blocks freed into the cache meanwhile stay cached): the
     * blocks leave the cache under the lock, are grouped by chunk, and each chunk's are pushed
     * as one pre-linked chain, every chain's steps issued together ({@link HeapSegment#pushChains},
     * as a batched free's: about four round trips for the lot, plus a read and a CAS for the
     * hint of each chunk whose list was empty), where one push per block took about four round
     * trips each — and the owner's cache may hold {@link #BATCHED_CACHE_FACTOR} times its usual
     * limit, while the trim holds every pool of the segment busy. COUNT rises by each chain's
     * length only once its CAS landed, as with one push per block. A chain whose push fails stays
     * freed and on no list (retired, logged, as a batched free's): its chunk's COUNT stays below
     * what was carved, so the chunk is kept; the blocks are not returned to the cache, since a
     * failed CAS may have run.
     */
    void returnCached() {
        long[] ps;
        int n;
        lock.lock();
        try {
            n = size;
            ps = Arrays.copyOf(ptrs, n);
            size = 0;
        } finally {
            lock.unlock();
        }
        cursor = -1;
        if (n == 0) {
            return;
        }
        Arrays.sort(ps); // a chunk's blocks are one run of addresses: a chain per run
        java.util.List<HeapSegment.Chain> chains = new java.util.ArrayList<>();
        for (int from = 0; from < n; ) {
            int c = heap.chunkOf(ps[from]);
            int to = from + 1;
            while (to < n && heap.chunkOf(ps[to]) == c) {
                to++;
            }
            long[] chain = Arrays.copyOfRange(ps, from, to);
            long[] indexes = new long[chain.length];
            for (int i = 0; i < chain.length; i++) {
                indexes[i] = (chain[i] - heap.chunk(c)) / blockSize;
            }
            chains.add(new HeapSegment.Chain(heap, c, chain, indexes));
            from = to;
        }
        HeapSegment.pushChains(remote, chains);
    }

    /** Caller is busy. Forgets chunk {@code c} now (trim, before it gives the chunk back). */
    void forget(int c) {
        forget(c, true);
    }

    /** Forgets chunk {@code c} unless a chunk was adopted since {@code seenAdoptions} (it may be that one). */
    private void forgetUnlessAdopted(int c, long seenAdoptions) {
        lock.lock();
        try {
            if (adoptions == seenAdoptions) {
                owned.clear(c);
                roomy.clear(c);
            }
        } finally {
            lock.unlock();
        }
    }

    private long adoptions() {
        lock.lock();
        try {
            return adoptions;
        } finally {
            lock.unlock();
        }
    }

    private boolean owns(int c) {
        lock.lock();
        try {
            return owned.get(c);
        } finally {
            lock.unlock();
        }
    }

    /** Records chunk {@code c} as owned; {@code room}: it may have blocks left to carve. */
    private void own(int c, boolean room) {
        lock.lock();
        try {
            owned.set(c);
            if (room) {
                roomy.set(c);
            }
        } finally {
            lock.unlock();
        }
    }

    /** A chunk this node adopted: it is ours now, and may have room to carve. */
    void adopted(int chunk) {
        lock.lock();
        try {
            owned.set(chunk);
            roomy.set(chunk);
            adoptions++;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Caller is busy. Fills the cache: carve from an owned chunk with room; else take
     * the free lists the hint bitmap points at; else scan the table from the claim
     * hint, claiming a free chunk (and finding owned chunks this node did not know of,
     * e.g. after a restart). Verbs run without the lock; blocks are published under it.
     *
     * @return whether it published at least one block
     */
    private boolean refill() {
        AllocatorCounts.refills.increment();
        return refillFromOwned() || scanAndClaim();
    }

    /**
     * Caller is busy. Carves from an owned chunk with room, else takes the free lists of
     * owned chunks the hint bitmap points at; claims nothing.
     *
     * @return whether it published at least one block
     */
    private boolean refillFromOwned() {
        if (carve()) {
            return true;
        }
        boolean anyOwned;
        lock.lock();
        try {
            anyOwned = !owned.isEmpty();
        } finally {
            lock.unlock();
        }
        if (anyOwned) {
            int got = 0;
            long[] bits = heap.readHints();
            for (int w = 0; w < bits.length && got < batch; w++) {
                long word = bits[w];
                while (word != 0 && got < batch) {
                    int c = (w << 6) + Long.numberOfTrailingZeros(word);
                    word &= word - 1;
                    if (owns(c)) {
                        heap.hint(c, false); // before the pop: a later push sets it again
                        got += popAll(c, remote.readLong(heap.entry(c) + FREE_HEAD_WORD));
                    }
                }
            }
            return got > 0;
        }
        return false;
    }

    /** Carves from the cursor chunk, or from the next owned chunk that may have room. */
    private boolean carve() {
        while (true) {
            if (cursor < 0) {
                int c;
                long seen;
                lock.lock();
                try {
                    c = roomy.nextSetBit(0);
                    seen = adoptions;
                } finally {
                    lock.unlock();
                }
                if (c < 0) {
                    return false;
                }
                long st = remote.readLong(heap.entry(c));
                if (stateOf(st) != SMALL || ownerOf(st) != self || classOf(st) != cls || HeapLayout.isPending(st)) {
                    lock.lock();
                    try {
                        if (adoptions == seen) {
                            roomy.clear(c);
                            owned.clear(c);
                        } else {
                            continue; // adopted meanwhile, maybe this one: read it again
                        }
                    } finally {
                        lock.unlock();
                    }
                    continue;
                }
                cursor = c;
                cursorEpoch = epochOf(st);
            }
            if (bump()) {
                return true;
            }
        }
    }

    private boolean scanAndClaim() {
        AllocatorCounts.scans.increment();
        OpEvents.mark(OpEvents.ALLOC_SCAN);
        int n = heap.chunkCount;
        int slices = (n + SCAN_SLICE - 1) / SCAN_SLICE;
        int first = Math.floorMod(heap.claimHint, n) / SCAN_SLICE;
        int got = 0;
        for (int i = 0; i < slices; i++) {
            int from = ((first + i) % slices) * SCAN_SLICE;
            int count = Math.min(SCAN_SLICE, n - from);
            long seen = adoptions();
            long[] t = heap.readEntries(from, count);
            for (int j = 0; j < count; j++) {
                int c = from + j;
                long st = t[j * 4];
                if (stateOf(st) == SMALL && ownerOf(st) == self && HeapLayout.isPending(st)) {
                    heap.recoverPending(c); // a claim of this node that did not finish (a verb timed out)
                } else if (stateOf(st) == SMALL && ownerOf(st) == self && classOf(st) == cls) {
                    if (!owns(c)) {
                        // not claimed by this allocator (an earlier incarnation's): take it over with a
                        // CAS, so that an adopter of the earlier incarnation's chunks and we never both own it
                        if (!heap.reown(c, st)) {
                            continue;
                        }
                        own(c, t[j * 4 + 1] < perChunk);
                    }
                    if (headIndex(t[j * 4 + 2]) != 0 && got < batch) {
                        heap.hint(c, false);
                        got += popAll(c, t[j * 4 + 2]);
                    }
                } else if (stateOf(st) == FREE) {
                    if (got > 0) {
                        return true; // found freed blocks before a free chunk: use them first
                    }
                    long epoch = heap.claimSmall(c, st, cls);
                    if (epoch >= 0) {
                        own(c, true);
                        cursor = c;
                        cursorEpoch = epoch;
                        if (bump()) {
                            return true;
                        }
                    }
                } else {
                    forgetUnlessAdopted(c, seen);
                }
            }
            if (got > 0 || carve()) {
                return true;
            }
        }
        return false;
    }

    /** Carves the next batch from the cursor chunk with one fetch-and-add; publishes it under the lock. */
    private boolean bump() {
        long old = remote.fetchAndAdd(heap.entry(cursor) + BUMP_WORD, batch);
        if (old >= perChunk) {
            forget(cursor, false);
            cursor = -1;
            return false;
        }
        int k = (int) Math.min(batch, perChunk - old);
        AllocatorCounts.carves.increment();
        long first = heap.chunk(cursor) + old * blockSize;
        long hdr = blockHeader(HeapLayout.firstGeneration(cursorEpoch), cls, KIND_SMALL);
        if (k == 1) {
            remote.writeLong(first, HeapLayout.seal(hdr, first));
        } else {
            byte[] region = new byte[k * blockSize];
            for (int i = 0; i < k; i++) {
                Words.putLong(region, i * blockSize, HeapLayout.seal(hdr, first + (long) i * blockSize));
            }
            remote.write(first, region);
        }
        long[] ps = new long[k];
        long[] hs = new long[k];
        for (int i = 0; i < k; i++) {
            ps[i] = first + (long) (k - 1 - i) * blockSize; // handed out lowest address first
            hs[i] = hdr;
        }
        boolean full = old + k >= perChunk;
        if (full) {
            forget(cursor, false);
        }
        publish(ps, hs, 0, k);
        if (full) {
            cursor = -1;
        }
        return true;
    }

    /** Clears chunk {@code c}'s room bit ({@code alsoOwned}: and its ownership). */
    private void forget(int c, boolean alsoOwned) {
        lock.lock();
        try {
            roomy.clear(c);
            if (alsoOwned) {
                owned.clear(c);
            }
        } finally {
            lock.unlock();
        }
    }

    /** Takes the whole free list of a chunk this node owns with one CAS, then walks it. */
    /** @return the blocks published */
    private int popAll(int chunk, long top) {
        long e = heap.entry(chunk);
        for (int tries = 0; ; tries++) {
            if (headIndex(top) == 0) {
                return 0;
            }
            long w = remote.compareAndSwap(e + FREE_HEAD_WORD, top, head(headTag(top) + 1, 0));
            if (w == top) {
                break;
            }
            if (tries > MAX_CAS_RETRIES) {
                throw DsmTimeoutException.afterTries("free-list pop (it kept losing its CAS): segment=" + heap.segment
                        + ", chunk=" + chunk, heap.node, tries, "nothing was allocated; the free list is contended:"
                        + " retry");
            }
            top = w;
        }
        // the chain is ours now. Its blocks join the cache only once COUNT has been lowered by as many:
        // if a read or the fetch-and-add fails, they are dropped (leaked, still counted, so a release
        // of the chunk recovers them) and COUNT never under-states what is live or cached.
        long chunkBase = heap.chunk(chunk);
        long index = headIndex(top);
        int count = 0;
        long[] ps = new long[Math.min(perChunk, 64)];
        long[] hs = new long[ps.length];
        while (index != 0) {
            if (index > perChunk || count >= perChunk) {
                throw new HeapCorruptedException(heap.node, heap.segment, "free list leaves its chunk or loops:"
                        + " chunk=" + chunk + ", index=" + (index - 1) + ", walked=" + count);
            }
            long p = chunkBase + (index - 1) * blockSize;
            byte[] b = remote.read(p, 16);
            long hdr = HeapLayout.unseal(Words.getLong(b, 0), p);
            if (kindOf(hdr) != KIND_SMALL || blockClassOf(hdr) != cls) {
                throw new HeapCorruptedException(heap.node, heap.segment, "free block with a wrong header: chunk="
                        + chunk + ", block=" + RemotePtr.toString(p) + ", header=0x" + Long.toHexString(hdr));
            }
            if (count == ps.length) {
                ps = Arrays.copyOf(ps, count * 2);
                hs = Arrays.copyOf(hs, count * 2);
            }
            ps[count] = p;
            hs[count++] = hdr;
            index = Words.getLong(b, 8);
        }
        remote.fetchAndAdd(e + COUNT_WORD, -count);
        AllocatorCounts.pops.increment();
        AllocatorCounts.poppedBlocks.add(count);
        publish(ps, hs, 0, count);
        return count;
    }
}
