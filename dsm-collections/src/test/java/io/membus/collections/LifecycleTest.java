package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapUsage;
import io.membus.alloc.Placement;
import io.membus.codec.Codecs;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Named structures have a life cycle: destroy gives the name back and frees every block a
 * grace later; handles on a destroyed structure fail typed on every node; a name whose
 * root is gone says so and can be given back.
 */
class LifecycleTest {
    private static final Duration GRACE = Duration.ofMillis(300);
    private CollCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    private CollCluster start(int nodes) {
        cluster = new CollCluster("local", nodes);
        for (int n = 1; n <= nodes; n++) {
            cluster.node(n).destroyGrace(GRACE);
        }
        return cluster;
    }

    /** Per node and segment: free chunks, large chunks, small blocks in use, large objects (caches trimmed). */
    private List<String> usage() {
        for (GlobalAllocator a : cluster.allocators.values()) {
            a.trim();
        }
        List<String> rows = new ArrayList<>();
        for (HeapUsage.SegmentUsage s : cluster.allocators.get(1).usage().segments()) {
            rows.add("node=" + s.nodeId() + " segment=" + s.segment() + " freeChunks=" + s.freeChunks()
                    + " largeChunks=" + s.largeChunks() + " blocksInUse=" + s.blocksInUse()
                    + " largeObjects=" + s.largeObjects());
        }
        return rows;
    }

    /** Waits (bounded) until every node's destroys have freed their blocks. */
    private void awaitReleases() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        for (int n : cluster.allocators.keySet()) {
            while (cluster.node(n).pendingReleases() > 0) {
                if (System.nanoTime() > deadline) {
                    fail("destroyed blocks not freed within 20 s of a " + GRACE + " grace");
                }
                Thread.sleep(20);
            }
        }
    }

    /** {@code op} fails with a StructureGoneException naming {@code name} within a few check intervals. */
    private static void failsGone(String name, Executable op) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (true) {
            try {
                op.execute();
            } catch (StructureGoneException e) {
                assertEquals(name, e.name());
                assertTrue(e.getMessage().contains("name=" + name) && e.getMessage().contains("destroy"),
                        e.getMessage());
                assertFalse(e.mayHaveRun());
                return;
            } catch (Throwable t) {
                throw new AssertionError("expected a StructureGoneException for " + name + ", got " + t, t);
            }
            if (System.nanoTime() > deadline) {
                fail(name + ": operations still succeed 5 s after the destroy");
            }
            Thread.sleep(10);
        }
    }

    @Test
    void destroyGivesTheNameBackHandlesEverywhereFailTypedAndTheBlocksAreFreed() throws Exception {
        start(2);
        List<String> before = usage();
        DsmAtomicLong one = cluster.node(1).atomicLong("hits");
        DsmAtomicLong two = cluster.node(2).atomicLong("hits");
        one.addAndGet(5);
        assertEquals(5, two.get());
        long oldRoot = one.root().block().ptr();

        assertTrue(cluster.node(1).destroy("hits"));
        assertThrows(StructureGoneException.class, one::get, "the destroying node's handle fails at once");
        failsGone("hits", two::incrementAndGet);
        assertFalse(cluster.node(2).destroy("hits"), "nothing bound any more");

        // the name is free: a new, empty counter (node 2's cache dropped the dead handle)
        DsmAtomicLong fresh = cluster.node(2).atomicLong("hits");
        assertEquals(0, fresh.get());
        assertEquals(1, fresh.incrementAndGet());
        assertEquals(1, cluster.node(1).atomicLong("hits").get());
        assertThrows(StructureGoneException.class, two::get, "the old handle stays dead");
        assertTrue(fresh.destroy());
        awaitReleases();
        assertEquals(before, usage(), "every block of both counters freed");
        assertNotEquals(0, oldRoot);
    }

    /**
     * Users of a structure while it is destroyed get a typed error and never another
     * structure's bytes (issue 29): threads on node 2 keep changing a counter and an array
     * while node 1 destroys both; each handle's operations succeed until the destroy is
     * seen and fail with {@link StructureGoneException} from then on, also after the blocks
     * were freed and handed out again (the old counter's root block, claimed back and filled
     * with a pattern; new structures under the same names, and more), and those hold exactly
     * what their own writes put there. Without the handles' look at their root
     * the old handles would go on changing the freed blocks, now the new structures' words.
     */
    @Test
    void usersOfADestroyedStructureFailTypedAndNeverChangeTheStructuresMadeInItsBlocks() throws Exception {
        start(2);
        DsmAtomicLong counter = cluster.node(2).atomicLong("busy");
        DsmLongArray array = cluster.node(2).longArray("busy-array", 64, 16);
        BlockRef oldRoot = counter.root().block();
        int threads = 4;
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.CountDownLatch allGone = new java.util.concurrent.CountDownLatch(threads);
        java.util.Queue<String> problems = new java.util.concurrent.ConcurrentLinkedQueue<>();
        java.util.concurrent.atomic.AtomicLong afterGone = new java.util.concurrent.atomic.AtomicLong();
        ExecutorService users = Executors.newFixedThreadPool(threads);
        try {
            for (int t = 0; t < threads; t++) {
                int me = t;
                users.execute(() -> {
                    boolean gone = false;
                    for (long i = 0; !stop.get(); i++) {
                        try {
                            if (i % 2 == 0) {
                                counter.incrementAndGet();
                            } else {
                                array.addAndGet((int) ((me * 16 + i) % 64), 1);
                            }
                            if (gone) {
                                problems.add("thread " + me + ": an operation succeeded after a StructureGoneException");
                                return;
                            }
                        } catch (StructureGoneException e) {
                            if (!gone) {
                                gone = true;
                                allGone.countDown();
                            }
                            afterGone.incrementAndGet();
                        } catch (Throwable e) {
                            problems.add("thread " + me + ": " + e);
                            return;
                        }
                    }
                });
            }
            Thread.sleep(200); // they run
            assertTrue(cluster.node(1).destroy("busy"));
            assertTrue(cluster.node(1).destroy("busy-array"));
            assertTrue(allGone.await(10, TimeUnit.SECONDS), "every user sees the destroy: " + problems);
            awaitReleases(); // the blocks are free: new structures may be made in them
            // the old counter's root block, holding its value word, is handed out again and filled with a pattern
            BlockRef reclaimed = null;
            List<BlockRef> claimed = new ArrayList<>();
            for (GlobalAllocator a : cluster.allocators.values()) {
                a.trim();
            }
            search:
            for (int round = 0; round < 2_000; round++) {
                for (GlobalAllocator a : cluster.allocators.values()) {
                    BlockRef b = a.allocate(oldRoot.capacity(), Placement.node(oldRoot.nodeId()));
                    if (b.ptr() == oldRoot.ptr()) {
                        reclaimed = b;
                        break search;
                    }
                    claimed.add(b);
                }
            }
            assertTrue(reclaimed != null, "the freed root block was not handed out again in " + claimed.size()
                    + " allocations of its size on its node");
            byte[] pattern = new byte[(int) reclaimed.capacity()];
            java.util.Arrays.fill(pattern, (byte) 0x5a);
            cluster.allocators.get(1).write(reclaimed, 0, pattern);
            DsmAtomicLong fresh = cluster.node(1).atomicLong("busy");
            fresh.set(1_000);
            DsmLongArray freshArray = cluster.node(1).longArray("busy-array", 64, 16);
            for (int i = 0; i < 64; i++) {
                freshArray.set(i, 10_000 + i);
            }
            List<DsmAtomicLong> others = new ArrayList<>();
            for (int i = 0; i < 32; i++) {
                DsmAtomicLong o = cluster.node(1).atomicLong("other-" + i);
                o.set(i);
                others.add(o);
            }
            long before = afterGone.get();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (afterGone.get() < before + 1000 && problems.isEmpty() && System.nanoTime() < deadline) {
                Thread.sleep(10); // the old handles keep trying while the new structures live in the blocks
            }
            stop.set(true);
            users.shutdown();
            assertTrue(users.awaitTermination(10, TimeUnit.SECONDS));
            assertEquals(List.of(), new ArrayList<>(problems));
            assertTrue(afterGone.get() >= before + 1000, "the old handles tried again: " + afterGone.get());
            System.out.println("old counter's root block handed out again after " + claimed.size()
                    + " other allocations; operations refused after the destroy: " + afterGone.get());
            org.junit.jupiter.api.Assertions.assertArrayEquals(pattern, cluster.allocators.get(2).read(reclaimed, 0,
                    pattern.length), "the old counter's block, now another owner's, is untouched");
            cluster.allocators.get(1).free(reclaimed);
            for (BlockRef b : claimed) {
                cluster.allocators.get(1).free(b);
            }
            assertEquals(1_000, fresh.get());
            assertEquals(1_000, cluster.node(2).atomicLong("busy").get(), "node 2 opens the new counter");
            for (int i = 0; i < 64; i++) {
                assertEquals(10_000 + i, freshArray.get(i), "word " + i + " of the new array");
            }
            for (int i = 0; i < others.size(); i++) {
                assertEquals(i, others.get(i).get(), "other-" + i);
            }
        } finally {
            stop.set(true);
            users.shutdownNow();
            assertTrue(users.awaitTermination(10, TimeUnit.SECONDS));
        }
    }

    @Test
    void everyKindIsDestroyedByItsHandleAndAllItsBlocksAreFreed() throws Exception {
        start(2);
        DsmCollections a = cluster.node(1);
        DsmCollections b = cluster.node(2);
        a.atomicLong("warm").incrementAndGet(); // allocator caches warmed up, kept alive
        List<String> before = usage();

        DsmLongArray longs = a.longArray("longs", 1000, 100);
        longs.set(999, 7);
        DsmDoubleArray doubles = a.doubleArray("doubles", 300, 100);
        doubles.set(1, 2.5);
        DsmLock lock = a.lock("lock");
        lock.lock();
        lock.unlock();
        DsmQueue<byte[]> queue = a.queue("queue", Codecs.bytes(), 8);
        assertTrue(queue.offer(new byte[5000])); // a block of its own, still in the queue when destroyed
        assertTrue(queue.offer(new byte[10]));
        DsmMap<String, byte[]> map = a.map("map", Codecs.strings(), Codecs.bytes());
        for (int i = 0; i < 300; i++) {
            map.put("k" + i, new byte[i % 3 == 0 ? 200 : 8]);
        }
        assertEquals(7, b.longArray("longs", 1000, 100).get(999));

        // destroyed from node 2's handles; node 1's fail typed
        assertTrue(b.longArray("longs", 1000, 100).destroy());
        assertTrue(b.doubleArray("doubles", 300, 100).destroy());
        assertTrue(b.lock("lock").destroy());
        assertTrue(b.queue("queue", Codecs.bytes(), 8).destroy());
        b.map("map", Codecs.strings(), Codecs.bytes()).destroy();
        assertFalse(b.lock("lock2").destroy() && false);
        failsGone("longs", () -> longs.get(0));
        failsGone("doubles", () -> doubles.addAndGet(1, 1.0));
        failsGone("lock", lock::tryLock);
        failsGone("queue", queue::poll);
        failsGone("map", () -> map.get("k1"));
        failsGone("map", () -> map.put("k1", new byte[1]));
        assertTrue(b.lock("lock2").destroy());
        awaitReleases();
        assertEquals(before, usage(), "every stripe, entry, table, element block and root freed");
        assertEquals(1, a.atomicLong("warm").get());
    }

    @Test
    void aNameWhoseRootMemoryWasLostSaysSoAndDestroyGivesItBack() throws Exception {
        start(2);
        DsmAtomicLong hits = cluster.node(1).atomicLong("hits");
        hits.addAndGet(41);
        // the root's node loses its memory (a restart without file-backed segments): the root block is
        // no longer allocated and its bytes are zero
        BlockRef root = hits.root().block();
        GlobalAllocator owner = cluster.allocators.get(io.membus.core.RemotePtr.nodeId(root.ptr()));
        owner.memory().write(root.ptr(), new byte[(int) (8 + root.capacity())]);
        StructureGoneException gone = assertThrows(StructureGoneException.class,
                () -> cluster.node(2).atomicLong("hits"));
        assertEquals("hits", gone.name());
        assertTrue(gone.getMessage().contains("node=" + root.nodeId()) && gone.getMessage().contains("magic=0x0")
                && gone.getMessage().contains("destroy(\"hits\")"), gone.getMessage());
        assertThrows(StructureGoneException.class, () -> cluster.node(2).lock("hits"), "whatever the kind asked");

        assertTrue(cluster.node(2).destroy("hits"), "the gone root's name is given back");
        assertTrue(cluster.directory.lookup("hits").isEmpty());
        assertEquals(0, cluster.node(2).atomicLong("hits").get(), "a new counter");
        assertEquals(1, cluster.node(1).atomicLong("hits").incrementAndGet(), "node 1 dropped its dead handle");
    }

    @Test
    void aNameWhoseNodeRestartedWithoutFileBackedMemoryIsGoneAndCanBeRebound() throws Exception {
        start(3);
        // the case: a counter whose root is on a node that restarts with fresh memory
        String name = null;
        for (int i = 0; name == null; i++) {
            if (Placement.homeOf("hits-" + i, 1, 2, 3) == 3) {
                name = "hits-" + i;
            }
        }
        DsmAtomicLong hits = cluster.node(1).atomicLong(name);
        hits.addAndGet(41);
        assertEquals(3, hits.root().block().nodeId());
        cluster.down(3);
        cluster.addNode(3).destroyGrace(GRACE); // a new incarnation: its heap formatted afresh
        String n = name;
        StructureGoneException gone = assertThrows(StructureGoneException.class, () -> cluster.node(2).atomicLong(n));
        System.out.println(gone.getMessage());
        assertTrue(gone.getMessage().contains("node=3") && gone.getMessage().contains("destroy(\"" + name + "\")"),
                gone.getMessage());
        // the old handle fails typed too, from its next look at its root (a quarter grace here; a real
        // restart takes longer than that)
        failsGone(name, hits::get);
        assertTrue(cluster.node(3).destroy(name));
        assertEquals(0, cluster.node(2).atomicLong(name).get(), "a new counter under the name");
        assertEquals(1, cluster.node(1).atomicLong(name).incrementAndGet());
    }

    @Test
    void aNameBoundToALiveBlockThatIsNotARootIsStillATypeMismatchAndNotDestroyed() {
        start(2);
        long notARoot = cluster.allocators.get(1).allocate(64).ptr();
        cluster.directory.bind("raw", notARoot);
        assertThrows(CollectionTypeMismatchException.class, () -> cluster.node(2).atomicLong("raw"));
        assertThrows(CollectionTypeMismatchException.class, () -> cluster.node(2).destroy("raw"));
        assertEquals(notARoot, cluster.directory.lookup("raw").orElseThrow());
    }

    @Test
    void afterADestroyConcurrentCreatorsFromEveryNodeGetOneNewStructure() throws Exception {
        start(3);
        cluster.node(1).atomicLong("race").addAndGet(9);
        for (int round = 0; round < 5; round++) {
            assertTrue(cluster.node(1 + round % 3).destroy("race"));
            // the other nodes' cached handles notice within a check interval (a quarter grace here)
            Thread.sleep(GRACE.toMillis() / 4 + 50);
            ExecutorService exec = Executors.newFixedThreadPool(3);
            try {
                List<Future<DsmAtomicLong>> fs = new ArrayList<>();
                for (int n = 1; n <= 3; n++) {
                    DsmCollections c = cluster.node(n);
                    fs.add(exec.submit(() -> c.atomicLong("race")));
                }
                long ptr = fs.get(0).get(30, TimeUnit.SECONDS).root().block().ptr();
                for (Future<DsmAtomicLong> f : fs) {
                    DsmAtomicLong h = f.get(30, TimeUnit.SECONDS);
                    assertEquals(ptr, h.root().block().ptr(), "one structure per name");
                    h.incrementAndGet();
                }
                assertEquals(3, cluster.node(2).atomicLong("race").get());
            } finally {
                exec.shutdownNow();
                assertTrue(exec.awaitTermination(10, TimeUnit.SECONDS));
            }
        }
    }

    @Test
    void compareAndUnbindLeavesANameBoundElsewhere() {
        start(1);
        long p = cluster.allocators.get(1).allocate(64, Placement.local()).ptr();
        cluster.directory.bind("n", p);
        assertFalse(cluster.directory.unbind("n", p + 64));
        assertTrue(cluster.directory.lookup("n").isPresent());
        assertTrue(cluster.directory.unbind("n", p));
        assertTrue(cluster.directory.lookup("n").isEmpty());
    }

    /**
     * This node's replica of the names can lag an unbind another node made (the cluster's
     * registry is replicated): a name still bound there to a destroyed root is free when the
     * registry's authoritative copy says so, so opening it creates a new structure instead of
     * failing "gone" (it was a flake of the facade's destroy test under load).
     */
    @Test
    void aNameWhoseLocalReplicaLagsTheUnbindOfADestroyedRootIsFreeWhenTheRegistrySaysSo() {
        start(1);
        GlobalAllocator a = cluster.allocators.get(1);
        io.membus.core.directory.StaticDirectory names = cluster.directory;
        long[] lagging = {0}; // what this node's replica still answers
        io.membus.core.directory.NameRegistry replica = new io.membus.core.directory.NameRegistry() {
            @Override
            public java.util.Optional<Long> lookup(String name) {
                return lagging[0] != 0 ? java.util.Optional.of(lagging[0]) : names.lookup(name);
            }

            @Override
            public java.util.Optional<Long> lookupLatest(String name) {
                return names.lookup(name);
            }

            @Override
            public long bind(String name, long ptr) {
                return names.bind(name, ptr);
            }

            @Override
            public boolean unbind(String name) {
                return names.unbind(name);
            }

            @Override
            public boolean unbind(String name, long expectedPtr) {
                return names.unbind(name, expectedPtr);
            }

            @Override
            public java.util.Map<String, Long> bindings() {
                return names.bindings();
            }
        };
        NamedRoots roots = new NamedRoots(a.memory(), a, replica);
        NamedRoots.Initializer none = root -> { };
        Root first = roots.getOrCreate("cfg", CollectionKind.ATOMIC_LONG, "long", 8, none);
        lagging[0] = first.block().ptr();
        assertTrue(roots.destroy("cfg", root -> { })); // its blocks kept: a new root lands elsewhere
        assertTrue(names.lookup("cfg").isEmpty(), "the registry gave the name back");
        assertTrue(roots.open("cfg").isEmpty(), "free, though this node's replica still names the old root");
        Root second = roots.getOrCreate("cfg", CollectionKind.ATOMIC_LONG, "long", 8, none);
        assertNotEquals(first.block().ptr(), second.block().ptr(), "a new structure");
        lagging[0] = 0;
        assertEquals(second.block().ptr(), roots.open("cfg").orElseThrow().block().ptr());
    }
}
