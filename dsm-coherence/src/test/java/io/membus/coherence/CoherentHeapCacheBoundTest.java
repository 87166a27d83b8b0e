package io.membus.coherence;

import io.membus.alloc.Placement;
import io.membus.alloc.UseAfterFreeException;
import io.membus.codec.Codecs;
import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Issue 24 (5): the coherent heap forgets. Its cache of copies never holds more than its
 * bound (objects and bytes); copies whose lease ran out are dropped with no read of them;
 * copies of objects another node freed are dropped, also when their lease had run out (so
 * no invalidation came). The old heap kept every copy it ever filled.
 */
class CoherentHeapCacheBoundTest {
    private CoherenceCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    private static CoherenceConfig config() {
        return CoherenceConfig.defaults().withSkewCheck(false, Duration.ofSeconds(5))
                .withLeases(Duration.ofSeconds(2), Duration.ofSeconds(5));
    }

    private List<RemoteRef<String>> create(int n, int length) {
        List<RemoteRef<String>> refs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String v = (i + ":" + "x".repeat(length)).substring(0, length);
            refs.add(cluster.heap(1).create(Codecs.strings(), v, Placement.node(1)));
        }
        return refs;
    }

    private RemoteRef<String> on2(RemoteRef<String> r) {
        return cluster.heap(2).open(r.ptr(), r.generationHeader(), Codecs.strings());
    }

    private static void await(String what, Duration within, BooleanSupplier done) {
        long end = System.nanoTime() + within.toNanos();
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, what);
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
    }

    @Test
    void readingMoreObjectsThanTheEntryBoundNeverCachesMoreThanIt() {
        int bound = 64;
        cluster = new CoherenceCluster("local", 2, id -> config().withCacheBound(bound, 1L << 30), true);
        List<RemoteRef<String>> refs = create(500, 16);
        CoherentHeap heap = cluster.heap(2);
        for (RemoteRef<String> r : refs) {
            RemoteRef<String> mine = on2(r);
            assertEquals(r.cached(false).get(), mine.get());
            assertTrue(heap.cachedObjects() <= bound, "cached " + heap.cachedObjects() + " > " + bound);
        }
        assertEquals(bound, heap.cachedObjects(), "the cache is full, not emptied");
        assertTrue(heap.leaseHints() <= 2 * bound, "lease hints stay bounded too: " + heap.leaseHints());
        System.out.println(heap.status());
        // still coherent: a write by node 1 of any object is seen by node 2's next read, cached or not
        for (int i = 0; i < refs.size(); i += 7) {
            refs.get(i).set("new " + i);
            assertEquals("new " + i, on2(refs.get(i)).get());
        }
        assertTrue(heap.cachedObjects() <= bound);
    }

    @Test
    void readersOnManyThreadsNeverMakeTheCacheExceedItsBound() throws Exception {
        int bound = 32;
        long bytes = 2048;
        cluster = new CoherenceCluster("local", 2, id -> config().withCacheBound(bound, bytes), true);
        List<RemoteRef<String>> refs = create(400, 40);
        List<RemoteRef<String>> mine = new ArrayList<>();
        for (RemoteRef<String> r : refs) {
            mine.add(on2(r));
        }
        CoherentHeap heap = cluster.heap(2);
        java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicInteger most = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicLong mostBytes = new java.util.concurrent.atomic.AtomicLong();
        Thread watcher = new Thread(() -> {
            while (!done.get()) {
                most.accumulateAndGet(heap.cachedObjects(), Math::max);
                mostBytes.accumulateAndGet(heap.cachedBytes(), Math::max);
            }
        });
        watcher.start();
        List<Thread> readers = new ArrayList<>();
        java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
        for (int t = 0; t < 4; t++) {
            int offset = t * 97;
            readers.add(new Thread(() -> {
                try {
                    for (int i = 0; i < 2_000; i++) {
                        RemoteRef<String> r = mine.get((offset + i * 7) % mine.size());
                        assertTrue(r.get().startsWith((offset + i * 7) % mine.size() + ":"));
                    }
                } catch (Throwable e) {
                    failure.set(e);
                }
            }));
        }
        readers.forEach(Thread::start);
        for (Thread t : readers) {
            t.join(60_000);
        }
        done.set(true);
        watcher.join(10_000);
        assertEquals(null, failure.get());
        assertTrue(most.get() <= bound, "at most " + bound + " copies at any time, saw " + most.get());
        assertTrue(mostBytes.get() <= bytes, "at most " + bytes + " bytes at any time, saw " + mostBytes.get());
        assertTrue(heap.cachedObjects() > 0);
    }

    @Test
    void readingMoreBytesThanTheByteBoundNeverCachesMoreThanIt() {
        long bytes = 16 << 10;
        cluster = new CoherenceCluster("local", 2, id -> config().withCacheBound(1_000_000, bytes), true);
        List<RemoteRef<String>> refs = create(100, 1000);
        CoherentHeap heap = cluster.heap(2);
        for (RemoteRef<String> r : refs) {
            assertEquals(r.cached(false).get(), on2(r).get());
            assertTrue(heap.cachedBytes() <= bytes, "cached " + heap.cachedBytes() + " bytes > " + bytes);
        }
        assertEquals(bytes / 1000, heap.cachedObjects(), "as many 1000-byte values as fit");
        // a value longer than the whole bound is read, never cached
        RemoteRef<String> big = cluster.heap(1).create(Codecs.strings(), "y".repeat(20_000), Placement.node(1));
        int before = heap.cachedObjects();
        assertEquals(20_000, on2(big).get().length());
        assertEquals(before, heap.cachedObjects());
        assertTrue(heap.cachedBytes() <= bytes);
    }

    @Test
    void copiesWhoseLeaseRanOutAreDroppedWithNoReadOfThem() {
        cluster = new CoherenceCluster("local", 2, id -> config().withLeases(Duration.ofMillis(10),
                Duration.ofMillis(20)), true);
        List<RemoteRef<String>> refs = create(300, 16);
        for (RemoteRef<String> r : refs) {
            on2(r).get();
        }
        CoherentHeap heap = cluster.heap(2);
        assertTrue(heap.cachedObjects() > 0, "the reads filled the cache");
        await("every expired copy dropped; still cached: " + heap.status(), Duration.ofSeconds(10),
                () -> heap.cachedObjects() == 0 && heap.cachedBytes() == 0);
    }

    @Test
    void copiesOfObjectsAnotherNodeFreedAreDroppedAlsoWhenTheirLeaseHadRunOut() {
        // first lease 80 ms (4 x min), the periodic sweep every second (the max lease): the copies expire,
        // then node 1 frees the objects without invalidating anybody (every lease ran out)
        cluster = new CoherenceCluster("local", 2, id -> config().withLeases(Duration.ofMillis(20),
                Duration.ofSeconds(5)), true);
        List<RemoteRef<String>> refs = create(100, 16);
        List<RemoteRef<String>> mine = new ArrayList<>();
        for (RemoteRef<String> r : refs) {
            mine.add(on2(r));
            mine.get(mine.size() - 1).get();
        }
        CoherentHeap heap = cluster.heap(2);
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(120));
        for (RemoteRef<String> r : refs) {
            r.free();
        }
        for (RemoteRef<String> r : mine) {
            assertThrows(UseAfterFreeException.class, r::get);
        }
        assertEquals(0, heap.cachedObjects(), "no copy of a freed object is kept: " + heap.status());
        assertEquals(0, heap.cachedBytes());
        assertEquals(0, heap.leaseHints(), "nor its lease hint");
    }

    @Test
    void aFreedObjectsInvalidationDropsTheCopyAtOnce() {
        cluster = new CoherenceCluster("local", 2, id -> config(), true);
        List<RemoteRef<String>> refs = create(50, 16);
        for (RemoteRef<String> r : refs) {
            on2(r).get();
        }
        assertEquals(50, cluster.heap(2).cachedObjects());
        for (RemoteRef<String> r : refs) {
            r.free();
        }
        assertEquals(0, cluster.heap(2).cachedObjects(), "each free invalidated node 2's live copy");
        assertEquals(0, cluster.heap(2).cachedBytes());
    }

    @Test
    void aBadBoundIsATypedErrorNamingItsKey() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> config().withCacheBound(0, 1 << 20));
        assertEquals("membus.coherence.cache-max-entries", e.key());
        e = assertThrows(DsmConfigException.class, () -> config().withCacheBound(10, 0));
        assertEquals("membus.coherence.cache-max-bytes", e.key());
    }
}
