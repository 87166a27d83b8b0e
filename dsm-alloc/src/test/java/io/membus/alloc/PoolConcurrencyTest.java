package io.membus.alloc;

import io.membus.core.RemoteMemory;
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
        int i = java.util.Arrays.asList(AllocatorCounts.NAMES).indexOf(name);
        return AllocatorCounts.snapshot()[i] - before[i];
    }
}
