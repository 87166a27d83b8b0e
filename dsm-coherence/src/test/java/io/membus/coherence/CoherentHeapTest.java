package io.membus.coherence;

import io.membus.alloc.Placement;
import io.membus.alloc.UseAfterFreeException;
import io.membus.codec.Codecs;
import io.membus.codec.KryoCodec;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CoherentHeapTest {
    private CoherenceCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    private static CoherenceConfig fast() {
        return CoherenceConfig.defaults().withLockTimeout(Duration.ofMillis(300)).withSkewCheck(false, Duration.ofSeconds(5));
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void everyNodeReadsWhatAnyNodeWrote(String transport) {
        cluster = new CoherenceCluster(transport, 3, id -> fast(), true);
        RemoteRef<Long> one = cluster.heap(1).create(Codecs.longs(), 7L, Placement.node(2));
        RemoteRef<Long> three = cluster.heap(3).open(one.ptr(), one.generationHeader(), Codecs.longs());
        assertEquals(7L, three.get());
        long v0 = one.version();
        three.set(8L);
        assertEquals(8L, one.get());
        assertTrue(one.version() > v0, "a write moves the version on");
        assertTrue(one.compareAndSet(8L, 9L));
        assertFalse(three.compareAndSet(8L, 10L), "the value is 9 now");
        assertEquals(19L, three.update(v -> v + 10));
        assertEquals(19L, one.getAndSet(20L));
        assertEquals(20L, three.get());
    }

    @Test
    void aCachedReadIsServedLocallyAndAWriteAnywhereInvalidatesIt() {
        cluster = new CoherenceCluster("local", 3, id -> fast().withLeases(Duration.ofSeconds(2), Duration.ofSeconds(5)), true);
        RemoteRef<String> writer = cluster.heap(1).create(Codecs.strings(), "a", Placement.node(3));
        RemoteRef<String> reader = cluster.heap(2).open(writer.ptr(), writer.generationHeader(), Codecs.strings());
        assertTrue(reader.isCached());
        assertEquals("a", reader.get());
        assertEquals(1, cluster.heap(2).cachedObjects(), "the read filled the cache");
        assertEquals("a", reader.get());
        writer.set("b"); // the lease is seconds long: only the invalidation message makes this visible at once
        assertEquals(0, cluster.heap(2).cachedObjects(), "the writer's invalidation dropped node 2's copy");
        assertEquals("b", reader.get());
        assertEquals("b", reader.cached(false).get());
    }

    @Test
    void aKeptCopyIsNoLongerValidOnceAWriteInvalidatedItOrAFillReplacedIt() {
        cluster = new CoherenceCluster("local", 3, id -> fast().withLeases(Duration.ofSeconds(2), Duration.ofSeconds(5)), true);
        RemoteRef<Long> writer = cluster.heap(1).create(Codecs.longs(), 1L, Placement.node(3));
        RemoteRef<Long> reader = cluster.heap(2).open(writer.ptr(), writer.generationHeader(), Codecs.longs());
        CoherentHeap heap = cluster.heap(2);
        assertNull(heap.cachedCopy(reader), "nothing cached yet");
        long v1 = heap.cacheVersion(reader);
        CoherentHeap.CachedCopy copy = heap.cachedCopy(reader);
        assertEquals(v1, heap.versionIfValid(copy), "the copy just filled is served");
        assertEquals(v1, copy.version());
        writer.set(2L); // invalidates node 2's copy before it returns
        assertEquals(-1, heap.versionIfValid(copy), "a copy dropped by an invalidation is never served again");
        long v2 = heap.cacheVersion(reader);
        assertTrue(v2 > v1, "refilled at the new version");
        CoherentHeap.CachedCopy second = heap.cachedCopy(reader);
        assertEquals(v2, heap.versionIfValid(second));
        assertEquals(-1, heap.versionIfValid(copy), "the old copy stays dropped after a refill");
        assertEquals(-1, heap.versionIfValid(null));
    }

    @Test
    void withoutMessagesAWriterWaitsOutTheLeasesAndNobodyReadsStale() {
        cluster = new CoherenceCluster("local", 2, id -> fast().withLeases(Duration.ofMillis(50), Duration.ofMillis(100)), false);
        RemoteRef<Long> w = cluster.heap(1).create(Codecs.longs(), 1L, Placement.node(1));
        RemoteRef<Long> r = cluster.heap(2).open(w.ptr(), w.generationHeader(), Codecs.longs());
        for (long i = 2; i < 20; i++) {
            assertEquals(i - 1, r.get());
            w.set(i);
            assertEquals(i, r.get(), "a completed write is seen by the next read, even by a node that cached");
        }
    }

    record Big(String name, List<Long> numbers) {
    }

    @Test
    void valuesLargerThanASlotLiveOutOfLineAndGrowAndShrink() {
        cluster = new CoherenceCluster("local", 2, id -> fast(), true);
        KryoCodec<Big> codec = KryoCodec.of(Big.class);
        RemoteRef<Big> ref = cluster.heap(1).create(codec, new Big("small", new ArrayList<>(List.of(1L))), Placement.node(2));
        List<Long> many = new ArrayList<>();
        for (long i = 0; i < 5000; i++) {
            many.add(i * 31);
        }
        Big big = new Big("big", many);
        ref.set(big);
        RemoteRef<Big> other = cluster.heap(2).open(ref.ptr(), ref.generationHeader(), codec);
        assertEquals(big, other.get());
        other.set(new Big("small again", new ArrayList<>(List.of(2L))));
        assertEquals("small again", ref.get().name());
        ref.set(big);
        assertEquals(big, other.cached(false).get());
    }

    @Test
    void aFreedObjectFailsOnEveryNodeWithUseAfterFree() {
        cluster = new CoherenceCluster("local", 2, id -> fast(), true);
        RemoteRef<Long> ref = cluster.heap(1).create(Codecs.longs(), 5L, Placement.node(2));
        RemoteRef<Long> other = cluster.heap(2).open(ref.ptr(), ref.generationHeader(), Codecs.longs());
        assertEquals(5L, other.get());
        ref.free();
        assertThrows(UseAfterFreeException.class, other::get);
        assertThrows(UseAfterFreeException.class, () -> other.set(1L));
        assertThrows(UseAfterFreeException.class, () -> cluster.heap(2).open(ref.ptr(), ref.generationHeader(),
                Codecs.longs()));
        // the block is reused by a new object: the stale handle still cannot touch it
        RemoteRef<Long> reuse = cluster.heap(2).create(Codecs.longs(), 99L, Placement.node(2));
        assertThrows(UseAfterFreeException.class, () -> other.set(1L));
        assertEquals(99L, reuse.get());
    }

    @Test
    void aWriterThatDiesAfterLockingLeavesTheOldValueAndItsLockIsRecovered() {
        cluster = new CoherenceCluster("local", 2, id -> fast(), true);
        RemoteRef<Long> ref = cluster.heap(1).create(Codecs.longs(), 1L, Placement.node(2));
        cluster.heap(1).update(ref, old -> Codecs.longs().encode(2L), CoherentHeap.WriteStop.AFTER_LOCK);
        RemoteRef<Long> other = cluster.heap(2).open(ref.ptr(), ref.generationHeader(), Codecs.longs());
        assertEquals(1L, other.cached(false).get(), "a reader is never blocked by a lock: the current slot is intact");
        other.set(3L); // waits out the lock timeout, recovers, writes
        assertEquals(3L, ref.get());
    }

    @Test
    void aWriterThatDiesMidWriteNeverLeavesATornValue() {
        cluster = new CoherenceCluster("local", 2, id -> fast(), true);
        RemoteRef<String> ref = cluster.heap(1).create(Codecs.strings(), "before", Placement.node(2));
        cluster.heap(1).update(ref, old -> Codecs.strings().encode("half-written"), CoherentHeap.WriteStop.AFTER_SPARE_SLOT);
        RemoteRef<String> other = cluster.heap(2).open(ref.ptr(), ref.generationHeader(), Codecs.strings());
        assertEquals("before", other.get());
        assertEquals("before!", other.update(v -> v + "!"), "recovery publishes the intact slot, the update applies to it");
        assertEquals("before!", ref.get());
    }

    @Test
    void aLockWhoseOwnerIsNoLiveMemberIsRecoveredAtOnce() {
        cluster = new CoherenceCluster("local", 3, id -> fast().withLockTimeout(Duration.ofMinutes(5)), true);
        RemoteRef<Long> ref = cluster.heap(3).create(Codecs.longs(), 1L, Placement.node(1));
        cluster.heap(3).update(ref, old -> Codecs.longs().encode(2L), CoherentHeap.WriteStop.AFTER_LOCK);
        cluster.directory.removeMember(3, "killed");
        RemoteRef<Long> other = cluster.heap(2).open(ref.ptr(), ref.generationHeader(), Codecs.longs());
        long start = System.nanoTime();
        other.set(5L);
        assertTrue(System.nanoTime() - start < Duration.ofMinutes(1).toNanos(), "not the five-minute lock timeout");
        assertEquals(5L, other.get());
    }

    @Test
    void aValueOverTheLimitIsRefusedBeforeAnythingIsClaimedOrLocked() {
        cluster = new CoherenceCluster("local", 2, id -> fast(), true);
        CoherentHeap heap = cluster.heap(1).maxValueSize(10_000);
        io.membus.alloc.GlobalAllocator allocator = heap.allocator();
        RemoteRef<byte[]> ref = heap.create(Codecs.bytes(), new byte[100], Placement.node(2));
        ref.set(new byte[5000]); // out of line: a block of its own
        allocator.trim();
        String before = allocator.usage().segments().toString();
        io.membus.core.error.ValueTooLargeException e = org.junit.jupiter.api.Assertions.assertThrows(
                io.membus.core.error.ValueTooLargeException.class, () -> ref.set(new byte[20_000]));
        assertEquals(10_000, e.limit());
        assertEquals(CoherentHeap.MAX_VALUE_SIZE_SETTING, e.setting());
        org.junit.jupiter.api.Assertions.assertThrows(io.membus.core.error.ValueTooLargeException.class,
                () -> heap.create(Codecs.bytes(), new byte[20_000], Placement.node(2)));
        allocator.trim();
        assertEquals(before, allocator.usage().segments().toString(), "nothing claimed");
        assertEquals(5000, ref.get().length, "the value is unchanged");
        ref.set(new byte[9000]); // not left locked
        assertEquals(9000, cluster.heap(2).open(ref.ptr(), ref.generationHeader(), Codecs.bytes()).get().length);
    }

    /**
     * Issue 24 (8): a writer interrupted while it waits for a sharer's ack keeps waiting (it
     * holds the lock and must publish or release it), completes the write, and returns with
     * the thread's interrupt flag set. The old code took the interrupt for a sharer that did
     * not answer, waited out the whole lease and cleared the flag.
     */
    @Test
    void anInterruptWhileAWriterWaitsForAcksIsKeptAndTheWriteCompletes() throws Exception {
        cluster = new CoherenceCluster("local", 2, id -> fast().withLeases(Duration.ofSeconds(4), Duration.ofSeconds(5)), true);
        RemoteRef<Long> writer = cluster.heap(1).create(Codecs.longs(), 1L, Placement.node(1));
        RemoteRef<Long> reader = cluster.heap(2).open(writer.ptr(), writer.generationHeader(), Codecs.longs());
        assertEquals(1L, reader.get());
        assertEquals(1, cluster.heap(2).cachedObjects(), "node 2 caches under a lease of seconds");
        // node 2 acknowledges invalidations slowly (half a second)
        var m2 = cluster.messagings.get(2);
        m2.unregister(CoherentHeap.INVALIDATE_CHANNEL);
        CountDownLatch asked = new CountDownLatch(1);
        m2.register(CoherentHeap.INVALIDATE_CHANNEL, "slow-invalidate", (from, payload) -> {
            asked.countDown();
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
            while (System.nanoTime() < until) {
                LockSupport.parkNanos(until - System.nanoTime());
            }
            cluster.heap(2).invalidateLocal(io.membus.core.Words.getLong(payload, 0));
            return new byte[0];
        });
        AtomicBoolean flagAfter = new AtomicBoolean();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long[] took = new long[1];
        Thread t = new Thread(() -> {
            long start = System.nanoTime();
            try {
                writer.set(2L);
            } catch (Throwable e) {
                failure.set(e);
            }
            took[0] = System.nanoTime() - start;
            flagAfter.set(Thread.currentThread().isInterrupted());
        }, "interrupted-writer");
        t.start();
        assertTrue(asked.await(10, TimeUnit.SECONDS), "the writer asked node 2 to drop its copy");
        t.interrupt();
        t.join(20_000);
        assertFalse(t.isAlive());
        assertNull(failure.get(), () -> "the write completes: " + failure.get());
        assertTrue(flagAfter.get(), "the interrupt is not swallowed: the flag is set when set() returns");
        assertTrue(took[0] < Duration.ofSeconds(3).toNanos(), "the writer waited for the ack, not out the 4 s lease: "
                + took[0] / 1_000_000 + " ms");
        assertEquals(2L, reader.get());
        assertEquals(2L, writer.cached(false).get());
    }
}
