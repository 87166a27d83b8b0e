package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.Words;
import io.membus.core.test.Seeds;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Several nodes, several threads each, allocating and freeing in every placement
 * while an ownership verifier checks that no block is ever live twice, that every
 * block still holds its owner's stamp when it is freed, and that freed blocks are
 * handed out again.
 */
class ConcurrentAllocationTest extends WithAllocCluster {
    private static final int NODES = 3;
    private static final int THREADS_PER_NODE = 2;
    private final List<ExecutorService> pools = new ArrayList<>();

    @AfterEach
    void close() throws InterruptedException {
        for (ExecutorService p : pools) {
            p.shutdownNow();
            assertTrue(p.awaitTermination(10, TimeUnit.SECONDS), "worker threads stopped");
        }
    }

    @Test
    void noBlockIsEverLiveTwiceAndFreedBlocksAreReused() throws Exception {
        long seed = Seeds.seed("membus.alloc.seed", "noBlockIsEverLiveTwiceAndFreedBlocksAreReused");
        cluster = new AllocCluster(NODES, 512 << 10, 16 << 10);
        Map<Long, Long> live = new ConcurrentHashMap<>(); // block ptr -> stamp of its owner
        Set<Long> everAllocated = ConcurrentHashMap.newKeySet();
        Queue<Object[]> handoff = new ConcurrentLinkedQueue<>();
        AtomicLong allocations = new AtomicLong();
        AtomicLong outOfMemory = new AtomicLong();
        ExecutorService exec = Executors.newFixedThreadPool(NODES * THREADS_PER_NODE);
        pools.add(exec);
        List<Future<?>> done = new ArrayList<>();
        for (int n = 1; n <= NODES; n++) {
            for (int t = 0; t < THREADS_PER_NODE; t++) {
                GlobalAllocator a = cluster.node(n);
                long stampBase = ((long) n << 32) | ((long) t << 24);
                SplittableRandom rnd = new SplittableRandom(seed + n * 31L + t);
                done.add(exec.submit(() -> {
                    worker(a, rnd, stampBase, live, everAllocated, allocations, outOfMemory, handoff);
                    return null;
                }));
            }
        }
        for (Future<?> f : done) {
            f.get(60, TimeUnit.SECONDS);
        }
        long total = allocations.get();
        System.out.println("allocations=" + total + ", distinctBlocks=" + everAllocated.size() + ", outOfMemory="
                + outOfMemory.get() + ", stillLive=" + live.size());
        assertTrue(everAllocated.size() < total / 2, "freed blocks are handed out again: distinct="
                + everAllocated.size() + ", allocations=" + total);
        // free everything left, from a node chosen by the block's address, then trim: every chunk comes back
        for (Object[] given; (given = handoff.poll()) != null; ) { // handed off after every worker's last poll
            BlockRef r = (BlockRef) given[0];
            assertTrue(live.remove(r.ptr(), (Long) given[1]));
            cluster.node(1).free(r);
        }
        for (Map.Entry<Long, Long> e : live.entrySet()) {
            fail("worker left a live block " + RemotePtr.toString(e.getKey()));
        }
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
     * One worker: allocates, stamps, checks and frees blocks; hands some blocks to
     * {@code handoff}, from which any worker (usually on another node) frees them.
     */
    static void worker(GlobalAllocator a, SplittableRandom rnd, long stampBase, Map<Long, Long> live,
                       Set<Long> everAllocated, AtomicLong allocations, AtomicLong outOfMemory,
                       Queue<Object[]> handoff) {
        List<BlockRef> mine = new ArrayList<>();
        List<Long> stamps = new ArrayList<>();
        long next = 0;
        int[] sizes = {8, 24, 56, 120, 300, 1000, 3000};
        int nodes = a.memory().directory().members().size();
        Placement[] placements = {Placement.local(), Placement.roundRobin(), Placement.node(1 + rnd.nextInt(nodes)),
                Placement.byKey(rnd.nextLong())};
        for (int op = 0; op < 5000; op++) {
            if (rnd.nextInt(100) < 10) {
                Object[] given = handoff.poll();
                if (given != null) { // free a block another worker allocated, from this node
                    BlockRef r = (BlockRef) given[0];
                    long stamp = (Long) given[1];
                    assertEquals(stamp, a.readLong(r, 0), "a handed-off block still holds its stamp: " + r);
                    assertTrue(live.remove(r.ptr(), stamp));
                    a.free(r);
                    continue;
                }
            }
            boolean alloc = mine.isEmpty() || (mine.size() < 200 && rnd.nextInt(100) < 55);
            if (alloc) {
                BlockRef r;
                try {
                    r = a.allocate(sizes[rnd.nextInt(sizes.length)], placements[rnd.nextInt(placements.length)]);
                } catch (OutOfRemoteMemoryException e) {
                    outOfMemory.incrementAndGet();
                    continue;
                }
                long stamp = stampBase | next++;
                Long previous = live.putIfAbsent(r.ptr(), stamp);
                assertNull(previous, () -> "block handed out twice: " + r + " already owned by stamp " + previous);
                a.writeLong(r, 0, stamp);
                everAllocated.add(r.ptr());
                allocations.incrementAndGet();
                mine.add(r);
                stamps.add(stamp);
            } else {
                int i = rnd.nextInt(mine.size());
                BlockRef r = mine.get(i);
                long stamp = stamps.get(i);
                byte[] b = a.read(r, 0, 8);
                assertEquals(stamp, Words.getLong(b, 0), "the block still holds its owner's stamp: " + r);
                if (rnd.nextInt(100) < 25) {
                    handoff.add(new Object[]{r, stamp});
                } else {
                    assertTrue(live.remove(r.ptr(), stamp), "the verifier knew the block as ours");
                    a.free(r); // after the verifier drops it: the next owner may get it at once
                }
                mine.set(i, mine.get(mine.size() - 1));
                mine.remove(mine.size() - 1);
                stamps.set(i, stamps.get(stamps.size() - 1));
                stamps.remove(stamps.size() - 1);
            }
        }
        for (int i = 0; i < mine.size(); i++) {
            assertTrue(live.remove(mine.get(i).ptr(), stamps.get(i)));
            a.free(mine.get(i));
        }
        for (Object[] given; (given = handoff.poll()) != null; ) {
            BlockRef r = (BlockRef) given[0];
            assertTrue(live.remove(r.ptr(), (Long) given[1]));
            a.free(r);
        }
    }

    @Test
    void chunkClaimRacesGiveEachChunkToOneNode() throws Exception {
        long seed = Seeds.seed("membus.alloc.seed", "chunkClaimRacesGiveEachChunkToOneNode");
        // a small heap on node 1: 15 chunks; every node races for them with large objects of 1-3 chunks
        cluster = new AllocCluster(NODES, 16 * (4 << 10) + 4096, 4 << 10);
        int chunks = cluster.node(1).usage().segments().get(0).chunks();
        ExecutorService exec = Executors.newFixedThreadPool(NODES * THREADS_PER_NODE);
        pools.add(exec);
        Map<Long, BlockRef> owners = new ConcurrentHashMap<>(); // chunk-start ptr -> object covering it
        AtomicLong claims = new AtomicLong();
        AtomicLong conflicts = new AtomicLong();
        List<Future<?>> done = new ArrayList<>();
        long chunkSize = 4 << 10;
        for (int n = 1; n <= NODES; n++) {
            for (int t = 0; t < THREADS_PER_NODE; t++) {
                GlobalAllocator a = cluster.node(n);
                SplittableRandom rnd = new SplittableRandom(seed ^ (n * 1000 + t));
                done.add(exec.submit(() -> {
                    List<BlockRef> held = new ArrayList<>();
                    for (int i = 0; i < 400; i++) {
                        if (held.size() < 3 && rnd.nextBoolean()) {
                            int span = 1 + rnd.nextInt(3);
                            BlockRef r;
                            try {
                                r = a.allocate(span * chunkSize - 8 - rnd.nextInt(1000), Placement.node(1));
                            } catch (OutOfRemoteMemoryException e) {
                                conflicts.incrementAndGet();
                                continue;
                            }
                            for (int c = 0; c < span; c++) {
                                BlockRef other = owners.putIfAbsent(r.ptr() + c * chunkSize, r);
                                assertNull(other, () -> "chunk claimed twice: " + r + " and " + other);
                            }
                            claims.incrementAndGet();
                            held.add(r);
                        } else if (!held.isEmpty()) {
                            BlockRef r = held.remove(rnd.nextInt(held.size()));
                            long span = (r.capacity() + 8) / chunkSize;
                            for (int c = 0; c < span; c++) {
                                assertTrue(owners.remove(r.ptr() + c * chunkSize, r));
                            }
                            a.free(r);
                        }
                    }
                    for (BlockRef r : held) {
                        long span = (r.capacity() + 8) / chunkSize;
                        for (int c = 0; c < span; c++) {
                            assertTrue(owners.remove(r.ptr() + c * chunkSize, r));
                        }
                        a.free(r);
                    }
                    return null;
                }));
            }
        }
        for (Future<?> f : done) {
            f.get(60, TimeUnit.SECONDS);
        }
        System.out.println("chunks=" + chunks + ", claims=" + claims.get() + ", full=" + conflicts.get());
        assertTrue(claims.get() > 100, "the race ran: claims=" + claims.get());
        HeapUsage.SegmentUsage u = cluster.node(2).usage().segments().get(0);
        assertEquals(chunks, u.freeChunks(), "every chunk is free again:\n" + cluster.node(2).usage().segments());
    }

    @Test
    void smallChunkClaimsRaceWithoutOverlap() throws Exception {
        cluster = new AllocCluster(NODES, 40 * (4 << 10), 4 << 10);
        ExecutorService exec = Executors.newFixedThreadPool(NODES * THREADS_PER_NODE);
        pools.add(exec);
        List<Future<List<BlockRef>>> done = new ArrayList<>();
        for (int n = 1; n <= NODES; n++) {
            for (int t = 0; t < THREADS_PER_NODE; t++) {
                GlobalAllocator a = cluster.node(n);
                int size = 40 + 200 * t;
                done.add(exec.submit(() -> {
                    List<BlockRef> got = new ArrayList<>();
                    while (true) {
                        try {
                            got.add(a.allocate(size, Placement.node(2)));
                        } catch (OutOfRemoteMemoryException e) {
                            return got;
                        }
                    }
                }));
            }
        }
        Set<Long> seen = new HashSet<>();
        long bytes = 0;
        List<long[]> ranges = new ArrayList<>();
        for (Future<List<BlockRef>> f : done) {
            for (BlockRef r : f.get(60, TimeUnit.SECONDS)) {
                assertTrue(seen.add(r.ptr()), "block handed out twice: " + r);
                ranges.add(new long[]{r.ptr(), r.payload() + r.capacity()});
                bytes += r.capacity() + 8;
            }
        }
        ranges.sort((x, y) -> Long.compare(x[0], y[0]));
        for (int i = 1; i < ranges.size(); i++) {
            assertTrue(ranges.get(i)[0] >= ranges.get(i - 1)[1], "blocks overlap");
        }
        HeapUsage.SegmentUsage u = cluster.node(1).usage().segments().get(1);
        assertEquals(2, u.nodeId());
        assertEquals(0, u.freeChunks());
        System.out.println("filled " + bytes + " of " + u.capacityBytes() + " bytes with " + seen.size() + " blocks");
        assertTrue(bytes > u.capacityBytes() * 0.8, "a full heap is mostly blocks: " + bytes);
    }
}
