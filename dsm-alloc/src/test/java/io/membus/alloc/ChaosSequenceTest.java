package io.membus.alloc;

import io.membus.core.error.DsmTimeoutException;
import io.membus.core.test.Seeds;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A random sequence of allocations, frees, stale uses and trims where one node's
 * verbs fail at random, half of them after they ran (the outcome a deadline leaves
 * unknown). Whatever fails, no two live blocks overlap, live data stays intact, no
 * table or free list is ever reported corrupt, and double frees are refused. Prints
 * its seed; {@code -Dmembus.alloc.seed=N} replays it.
 */
class ChaosSequenceTest extends WithAllocCluster {
    private record Live(BlockRef ref, long stamp) {
    }

    @Test
    void verbsWithUnknownOutcomesNeverCorruptTheHeap() {
        long seed = Seeds.seed("membus.alloc.seed", "verbsWithUnknownOutcomesNeverCorruptTheHeap");
        SplittableRandom rnd = new SplittableRandom(seed);
        AllocatorConfig cfg = AllocatorConfig.builder().heapSegments(AllocCluster.HEAP).chunkSize(8 << 10).build();
        cluster = new AllocCluster(2, 512 << 10, cfg);
        UnknownOutcomeTest.FaultyRemote[] faulty = new UnknownOutcomeTest.FaultyRemote[1];
        GlobalAllocator chaotic = cluster.addNode(3, 512 << 10, cfg,
                m -> faulty[0] = new UnknownOutcomeTest.FaultyRemote(m));
        faulty[0].chaosRate = 0.02 + rnd.nextDouble() * 0.04;
        faulty[0].chaos = new SplittableRandom(rnd.nextLong());
        GlobalAllocator checker = cluster.node(1); // never faulty: writes and checks the stamps

        List<Live> live = new ArrayList<>();
        List<BlockRef> dead = new ArrayList<>();
        TreeMap<Long, Long> ranges = new TreeMap<>();
        long stamps = 0;
        int faults = 0;
        for (int step = 0; step < 3000; step++) {
            GlobalAllocator a = rnd.nextInt(3) == 0 ? cluster.node(1 + rnd.nextInt(2)) : chaotic;
            String where = "seed=" + seed + ", step=" + step;
            int op = rnd.nextInt(100);
            try {
                if (op < 50) {
                    long size = rnd.nextInt(12) == 0 ? 3000 + rnd.nextInt(12_000) : 1 + rnd.nextInt(500);
                    Placement p = switch (rnd.nextInt(3)) {
                        case 0 -> Placement.local();
                        case 1 -> Placement.node(1 + rnd.nextInt(3));
                        default -> Placement.roundRobin();
                    };
                    BlockRef r;
                    try {
                        r = a.allocate(size, p);
                    } catch (OutOfRemoteMemoryException e) {
                        continue;
                    }
                    long end = r.payload() + r.capacity();
                    Map.Entry<Long, Long> below = ranges.floorEntry(end - 1);
                    assertTrue(below == null || below.getValue() <= r.ptr(), where + ": " + r + " overlaps a live block");
                    ranges.put(r.ptr(), end);
                    long stamp = ++stamps;
                    checker.writeLong(r, 0, stamp);
                    live.add(new Live(r, stamp));
                } else if (op < 85 && !live.isEmpty()) {
                    Live l = live.remove(rnd.nextInt(live.size()));
                    ranges.remove(l.ref().ptr()); // from here on the block may be reused (even if the free fails)
                    assertEquals(l.stamp(), checker.readLong(l.ref(), 0), where);
                    a.free(l.ref());
                    dead.add(l.ref());
                } else if (op < 95 && !dead.isEmpty()) {
                    BlockRef d = dead.get(rnd.nextInt(dead.size()));
                    try {
                        a.free(d);
                        throw new AssertionError(where + ": a double free was accepted: " + d);
                    } catch (DoubleFreeException | InvalidBlockException expected) {
                        // refused, nothing changed
                    }
                } else {
                    a.trim();
                }
            } catch (DsmTimeoutException e) {
                faults++; // an injected fault: the operation's outcome is unknown, the heap must stay sound
            }
        }
        faulty[0].chaos = null;
        System.out.println("seed=" + seed + ", rate=" + faulty[0].chaosRate + ", faults=" + faults + ", live="
                + live.size());
        for (Live l : live) {
            assertEquals(l.stamp(), checker.readLong(l.ref(), 0), "seed=" + seed + ": live data intact");
            chaotic.free(l.ref());
        }
        for (GlobalAllocator a : cluster.allocators.values()) {
            a.trim();
        }
        HeapUsage u = checker.usage();
        for (HeapUsage.SegmentUsage s : u.segments()) {
            assertTrue(s.problem() == null, "seed=" + seed + ": " + u.segments());
        }
        assertTrue(faults > 0, "seed=" + seed + ": the chaos injected faults");
    }
}
