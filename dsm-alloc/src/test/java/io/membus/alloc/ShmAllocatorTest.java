package io.membus.alloc;

import io.membus.core.test.Seeds;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
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

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The allocator over the {@code shm} transport: heaps in files under /dev/shm mapped by every node. */
class ShmAllocatorTest extends WithAllocCluster {
    private ExecutorService exec;

    @AfterEach
    void close() throws InterruptedException {
        if (exec != null) {
            exec.shutdownNow();
            assertTrue(exec.awaitTermination(10, TimeUnit.SECONDS));
        }
    }

    private static AllocatorConfig config() {
        return AllocatorConfig.builder().heapSegments(AllocCluster.HEAP).chunkSize(16 << 10).build();
    }

    @Test
    void blocksUseAfterFreeAndDoubleFreeOverShm() {
        cluster = new AllocCluster("shm", 2, 512 << 10, config());
        GlobalAllocator one = cluster.node(1);
        GlobalAllocator two = cluster.node(2);
        BlockRef r = one.allocate(200, Placement.node(2));
        byte[] text = "over shared memory".getBytes(StandardCharsets.UTF_8);
        one.write(r, 0, text);
        assertArrayEquals(text, two.read(r, 0, text.length));
        two.free(r);
        assertThrows(UseAfterFreeException.class, () -> one.read(r, 0, 4));
        assertThrows(DoubleFreeException.class, () -> one.free(r));
        BlockRef big = two.allocate(60_000, Placement.node(1));
        one.free(big);
        assertEquals(2, one.usage().segments().size());
    }

    @Test
    void concurrentNodesKeepOwnershipOverShm() throws Exception {
        long seed = Seeds.seed("membus.alloc.seed", "concurrentNodesKeepOwnershipOverShm");
        cluster = new AllocCluster("shm", 2, 512 << 10, config());
        exec = Executors.newFixedThreadPool(4);
        Map<Long, Long> live = new ConcurrentHashMap<>();
        Set<Long> ever = ConcurrentHashMap.newKeySet();
        Queue<Object[]> handoff = new ConcurrentLinkedQueue<>();
        AtomicLong allocations = new AtomicLong();
        AtomicLong ooms = new AtomicLong();
        List<Future<?>> done = new ArrayList<>();
        for (int n = 1; n <= 2; n++) {
            for (int t = 0; t < 2; t++) {
                GlobalAllocator a = cluster.node(n);
                SplittableRandom rnd = new SplittableRandom(seed + n * 7L + t);
                long stampBase = ((long) n << 32) | ((long) t << 24);
                done.add(exec.submit(() -> {
                    ConcurrentAllocationTest.worker(a, rnd, stampBase, live, ever, allocations, ooms, handoff);
                    return null;
                }));
            }
        }
        for (Future<?> f : done) {
            f.get(60, TimeUnit.SECONDS);
        }
        for (Object[] given; (given = handoff.poll()) != null; ) {
            assertTrue(live.remove(((BlockRef) given[0]).ptr(), (Long) given[1]));
            cluster.node(2).free((BlockRef) given[0]);
        }
        assertTrue(live.isEmpty());
        assertTrue(ever.size() < allocations.get() / 2, "freed blocks reused: distinct=" + ever.size()
                + ", allocations=" + allocations.get());
    }
}
