package io.membus.collections;

import io.membus.alloc.BlockRef;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DsmAtomicLongTest {

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void behavesLikeAtomicLongFromEveryNode(String transport) {
        try (CollCluster c = new CollCluster(transport, 3)) {
            DsmAtomicLong a1 = c.node(1).atomicLong("hits");
            DsmAtomicLong a2 = c.node(2).atomicLong("hits");
            DsmAtomicLong a3 = c.node(3).atomicLong("hits");
            AtomicLong model = new AtomicLong();
            assertEquals(a1.address(), a2.address());
            assertEquals(0, a3.get());
            assertEquals(model.incrementAndGet(), a1.incrementAndGet());
            assertEquals(model.getAndIncrement(), a2.getAndIncrement());
            assertEquals(model.decrementAndGet(), a3.decrementAndGet());
            assertEquals(model.getAndDecrement(), a1.getAndDecrement());
            assertEquals(model.addAndGet(40), a2.addAndGet(40));
            assertEquals(model.getAndAdd(-3), a3.getAndAdd(-3));
            assertEquals(model.getAndSet(7), a1.getAndSet(7));
            a2.set(11);
            model.set(11);
            assertEquals(11, a3.get());
            a3.lazySet(12);
            model.lazySet(12);
            assertEquals(model.compareAndSet(12, 13), a1.compareAndSet(12, 13));
            assertEquals(model.compareAndSet(12, 14), a2.compareAndSet(12, 14));
            assertEquals(model.compareAndExchange(13, 20), a3.compareAndExchange(13, 20));
            assertEquals(model.compareAndExchange(13, 21), a1.compareAndExchange(13, 21));
            assertEquals(model.weakCompareAndSetPlain(20, 22), a2.weakCompareAndSetPlain(20, 22));
            assertEquals(model.updateAndGet(v -> v * 3), a3.updateAndGet(v -> v * 3));
            assertEquals(model.getAndUpdate(v -> v - 1), a1.getAndUpdate(v -> v - 1));
            assertEquals(model.accumulateAndGet(5, Math::max), a2.accumulateAndGet(5, Math::max));
            assertEquals(model.getAndAccumulate(100, Long::sum), a3.getAndAccumulate(100, Long::sum));
            assertEquals(model.get(), a1.get());
            assertEquals(model.toString(), a2.toString());
            assertEquals(model.intValue(), a3.intValue());
            assertEquals(model.doubleValue(), a1.doubleValue());
            assertEquals(model.get() + 5, a2.addAndGetAsync(5).join());
            assertEquals(model.get() + 5, a3.getAsync().join());
            assertTrue(a1.compareAndSetAsync(model.get() + 5, -1).join());
            assertEquals(-1, a2.get());
        }
    }

    @Test
    void sameHandlePerNameAndTypeMismatchNamesBoth() {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmAtomicLong a = c.node(1).atomicLong("x");
            assertSame(a, c.node(1).atomicLong("x"));
            assertNotSame(a, c.node(2).atomicLong("x"));
            // a root of another kind under the same name, made through the root mechanism on node 2
            c.node(2).roots().getOrCreate("y", CollectionKind.LOCK, "lock", 8, r -> { });
            CollectionTypeMismatchException e = assertThrows(CollectionTypeMismatchException.class,
                    () -> c.node(1).atomicLong("y"));
            assertEquals("y", e.name());
            assertEquals("LOCK lock", e.existing());
            assertEquals("ATOMIC_LONG atomicLong", e.requested());
            assertTrue(e.getMessage().contains("name=y, existing=LOCK lock, requested=ATOMIC_LONG atomicLong"),
                    e.getMessage());
            // a name bound to a pointer that is not a root: refused, nothing changed
            long notARoot = c.allocators.get(1).allocate(64).ptr();
            c.directory.bind("raw", notARoot);
            CollectionTypeMismatchException raw = assertThrows(CollectionTypeMismatchException.class,
                    () -> c.node(2).atomicLong("raw"));
            assertTrue(raw.existing().startsWith("not a collection root"), raw.existing());
            assertEquals(notARoot, c.directory.lookup("raw").orElseThrow());
            assertThrows(CollectionArgumentException.class, () -> c.node(1).atomicLong(""));
        }
    }

    @Test
    void descriptorMismatchIsRefusedWithBothDescriptors() {
        try (CollCluster c = new CollCluster("local", 2)) {
            c.node(1).roots().getOrCreate("arr", CollectionKind.LONG_ARRAY, "longArray(length=10)", 80, r -> { });
            CollectionTypeMismatchException e = assertThrows(CollectionTypeMismatchException.class,
                    () -> c.node(2).roots().getOrCreate("arr", CollectionKind.LONG_ARRAY, "longArray(length=11)",
                            88, r -> { }));
            assertEquals("LONG_ARRAY longArray(length=10)", e.existing());
            assertEquals("LONG_ARRAY longArray(length=11)", e.requested());
        }
    }

    /** Many threads on three nodes create one name at once: one root, every loser's root (and extra block) freed. */
    @Test
    void concurrentCreationYieldsOneRootAndFreesTheLosers() throws Exception {
        try (CollCluster c = new CollCluster("local", 3)) {
            ExecutorService pool = Executors.newFixedThreadPool(6);
            try {
                for (int round = 0; round < 5; round++) {
                    String name = "race-" + round;
                    List<BlockRef> made = new CopyOnWriteArrayList<>();
                    List<BlockRef> extras = new CopyOnWriteArrayList<>();
                    List<Future<Root>> fs = new ArrayList<>();
                    for (int i = 0; i < 6; i++) {
                        int node = 1 + i % 3;
                        NamedRoots roots = c.node(node).roots();
                        NamedRoots.Initializer init = new NamedRoots.Initializer() {
                            @Override
                            public void format(Root root) {
                                made.add(root.block());
                                BlockRef extra = roots.allocator().allocate(32);
                                extras.add(extra);
                                roots.memory().writeLong(root.bodyPtr(), extra.ptr());
                                roots.memory().writeLong(root.bodyPtr() + 8, extra.header());
                            }

                            @Override
                            public void discard(Root root) {
                                long ptr = roots.memory().readLong(root.bodyPtr());
                                long header = roots.memory().readLong(root.bodyPtr() + 8);
                                roots.allocator().free(BlockRef.of(ptr, header, 32));
                            }
                        };
                        fs.add(pool.submit(() -> roots.getOrCreate(name, CollectionKind.ATOMIC_LONG, "atomicLong",
                                16, init)));
                    }
                    BlockRef winner = fs.get(0).get(30, TimeUnit.SECONDS).block();
                    for (Future<Root> f : fs) {
                        assertEquals(winner, f.get(30, TimeUnit.SECONDS).block());
                    }
                    assertEquals(winner.ptr(), c.directory.lookup(name).orElseThrow());
                    assertTrue(made.contains(winner));
                    int live = 0;
                    for (BlockRef r : made) {
                        assertEquals(r.equals(winner), c.allocators.get(1).isLive(r), "root " + r);
                    }
                    for (BlockRef r : extras) {
                        live += c.allocators.get(1).isLive(r) ? 1 : 0;
                    }
                    assertEquals(1, live, "only the winner's extra block stays allocated");
                }
            } finally {
                pool.shutdownNow();
            }
        }
    }

    /** Counters are exact under concurrency from every node (each thread's increments all counted). */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void concurrentIncrementsAreExact(String transport) throws Exception {
        try (CollCluster c = new CollCluster(transport, 3)) {
            int threads = 6;
            int per = 2000;
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            try {
                List<Callable<Void>> tasks = new ArrayList<>();
                for (int i = 0; i < threads; i++) {
                    DsmAtomicLong a = c.node(1 + i % 3).atomicLong("count");
                    boolean cas = i % 2 == 0;
                    tasks.add(() -> {
                        for (int k = 0; k < per; k++) {
                            if (cas) {
                                a.updateAndGet(v -> v + 1);
                            } else {
                                a.incrementAndGet();
                            }
                        }
                        return null;
                    });
                }
                for (Future<Void> f : pool.invokeAll(tasks, 60, TimeUnit.SECONDS)) {
                    assertFalse(f.isCancelled(), "a task did not finish in time");
                    f.get();
                }
            } finally {
                pool.shutdownNow();
            }
            assertEquals((long) threads * per, c.node(2).atomicLong("count").get());
        }
    }
}
