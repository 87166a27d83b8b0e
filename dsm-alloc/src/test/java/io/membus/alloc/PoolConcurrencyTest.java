package io.membus.alloc;

import io.membus.core.RemoteMemory;
import io.membus.core.error.DsmException;
import io.membus.core.test.Seeds;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The size-class pools issue their verbs without holding a pool lock: a free and an
 * allocation from the cache go on while another thread's refill waits for a verb, and
 * trim() stays correct while threads allocate and free around it.
 */
class PoolConcurrencyTest extends WithAllocCluster {
    private final List<ExecutorService> executors = new ArrayList<>();

    @AfterEach
    void close() throws InterruptedException {
        for (ExecutorService e : executors) {
            e.shutdownNow();
            assertTrue(e.awaitTermination(10, TimeUnit.SECONDS), "test threads stopped");
        }
    }

    /** A {@link Remote} whose next fetch-and-add from one thread waits until the test lets it go. */
    static final class GatedRemote extends Remote {
        final AtomicReference<Thread> gated = new AtomicReference<>();
        final CountDownLatch entered = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);

        GatedRemote(RemoteMemory memory) {
            super(memory);
        }

        @Override
        long fetchAndAdd(long ptr, long delta) {
            if (gated.compareAndSet(Thread.currentThread(), null)) {
                entered.countDown();
                try {
                    if (!release.await(30, TimeUnit.SECONDS)) {
                        throw new AssertionError("the gated verb was never released");
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError(e);
                }
            }
            return super.fetchAndAdd(ptr, delta);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aFreeAndACachedAllocationProceedWhileARefillWaitsForItsVerb() throws Exception {
        start(1);
        // no refill ahead: the gated allocation must be the one that finds the cache empty and carves
        AllocatorConfig config = AllocatorConfig.builder().heapSegments(AllocCluster.HEAP).chunkSize(16 << 10)
                .refillAhead(false).build();
        AtomicReference<GatedRemote> remote = new AtomicReference<>();
        GlobalAllocator a = cluster.addNode(2, 1 << 20, config, m -> {
            GatedRemote g = new GatedRemote(m);
            remote.set(g);
            return g;
        });
        GatedRemote gate = remote.get();
        BlockRef x = a.allocate(40, Placement.local());
        int blockSize = SizeClasses.blockSize(HeapLayout.blockClassOf(x.header()));
        int perChunk = (16 << 10) / blockSize;
        int batch = Math.max(1, Math.min(64, Math.min(perChunk, config.batchBytes() / blockSize)));
        List<BlockRef> drained = new ArrayList<>();
        for (int i = 1; i < batch; i++) { // empty the cache: the next allocation must carve (a fetch-and-add)
            drained.add(a.allocate(40, Placement.local()));
        }

        ExecutorService exec = Executors.newSingleThreadExecutor();
        executors.add(exec);
        Future<BlockRef> refilling = exec.submit(() -> {
            gate.gated.set(Thread.currentThread());
            return a.allocate(40, Placement.local());
        });
        assertTrue(gate.entered.await(30, TimeUnit.SECONDS), "the refill reached its fetch-and-add");
        // the refill's verb is in flight: with a pool lock held across it, these two would wait for it forever
        a.free(x);
        BlockRef again = a.allocate(40, Placement.local());
        assertEquals(x.ptr(), again.ptr(), "the freed block came back from the cache while the refill waited");
        gate.release.countDown();
        BlockRef carved = refilling.get(30, TimeUnit.SECONDS);
        assertNotEquals(x.ptr(), carved.ptr());
        for (BlockRef r : drained) {
            assertNotEquals(r.ptr(), carved.ptr());
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void trimRacingAllocationsAndFreesNeverReleasesALiveBlock() throws Exception {
        long seed = Seeds.seed("membus.alloc.seed", "trimRacingAllocationsAndFreesNeverReleasesALiveBlock");
        cluster = new AllocCluster(2, 256 << 10, 8 << 10);
        Map<Long, Long> live = new ConcurrentHashMap<>();
        Set<Long> everAllocated = ConcurrentHashMap.newKeySet();
        Queue<Object[]> handoff = new ConcurrentLinkedQueue<>();
        AtomicLong allocations = new AtomicLong();
        AtomicLong outOfMemory = new AtomicLong();
        AtomicBoolean working = new AtomicBoolean(true);
        AtomicLong trims = new AtomicLong();
        AtomicLong released = new AtomicLong();
        ExecutorService exec = Executors.newFixedThreadPool(5);
        executors.add(exec);
        List<Future<?>> workers = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            GlobalAllocator a = cluster.node(1 + t % 2);
            long stampBase = ((long) (1 + t % 2) << 32) | ((long) t << 24);
            SplittableRandom rnd = new SplittableRandom(seed + t * 31L);
            workers.add(exec.submit(() -> {
                ConcurrentAllocationTest.worker(a, rnd, stampBase, live, everAllocated, allocations, outOfMemory,
                        handoff);
                return null;
            }));
        }
        Future<?> trimmer = exec.submit(() -> {
            SplittableRandom rnd = new SplittableRandom(seed ^ 0x7L);
            while (working.get()) {
                released.addAndGet(cluster.node(1 + rnd.nextInt(2)).trim());
                trims.incrementAndGet();
            }
            return null;
        });
        try {
            for (Future<?> f : workers) {
                f.get(100, TimeUnit.SECONDS); // the worker checks every block's stamp before it frees it
            }
        } finally {
            working.set(false);
        }
        trimmer.get(30, TimeUnit.SECONDS);
        System.out.println("seed=" + seed + ", allocations=" + allocations.get() + ", trims=" + trims.get()
                + ", chunksReleased=" + released.get() + ", outOfMemory=" + outOfMemory.get());
        assertTrue(trims.get() > 0);
        for (Object[] given; (given = handoff.poll()) != null; ) {
            BlockRef r = (BlockRef) given[0];
            assertEquals((long) (Long) given[1], cluster.node(2).readLong(r, 0), "a handed-off block kept its stamp");
            assertTrue(live.remove(r.ptr(), (Long) given[1]));
            cluster.node(2).free(r);
        }
        assertTrue(live.isEmpty(), "every worker freed its blocks: " + live.size() + " left");
        for (GlobalAllocator a : cluster.allocators.values()) {
            a.trim();
        }
        HeapUsage u = cluster.node(1).usage();
        for (HeapUsage.SegmentUsage s : u.segments()) {
            assertEquals(s.chunks(), s.freeChunks(), "every chunk is free again after all frees and trims:\n"
                    + u.segments());
        }
    }

    /**
     * With refills ahead (the default) one thread's allocations run a refill of their own
     * only to claim a chunk (once per chunk: a scan each): every other batch is carved on the
     * allocator's threads before the cache runs out (or, if the caller outruns them, it runs
     * the refill ahead that has not started yet itself, or waits for the one running). Without them the caller refills once
     * per batch. Either way every block is distinct, and a trim after the frees gives every
     * chunk back (it waits for a refill ahead in flight; none starts after it).
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void refillsAheadLeaveTheCallerOneRefillPerChunkAndATrimStillGivesEveryChunkBack() {
        int n = 1_000;
        cluster = new AllocCluster(1, 1 << 20, 16 << 10);
        GlobalAllocator ahead = cluster.node(1);
        GlobalAllocator without = cluster.addNode(2, 1 << 20, AllocatorConfig.builder().heapSegments(AllocCluster.HEAP)
                .chunkSize(16 << 10).refillAhead(false).build());
        long[] before = AllocatorCounts.snapshot();
        List<BlockRef> got = allocateDistinct(ahead, n, 1);
        long callerRefills = count(before, "callerRefills");
        long aheadRefills = count(before, "aheadRefills");
        int blockSize = SizeClasses.blockSize(HeapLayout.blockClassOf(got.get(0).header()));
        int batch = Math.max(1, Math.min(64, Math.min((16 << 10) / blockSize, (int) (8 << 10) / blockSize)));
        int perChunk = (16 << 10) / blockSize;
        long takenOver = count(before, "aheadTakenOver"); // refills ahead not yet started when the cache ran out
        long own = callerRefills - takenOver;
        assertTrue(own <= count(before, "scans"), "each of the caller's own refills claimed a chunk, none only"
                + " carved: " + AllocatorCounts.since(before));
        assertTrue(own <= (n + perChunk - 1) / perChunk, "at most one caller's own refill per chunk of "
                + perChunk + " blocks: " + AllocatorCounts.since(before));
        assertTrue(aheadRefills + takenOver >= n / batch - 1, "the later batches came from refills ahead: "
                + aheadRefills + " (and " + takenOver + " taken over) for " + n + " blocks of " + batch + " a batch");

        long[] beforeWithout = AllocatorCounts.snapshot();
        got.addAll(allocateDistinct(without, n, 2));
        assertTrue(count(beforeWithout, "callerRefills") >= n / batch, "without refills ahead the caller refills"
                + " every batch: " + AllocatorCounts.since(beforeWithout));

        for (BlockRef r : got) {
            ahead.free(r);
        }
        ahead.trim();
        without.trim();
        for (GlobalAllocator a : List.of(ahead, without)) {
            HeapUsage u = a.usage();
            for (HeapUsage.SegmentUsage s : u.segments()) {
                assertEquals(s.chunks(), s.freeChunks(), "every chunk is free again after the frees and a trim:\n"
                        + u.segments());
            }
        }
    }

    /**
     * A trim never waits for a refill ahead that was handed to the allocator's threads but has not
     * started: it takes it over (the queued run then does nothing). Waiting could wait forever: an
     * out-of-memory's trim on one allocator thread, holding pools 0..k busy, waited on pool k+1's
     * queued refill while the other allocator threads waited on the pools the trim held. Here the
     * allocator's threads are gated (the refill ahead is queued and never runs until the test runs
     * it); before the fix the trim waited for it for ever.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aTrimTakesOverARefillAheadStillQueued() throws Exception {
        start(1);
        AtomicReference<Remote> remote = new AtomicReference<>();
        GlobalAllocator a = cluster.addNode(2, 1 << 20, AllocatorConfig.builder().heapSegments(AllocCluster.HEAP)
                .chunkSize(16 << 10).build(), m -> {
                    Remote r = new Remote(m);
                    remote.set(r);
                    return r;
                });
        Queue<Runnable> queued = new ConcurrentLinkedQueue<>();
        remote.get().ahead = queued::add; // the allocator's threads, gated: a refill ahead is queued, never run
        List<BlockRef> got = new ArrayList<>();
        Set<Long> ptrs = new java.util.HashSet<>();
        for (int i = 0; i < 10_000 && queued.isEmpty(); i++) {
            BlockRef r = a.allocate(40, Placement.local());
            assertTrue(ptrs.add(r.ptr()), "block handed out twice: " + r);
            got.add(r);
        }
        assertEquals(1, queued.size(), "a refill ahead was handed to the allocator's threads");

        ExecutorService exec = Executors.newSingleThreadExecutor();
        executors.add(exec);
        Future<Integer> trim = exec.submit(a::trim);
        trim.get(30, TimeUnit.SECONDS); // before the fix: waited for ever for the queued refill ahead
        queued.poll().run(); // taken over by the trim: does nothing and ends no busy state

        // the pool is idle (not busy for ever, not ended twice): allocations go on, each block once
        for (int i = 0; i < 500; i++) {
            BlockRef r = a.allocate(40, Placement.local());
            assertTrue(ptrs.add(r.ptr()), "block " + i + " handed out twice after the trim: " + r);
            got.add(r);
        }
        remote.get().ahead = null;
        for (Runnable r; (r = queued.poll()) != null; ) {
            r.run(); // queued after the trim: runs, or finds itself taken over by an allocation
        }
        for (BlockRef r : got) {
            a.free(r);
        }
        a.trim();
        HeapUsage u = a.usage();
        for (HeapUsage.SegmentUsage s : u.segments()) {
            assertEquals(s.chunks(), s.freeChunks(), "every chunk is free again after the frees and a trim:\n"
                    + u.segments());
        }
    }

    /** A {@link Remote} that counts its blocking CASes. */
    static final class CountingRemote extends Remote {
        final AtomicLong cases = new AtomicLong();

        CountingRemote(RemoteMemory memory) {
            super(memory);
        }

        @Override
        long compareAndSwap(long ptr, long expected, long update) {
            cases.incrementAndGet();
            return super.compareAndSwap(ptr, expected, update);
        }
    }

    /**
     * A trim returns a cache of many blocks (a batched free's, which the owner keeps up to
     * {@link ClassPool#BATCHED_CACHE_FACTOR} times its usual limit) in one chain per chunk, and
     * gives every chunk back: its blocking CASes are a few per chunk (the hint of a list that was
     * empty, the release), not one per block as with a push per block.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aTrimReturnsAManyBlockCacheInChainsAndGivesEveryChunkBack() {
        start(1);
        AtomicReference<CountingRemote> remote = new AtomicReference<>();
        GlobalAllocator a = cluster.addNode(2, 1 << 20, AllocatorConfig.builder().heapSegments(AllocCluster.HEAP)
                .chunkSize(16 << 10).refillAhead(false).build(), m -> {
                    CountingRemote r = new CountingRemote(m);
                    remote.set(r);
                    return r;
                });
        int n = 3_000;
        List<BlockRef> got = allocateDistinct(a, n, 2);
        long pushesBefore = AllocatorCounts.pushes.sum();
        for (DsmException e : a.freeAll(got.toArray(new BlockRef[0]))) {
            assertEquals(null, e);
        }
        assertEquals(0, AllocatorCounts.pushes.sum() - pushesBefore, "the owner's cache kept every block");

        long casesBefore = remote.get().cases.get();
        int released = a.trim();
        long cases = remote.get().cases.get() - casesBefore;
        long pushed = AllocatorCounts.pushes.sum() - pushesBefore;
        int blockSize = SizeClasses.blockSize(HeapLayout.blockClassOf(got.get(0).header()));
        int chunks = (n * blockSize + (16 << 10) - 1) / (16 << 10);
        assertTrue(pushed >= n, "the trim pushed every cached block: " + pushed + " of " + n);
        assertTrue(released >= chunks, "every chunk given back: " + released + " of at least " + chunks);
        assertTrue(cases <= 4L * released + 8, "a few blocking CASes per chunk, not one per block: " + cases
                + " for " + pushed + " blocks of " + released + " chunks");
        HeapUsage u = a.usage();
        for (HeapUsage.SegmentUsage s : u.segments()) {
            assertEquals(s.chunks(), s.freeChunks(), "every chunk is free again after the trim:\n" + u.segments());
        }
    }

    private static List<BlockRef> allocateDistinct(GlobalAllocator a, int n, int node) {
        List<BlockRef> got = new ArrayList<>();
        Set<Long> ptrs = new java.util.HashSet<>();
        for (int i = 0; i < n; i++) {
            BlockRef r = a.allocate(40, Placement.node(node));
            assertTrue(ptrs.add(r.ptr()), "block " + i + " handed out twice: " + r);
            got.add(r);
        }
        return got;
    }

    /** The change of AllocatorCounts' count {@code name} since {@code before}. */
    private static long count(long[] before, String name) {
        return AllocatorCounts.COUNTS.since(before).get(name);
    }
}
