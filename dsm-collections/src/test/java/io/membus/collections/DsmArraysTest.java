package io.membus.collections;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DsmArraysTest {
    static final long SEED = Long.getLong("membus.seed", System.nanoTime());

    /** Random element and bulk operations from three nodes, checked against an AtomicLongArray. */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void longArrayMatchesAtomicLongArray(String transport) {
        System.out.println("DsmArraysTest seed=" + SEED + " (replay with -Dmembus.seed=" + SEED + ")");
        Random rnd = new Random(SEED);
        try (CollCluster c = new CollCluster(transport, 3)) {
            int length = 1000;
            DsmLongArray[] on = {c.node(1).longArray("a", length, 64), c.node(2).longArray("a", length, 64),
                    c.node(3).longArray("a", length, 64)};
            AtomicLongArray model = new AtomicLongArray(length);
            assertEquals(16, on[0].stripeNodes().length);
            assertEquals(3, Arrays.stream(on[0].stripeNodes()).distinct().count(), "stripes spread over every node");
            for (int step = 0; step < 3000; step++) {
                DsmLongArray a = on[rnd.nextInt(3)];
                int i = rnd.nextInt(length);
                long v = rnd.nextInt(100) - 50;
                String at = "seed=" + SEED + ", step=" + step + ", i=" + i;
                switch (rnd.nextInt(12)) {
                    case 0 -> assertEquals(model.get(i), a.get(i), at);
                    case 1 -> { a.set(i, v); model.set(i, v); }
                    case 2 -> assertEquals(model.getAndSet(i, v), a.getAndSet(i, v), at);
                    case 3 -> {
                        long e = rnd.nextBoolean() ? model.get(i) : v;
                        assertEquals(model.compareAndSet(i, e, v + 1), a.compareAndSet(i, e, v + 1), at);
                    }
                    case 4 -> assertEquals(model.incrementAndGet(i), a.incrementAndGet(i), at);
                    case 5 -> assertEquals(model.getAndAdd(i, v), a.getAndAdd(i, v), at);
                    case 6 -> assertEquals(model.updateAndGet(i, x -> x * 2 + 1), a.updateAndGet(i, x -> x * 2 + 1), at);
                    case 7 -> assertEquals(model.accumulateAndGet(i, v, Math::min), a.accumulateAndGet(i, v, Math::min), at);
                    case 8 -> {
                        int from = rnd.nextInt(length);
                        int to = from + rnd.nextInt(length - from + 1);
                        long[] expected = new long[to - from];
                        for (int k = from; k < to; k++) {
                            expected[k - from] = model.get(k);
                        }
                        assertArrayEquals(expected, a.get(from, to), at + ", range=" + from + ".." + to);
                    }
                    case 9 -> {
                        int from = rnd.nextInt(length);
                        long[] values = new long[rnd.nextInt(Math.min(200, length - from) + 1)];
                        for (int k = 0; k < values.length; k++) {
                            values[k] = rnd.nextLong();
                            model.set(from + k, values[k]);
                        }
                        a.put(from, values);
                    }
                    case 10 -> {
                        int from = rnd.nextInt(length);
                        long[] deltas = new long[rnd.nextInt(Math.min(200, length - from) + 1)];
                        for (int k = 0; k < deltas.length; k++) {
                            deltas[k] = rnd.nextInt(3) == 0 ? 0 : rnd.nextInt(1000);
                            model.addAndGet(from + k, deltas[k]);
                        }
                        a.addAll(from, deltas);
                    }
                    default -> assertEquals(model.getAndDecrement(i), a.getAndDecrement(i), at);
                }
            }
            assertEquals(model.toString(), on[1].toString());
        }
    }

    @Test
    void doubleArrayAddsAndComparesBits() {
        try (CollCluster c = new CollCluster("local", 3)) {
            DsmDoubleArray a = c.node(1).doubleArray("d", 100, 16);
            DsmDoubleArray b = c.node(2).doubleArray("d", 100, 16);
            assertEquals(0.0, b.get(99));
            assertEquals(1.5, a.addAndGet(3, 1.5));
            assertEquals(1.5, b.getAndAdd(3, 2.0));
            assertEquals(3.5, a.get(3));
            assertTrue(b.compareAndSet(3, 3.5, -0.0));
            assertFalse(a.compareAndSet(3, 0.0, 1.0), "0.0 and -0.0 are different bits");
            assertTrue(a.compareAndSet(3, -0.0, Double.NaN));
            assertTrue(b.compareAndSet(3, Double.NaN, 7.0));
            assertEquals(7.0, a.getAndSet(3, 8.0));
            assertEquals(16.0, b.updateAndGet(3, x -> x * 2));
            assertEquals(17.0, a.accumulateAndGet(3, 1.0, Double::sum));
            double[] d = new double[100];
            Arrays.fill(d, 0.25);
            a.addAll(d);
            b.addAll(0, d);
            assertEquals(17.5, a.get(3));
            assertEquals(0.5, a.get(99));
            b.put(10, new double[] {1, 2, 3});
            assertArrayEquals(new double[] {0.5, 1, 2, 3, 0.5}, a.get(9, 14));
        }
    }

    /** Concurrent bulk adds from every node: every addition lands exactly once (longs by FAA, doubles by CAS retry). */
    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void concurrentAddAllIsExact(String transport) throws Exception {
        try (CollCluster c = new CollCluster(transport, 3)) {
            int length = 300;
            int threads = 6;
            int rounds = 40;
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            try {
                List<Callable<Void>> tasks = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    DsmLongArray la = c.node(1 + t % 3).longArray("la", length, 32);
                    DsmDoubleArray da = c.node(1 + t % 3).doubleArray("da", length, 32);
                    tasks.add(() -> {
                        long[] ones = new long[length];
                        double[] halves = new double[length];
                        Arrays.fill(ones, 1);
                        Arrays.fill(halves, 0.5);
                        for (int r = 0; r < rounds; r++) {
                            la.addAll(ones);
                            da.addAll(halves);
                            la.incrementAndGet(r);
                            da.addAndGet(r, 1.0);
                        }
                        return null;
                    });
                }
                for (Future<Void> f : pool.invokeAll(tasks, 120, TimeUnit.SECONDS)) {
                    assertFalse(f.isCancelled(), "a task did not finish in time");
                    f.get();
                }
            } finally {
                pool.shutdownNow();
            }
            long[] longs = c.node(2).longArray("la", length).toArray();
            double[] doubles = c.node(3).doubleArray("da", length).toArray();
            for (int i = 0; i < length; i++) {
                long extra = i < rounds ? threads : 0;
                assertEquals((long) threads * rounds + extra, longs[i], "long element " + i);
                assertEquals(threads * rounds * 0.5 + extra, doubles[i], "double element " + i);
            }
        }
    }

    @Test
    void badArgumentsAreTypedAndTouchNothing() {
        try (CollCluster c = new CollCluster("local", 2)) {
            DsmLongArray a = c.node(1).longArray("a", 10);
            a.set(9, 5);
            CollectionArgumentException e = assertThrows(CollectionArgumentException.class, () -> a.set(10, 1));
            assertTrue(e.getMessage().contains("index=10"), e.getMessage());
            assertThrows(CollectionArgumentException.class, () -> a.get(-1));
            assertThrows(CollectionArgumentException.class, () -> a.get(5, 11));
            assertThrows(CollectionArgumentException.class, () -> a.put(8, new long[] {1, 2, 3}));
            assertThrows(CollectionArgumentException.class, () -> a.addAll(new long[11]));
            assertEquals(5, a.get(9));
            assertEquals(0, a.get(8));
            assertThrows(CollectionArgumentException.class, () -> c.node(1).longArray("z", 0));
            CollectionTypeMismatchException m = assertThrows(CollectionTypeMismatchException.class,
                    () -> c.node(2).longArray("a", 11));
            assertEquals("LONG_ARRAY longArray(length=10)", m.existing());
            assertThrows(CollectionTypeMismatchException.class, () -> c.node(2).doubleArray("a", 10));
            assertThrows(CollectionTypeMismatchException.class, () -> c.node(1).doubleArray("a", 10),
                    "the cached handle is checked too");
            Set<Integer> nodes = new HashSet<>();
            for (int n : c.node(1).longArray("big", 4096, 256).stripeNodes()) {
                nodes.add(n);
            }
            assertEquals(Set.of(1, 2), nodes);
        }
    }

    /** Issue 26.5: a length near Integer.MAX_VALUE overflowed the stripe count into NegativeArraySizeException. */
    @Test
    void aLengthTooLargeForItsStripeTableIsRefusedBeforeAnythingIsAllocated() {
        try (CollCluster c = new CollCluster("local", 1)) {
            for (int length : new int[] {Integer.MAX_VALUE, Integer.MAX_VALUE - 1, StripedWords.MAX_STRIPES * 512 + 1}) {
                CollectionArgumentException e = assertThrows(CollectionArgumentException.class,
                        () -> c.node(1).longArray("huge", length), "length " + length);
                assertEquals("length", e.argument());
                assertTrue(e.getMessage().contains("length=" + length) && e.getMessage().contains("stripeLength=512"),
                        e.getMessage());
                assertThrows(CollectionArgumentException.class, () -> c.node(1).doubleArray("huge", length));
            }
            assertThrows(CollectionArgumentException.class, () -> c.node(1).longArray("neg", -5));
            assertThrows(CollectionArgumentException.class, () -> c.node(1).longArray("s", 10, 0));
            assertThrows(CollectionArgumentException.class, () -> c.node(1).longArray("s", 10, Integer.MAX_VALUE));
            assertEquals(0, c.node(1).longArray("after", 8).get(7), "nothing was left half made: names still work");
        }
    }
}
