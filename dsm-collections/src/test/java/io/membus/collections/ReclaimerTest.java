package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.core.error.DsmException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The reclaimer's timing rules, on a clock the test steps: nothing is freed before its
 * grace; a change's {@code drain} wakes the freeing thread only for a whole batch, or for
 * what waited twice its grace; {@code drainHere} frees whatever is due.
 */
class ReclaimerTest {
    private static final long GRACE = 1_000;
    private MapCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    /** A block written as an entry's (its header copied in its first payload word), as the reclaimer frees it. */
    private static long entryBlock(GlobalAllocator heap) {
        BlockRef ref = heap.allocate(64);
        byte[] b = new byte[64];
        MapLayout.putLong(b, MapLayout.ENTRY_HEADER_COPY, ref.header());
        heap.memory().write(ref.payload(), b);
        return ref.ptr();
    }

    private static void eventually(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "not within 10 s: " + what);
            Thread.sleep(1);
        }
    }

    /** An entry block as {@link #entryBlock}, and its reference (header included). */
    private static BlockRef entryRef(GlobalAllocator heap) {
        BlockRef ref = heap.allocate(64);
        byte[] b = new byte[64];
        MapLayout.putLong(b, MapLayout.ENTRY_HEADER_COPY, ref.header());
        heap.memory().write(ref.payload(), b);
        return ref;
    }

    /**
     * Retires outpace the freeing thread (it is never handed anything here: no {@code drain}):
     * what waits never exceeds the bound, the retiring thread frees due blocks itself, and when
     * nothing is due yet a change waits at most its deadline and then fails without retiring
     * or dropping anything.
     */
    @Test
    void pendingNeverExceedsTheBoundAndTheWriterHelpsThenWaitsUnderItsDeadline() {
        cluster = new MapCluster("local", 1, 8 << 20);
        GlobalAllocator heap = cluster.node(1);
        AtomicLong now = new AtomicLong();
        int bound = 64;
        Reclaimer r = new Reclaimer(heap, GRACE, now::get, bound);
        long helpedBefore = ReclaimCounts.helped.sum();
        int retires = 1_000;
        for (int i = 0; i < retires; i++) {
            r.admit(10_000_000_000L);
            r.retire(entryBlock(heap));
            r.release();
            assertTrue(r.pending() <= bound, "pending " + r.pending() + " over the bound after retire " + i);
            now.addAndGet(GRACE / 16); // sixteen retires per grace, and the freeing thread never frees one: the bound holds
        }
        assertTrue(r.freed() >= retires - bound, "the writer freed what came due: freed=" + r.freed());
        assertEquals(r.freed(), ReclaimCounts.helped.sum() - helpedBefore, "all of it on the writing thread");
        assertEquals(retires, r.freed() + r.pending(), "nothing dropped");

        // nothing due: a change waits at most its deadline, then fails before it retired anything
        now.addAndGet(GRACE);
        r.drainAll();
        assertEquals(0, r.pending());
        while (r.pending() < bound) {
            r.admit(10_000_000_000L);
            r.retire(entryBlock(heap));
            r.release();
        }
        int full = r.pending();
        long scope = io.membus.core.OperationDeadline.enter(java.time.Duration.ofMillis(30));
        try {
            DsmMapException e = org.junit.jupiter.api.Assertions.assertThrows(DsmMapException.class,
                    () -> r.admit(10_000_000_000L));
            assertEquals("reclaim-bound", e.reason());
            assertFalse(e.mayHaveRun(), "refused before the change: " + e.getMessage());
        } finally {
            io.membus.core.OperationDeadline.exit(scope);
        }
        assertEquals(full, r.pending(), "nothing dropped, nothing freed before its grace");
        now.addAndGet(GRACE);
        r.admit(10_000_000_000L); // due now: the writer frees and gets its place
        r.release();
        assertTrue(r.pending() < full, "freed by the admission");
        r.drainAll();
        assertEquals(0, r.pending());
    }

    /**
     * A retired block carrying its header is freed with no header read; a carried header the
     * block no longer has (this node's note of an entry another node replaced and freed, the
     * block reused) frees nothing by itself, and the block is freed through a read of its header.
     */
    @Test
    void aCarriedHeaderSkipsTheReadAndAStaleOneFallsBackToIt() {
        cluster = new MapCluster("local", 1, 8 << 20);
        GlobalAllocator heap = cluster.node(1);
        AtomicLong now = new AtomicLong();
        Reclaimer r = new Reclaimer(heap, GRACE, now::get, Reclaimer.DEFAULT_BOUND);
        BlockRef known = entryRef(heap);
        BlockRef noted = entryRef(heap);
        long reads = ReclaimCounts.headerReads.sum();
        r.retire(known.ptr(), known.header());
        r.noteInstalled(noted.ptr(), noted.header());
        r.retire(noted.ptr());
        now.set(GRACE);
        r.drainHere();
        assertEquals(2, r.freed());
        assertEquals(reads, ReclaimCounts.headerReads.sum(), "both headers carried: no read");
        assertFalse(heap.isLive(known));
        assertFalse(heap.isLive(noted));

        // a stale note: the block was freed elsewhere and handed out again (a later generation)
        BlockRef old = entryRef(heap);
        r.noteInstalled(old.ptr(), old.header());
        heap.free(old);
        BlockRef reused = null;
        java.util.List<BlockRef> others = new java.util.ArrayList<>();
        for (int i = 0; i < 10_000 && reused == null; i++) {
            BlockRef b = entryRef(heap);
            if (b.ptr() == old.ptr()) {
                reused = b;
            } else {
                others.add(b);
            }
        }
        org.junit.jupiter.api.Assertions.assertNotNull(reused, "the freed block is handed out again");
        long stale = ReclaimCounts.staleCarried.sum();
        reads = ReclaimCounts.headerReads.sum();
        r.retire(reused.ptr()); // this node replaced the reuse: its note is the old generation's
        now.set(2 * GRACE);
        r.drainHere(); // the CAS with the noted header fails; the block goes back, due
        r.drainHere(); // freed through the read
        assertEquals(stale + 1, ReclaimCounts.staleCarried.sum());
        assertEquals(reads + 1, ReclaimCounts.headerReads.sum());
        assertEquals(3, r.freed());
        assertFalse(heap.isLive(reused), "the reuse's generation freed");
        assertEquals(0, r.pending());
        for (BlockRef b : others) {
            assertTrue(heap.isLive(b), "no other block freed");
        }
    }

    /**
     * Frees are batched per node: 40 blocks of one node, freed by another, cost one round trip
     * when their headers are carried (the CASes), two when they are read first — and when the
     * freeing node does not own their chunks (each goes on its chunk's free list), four or
     * six more per chunk (the chained push, and the hint when the list was empty): not per block.
     */
    @Test
    void freesAreBatchedPerNodeInRoundTripsNotPerBlock() {
        cluster = new MapCluster("local", 2, 8 << 20, java.time.Duration.ofSeconds(10),
                (id, t) -> id == 2 ? new RoundTripTransport(t) : t);
        GlobalAllocator two = cluster.node(2);
        GlobalAllocator one = cluster.node(1);
        AtomicLong now = new AtomicLong();
        Reclaimer r = new Reclaimer(two, GRACE, now::get, Reclaimer.DEFAULT_BOUND);
        int n = 40;
        for (boolean carried : new boolean[]{true, false}) {
            for (int i = 0; i < n; i++) { // node 2's blocks on node 1 (node 2 owns their chunk: its cache takes them)
                BlockRef b = two.allocate(64, io.membus.alloc.Placement.node(1));
                byte[] e = new byte[64];
                MapLayout.putLong(e, MapLayout.ENTRY_HEADER_COPY, b.header());
                two.memory().write(b.payload(), e);
                r.retire(b.ptr(), carried ? b.header() : 0);
            }
            now.addAndGet(GRACE);
            long freed = r.freed();
            RoundTripTransport.counts().reset();
            r.drainHere();
            assertEquals(freed + n, r.freed());
            assertEquals(carried ? 1 : 2, RoundTripTransport.counts().roundTrips,
                    (carried ? "headers carried: " : "headers read: ") + RoundTripTransport.counts());
        }
        // node 1's blocks (node 1 owns their chunks): freed by node 2, they go on the free lists as chains
        java.util.Set<Long> chunks = new java.util.HashSet<>();
        for (int i = 0; i < n; i++) {
            BlockRef b = one.allocate(64);
            chunks.add(b.ptr() >>> 14); // at most one chunk per 16 KiB
            r.retire(b.ptr(), b.header());
        }
        now.addAndGet(GRACE);
        RoundTripTransport.counts().reset();
        r.drainHere();
        assertEquals(3 * n, r.freed());
        long trips = RoundTripTransport.counts().roundTrips;
        System.out.println("ReclaimerTest: " + n + " blocks pushed on free lists by another node: "
                + RoundTripTransport.counts() + " (chunks <= " + chunks.size() + ")");
        assertTrue(trips <= 1 + 6L * chunks.size() && trips < n, "pushed per chunk, not per block: "
                + RoundTripTransport.counts() + ", chunks<=" + chunks.size());
    }

    /** A block at {@code old}'s address handed out again (a later generation), as an entry's. */
    private static BlockRef reuseOf(GlobalAllocator heap, BlockRef old) {
        java.util.List<BlockRef> others = new java.util.ArrayList<>();
        for (int i = 0; i < 10_000; i++) {
            BlockRef b = entryRef(heap);
            if (b.ptr() == old.ptr()) {
                return b;
            }
            others.add(b);
        }
        throw new AssertionError("the freed block was not handed out again");
    }

    /**
     * A free call that fails as a whole (a raw RuntimeException) after its generation CASes
     * landed: the block's header was read and checked, and its retry keeps it, so the retry can
     * only free that generation; the block, meanwhile freed, reused and written as another
     * entry, is not freed as that entry's.
     */
    @Test
    void aRetryAfterAFailedFreeCallNeverFreesTheBlocksNextEntry() {
        cluster = new MapCluster("local", 1, 8 << 20);
        GlobalAllocator heap = cluster.node(1);
        AtomicLong now = new AtomicLong();
        Reclaimer r = new Reclaimer(heap, GRACE, now::get, Reclaimer.DEFAULT_BOUND);
        java.util.concurrent.atomic.AtomicInteger calls = new java.util.concurrent.atomic.AtomicInteger();
        r.failFrees((real, refs) -> {
            DsmException[] errors = real.apply(refs);
            if (calls.getAndIncrement() == 0) {
                throw new IllegalStateException("injected by the test: fails after the CASes ran");
            }
            return errors;
        });
        BlockRef entry = entryRef(heap);
        r.retire(entry.ptr()); // no header carried: read
        now.set(GRACE);
        r.drainHere(); // the CAS lands, then the call fails: tried again after another grace
        assertFalse(heap.isLive(entry), "the first CAS landed");
        BlockRef next = reuseOf(heap, entry); // the block's next entry
        now.set(3 * GRACE);
        r.drainHere();
        assertTrue(heap.isLive(next), "the block's next entry is not freed by the retry");
        assertEquals(0, r.pending());
    }

    /**
     * A carried header that is stale (this node's note of an entry another node replaced and
     * freed, the block reused) whose CAS failed without running: the retry reads the header and
     * frees the block, rather than keep the stale hint, fail its CAS and take the block for freed.
     */
    @Test
    void aStaleCarriedHeaderWhoseCasDidNotRunIsReadOnItsRetry() {
        cluster = new MapCluster("local", 1, 8 << 20);
        GlobalAllocator heap = cluster.node(1);
        AtomicLong now = new AtomicLong();
        Reclaimer r = new Reclaimer(heap, GRACE, now::get, Reclaimer.DEFAULT_BOUND);
        failFirstCall(r, ref -> io.membus.core.error.DsmTimeoutException.notSent(
                "compareAndSwap (injected by the test)", 1, java.time.Duration.ZERO));
        BlockRef old = entryRef(heap);
        r.noteInstalled(old.ptr(), old.header());
        heap.free(old);
        BlockRef reused = reuseOf(heap, old);
        r.retire(reused.ptr()); // carries the stale note
        now.set(GRACE);
        r.drainHere(); // the CAS did not run: tried again after another grace
        assertTrue(heap.isLive(reused));
        now.set(3 * GRACE);
        r.drainHere();
        assertFalse(heap.isLive(reused), "freed through the read: not leaked");
        assertEquals(1, r.freed());
        assertEquals(0, r.pending());
    }

    /**
     * A carried header the CAS refuses as naming no block (the stale note's chunk reused for
     * another size class: {@link io.membus.alloc.InvalidBlockException}) is a stale hint, not
     * a transient failure: the block goes back, due at once, and is freed through the read.
     */
    @Test
    void aCarriedHeaderNamingNoBlockFallsBackToTheRead() {
        cluster = new MapCluster("local", 1, 8 << 20);
        GlobalAllocator heap = cluster.node(1);
        AtomicLong now = new AtomicLong();
        Reclaimer r = new Reclaimer(heap, GRACE, now::get, Reclaimer.DEFAULT_BOUND);
        failFirstCall(r, ref -> new io.membus.alloc.InvalidBlockException(ref.ptr(), "injected by the test"));
        BlockRef entry = entryRef(heap);
        r.retire(entry.ptr(), entry.header());
        long reads = ReclaimCounts.headerReads.sum();
        now.set(GRACE);
        r.drainHere(); // refused: back to limbo's head, due
        r.drainHere(); // freed through the read
        assertEquals(reads + 1, ReclaimCounts.headerReads.sum());
        assertFalse(heap.isLive(entry));
        assertEquals(1, r.freed());
        assertEquals(0, r.pending());
    }

    /**
     * One map with far more due than one task frees (4,160 blocks: over four calls of 1,024)
     * does not hold the JVM's one freeing thread: another map's task, queued meanwhile, runs
     * after at most four of its calls, before the rest of it.
     */
    @Test
    void oneMapsBacklogDoesNotHoldTheFreeingThread() throws InterruptedException {
        cluster = new MapCluster("local", 1, 16 << 20);
        GlobalAllocator heap = cluster.node(1);
        AtomicLong now = new AtomicLong();
        java.util.concurrent.CountDownLatch entered = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        java.util.function.LongSupplier gated = () -> {
            if (Thread.currentThread().getName().equals("membus-map-reclaim") && go.getCount() > 0) {
                entered.countDown(); // the backlog's task holds the freeing thread until the other map queued its own
                try {
                    go.await(10, java.util.concurrent.TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return now.get();
        };
        Reclaimer big = new Reclaimer(heap, GRACE, gated, Reclaimer.DEFAULT_BOUND);
        Reclaimer small = new Reclaimer(heap, GRACE, () -> now.get(), Reclaimer.DEFAULT_BOUND);
        int backlog = 4 * 1024 + 64;
        for (int i = 0; i < backlog; i++) {
            BlockRef b = heap.allocate(16);
            big.retire(b.ptr(), b.header());
        }
        for (int i = 0; i < 32; i++) {
            BlockRef b = heap.allocate(16);
            small.retire(b.ptr(), b.header());
        }
        AtomicLong bigFreedWhenSmallRan = new AtomicLong(-1);
        small.failFrees((real, refs) -> {
            bigFreedWhenSmallRan.compareAndSet(-1, big.freed());
            return real.apply(refs);
        });
        now.set(GRACE);
        big.drain();
        assertTrue(entered.await(10, java.util.concurrent.TimeUnit.SECONDS), "the backlog's task started");
        small.drain(); // queued behind it
        go.countDown();
        eventually(() -> small.freed() == 32 && big.freed() == backlog, "everything freed");
        assertTrue(bigFreedWhenSmallRan.get() >= 0 && bigFreedWhenSmallRan.get() < backlog,
                "the other map's task ran before the backlog was through: backlog freed then="
                        + bigFreedWhenSmallRan.get());
        assertEquals(0, big.pending());
        assertEquals(0, small.pending());
    }

    @Test
    void aChangeHandsOverOnlyWholeBatchesOrWhatWaitedTwiceItsGrace() throws InterruptedException {
        cluster = new MapCluster("local", 1, 8 << 20);
        GlobalAllocator heap = cluster.node(1);
        AtomicLong now = new AtomicLong();
        Reclaimer r = new Reclaimer(heap, GRACE, now::get, Reclaimer.DEFAULT_BOUND);
        long[] blocks = new long[50];
        for (int i = 0; i < 10; i++) {
            blocks[i] = entryBlock(heap);
            r.retire(blocks[i]);
        }
        now.set(GRACE - 1);
        r.drain();
        assertEquals(10, r.pending(), "nothing before its grace");
        now.set(GRACE);
        r.drain();
        assertEquals(10, r.pending(), "ten due, not a whole batch: kept for the next change");
        now.set(2 * GRACE - 1);
        r.drain();
        assertEquals(10, r.pending());
        now.set(2 * GRACE);
        r.drain();
        eventually(() -> r.freed() == 10, "waited twice its grace: handed over, the freeing thread freed the ten");
        assertEquals(0, r.pending());

        for (int i = 10; i < 40; i++) { // thirty retired at once: not a whole batch
            blocks[i] = entryBlock(heap);
            r.retire(blocks[i]);
        }
        now.set(3 * GRACE);
        r.drain();
        assertEquals(30, r.pending(), "thirty due, not a whole batch");
        for (int i = 40; i < 50; i++) { // ten more: a whole batch (32) due, and all forty handed over with it
            blocks[i] = entryBlock(heap);
            r.retire(blocks[i]);
        }
        now.set(4 * GRACE);
        r.drain();
        eventually(() -> r.freed() == 50, "the freeing thread freed the batch");
        assertEquals(0, r.pending());
        r.drainHere();
        assertEquals(50, r.freed());
        for (long p : blocks) {
            assertFalse(heap.isLive(BlockRef.of(p, MapLayout.getLong(heap.memory().read(p + io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH, 8), 0), 0)),
                    "block freed");
        }
    }

    /** The reclaimer's first free call fails every block it names with {@code error}'s exception; later calls run. */
    private static void failFirstCall(Reclaimer r, java.util.function.Function<BlockRef, DsmException> error) {
        java.util.concurrent.atomic.AtomicInteger calls = new java.util.concurrent.atomic.AtomicInteger();
        r.failFrees((real, refs) -> {
            if (calls.getAndIncrement() > 0) {
                return real.apply(refs);
            }
            DsmException[] errors = new DsmException[refs.length];
            for (int i = 0; i < refs.length; i++) {
                if (refs[i] != null) {
                    errors[i] = error.apply(refs[i]);
                }
            }
            return errors;
        });
    }
}
