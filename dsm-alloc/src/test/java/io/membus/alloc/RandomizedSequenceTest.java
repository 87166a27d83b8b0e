package io.membus.alloc;

import io.membus.core.Words;
import io.membus.core.test.Seeds;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A random sequence of allocations (small and large, every placement), writes, reads,
 * frees from random nodes, stale uses, double frees and trims, checked against a
 * model after every step. Prints its seed; {@code -Dmembus.alloc.seed=N} replays it.
 */
class RandomizedSequenceTest extends WithAllocCluster {
    private record Live(BlockRef ref, long stamp) {
    }

    @Test
    void randomSequencesKeepEveryInvariant() {
        long seed = Seeds.seed("membus.alloc.seed", "randomSequencesKeepEveryInvariant");
        SplittableRandom rnd = new SplittableRandom(seed);
        int nodes = 2 + rnd.nextInt(3);
        cluster = new AllocCluster(nodes, 384 << 10, 8 << 10);
        List<Live> live = new ArrayList<>();
        List<BlockRef> dead = new ArrayList<>();
        TreeMap<Long, Long> ranges = new TreeMap<>(); // live block start -> end (exclusive)
        long stamps = 0;
        int ooms = 0;
        for (int step = 0; step < 4000; step++) {
            GlobalAllocator a = cluster.node(1 + rnd.nextInt(nodes));
            int op = rnd.nextInt(100);
            String where = "seed=" + seed + ", step=" + step;
            if (op < 45) {
                long size = rnd.nextInt(10) == 0 ? 3000 + rnd.nextInt(40_000) : 1 + rnd.nextInt(600);
                Placement p = switch (rnd.nextInt(4)) {
                    case 0 -> Placement.local();
                    case 1 -> Placement.roundRobin();
                    case 2 -> Placement.node(1 + rnd.nextInt(nodes));
                    default -> Placement.byKey(rnd.nextLong());
                };
                BlockRef r;
                try {
                    r = a.allocate(size, p);
                } catch (OutOfRemoteMemoryException e) {
                    ooms++;
                    continue;
                }
                assertTrue(r.capacity() >= size, where);
                long end = r.payload() + r.capacity();
                Map.Entry<Long, Long> below = ranges.floorEntry(end - 1);
                assertTrue(below == null || below.getValue() <= r.ptr(), () -> where + ": " + r + " overlaps a live block");
                ranges.put(r.ptr(), end);
                long stamp = ++stamps;
                a.writeLong(r, 0, stamp);
                a.writeLong(r, r.capacity() - 8 - (r.capacity() % 8), stamp);
                live.add(new Live(r, stamp));
            } else if (op < 80 && !live.isEmpty()) {
                Live l = live.remove(rnd.nextInt(live.size()));
                assertEquals(l.stamp(), a.readLong(l.ref(), 0), where);
                a.free(l.ref());
                ranges.remove(l.ref().ptr());
                dead.add(l.ref());
            } else if (op < 88 && !live.isEmpty()) {
                Live l = live.get(rnd.nextInt(live.size()));
                BlockRef r = l.ref();
                long tail = r.capacity() - 8 - (r.capacity() % 8);
                assertEquals(l.stamp(), Words.getLong(a.read(r, tail, 8), 0), where);
            } else if (op < 94 && !dead.isEmpty()) {
                BlockRef d = dead.get(rnd.nextInt(dead.size()));
                boolean reused = ranges.containsKey(d.ptr());
                if (rnd.nextBoolean()) {
                    // a stale read: a use-after-free error, or invalid when its chunk now holds other sizes
                    RuntimeException e = assertThrows(RuntimeException.class, () -> a.read(d, 0, 8), where);
                    assertTrue(e instanceof UseAfterFreeException, where + ": " + e);
                } else {
                    RuntimeException e = assertThrows(RuntimeException.class, () -> a.free(d), where);
                    assertTrue(e instanceof DoubleFreeException || e instanceof InvalidBlockException,
                            where + ": " + e);
                }
                if (reused) {
                    Live owner = live.stream().filter(x -> x.ref().ptr() == d.ptr()).findFirst().orElseThrow();
                    assertEquals(owner.stamp(), a.readLong(owner.ref(), 0), where + ": the new owner's data is intact");
                }
            } else if (op < 96) {
                a.trim();
            }
        }
        System.out.println("steps=4000, nodes=" + nodes + ", live=" + live.size() + ", freed=" + dead.size()
                + ", outOfMemory=" + ooms);
        for (Live l : live) {
            assertEquals(l.stamp(), cluster.node(1).readLong(l.ref(), 0));
            cluster.node(1 + rnd.nextInt(nodes)).free(l.ref());
        }
        for (GlobalAllocator a : cluster.allocators.values()) {
            a.trim();
        }
        HeapUsage u = cluster.node(1).usage();
        for (HeapUsage.SegmentUsage s : u.segments()) {
            assertEquals(s.chunks(), s.freeChunks(), "seed=" + seed + ": every chunk free at the end\n" + u.segments());
        }
    }
}
