package io.membus.collections;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Capacity as an {@link ArrayBlockingQueue} user expects it: removing elements from the
 * middle ({@code remove(o)}, {@code iterator.remove()}) leaves no hole that costs room,
 * {@code remainingCapacity()} tells the truth, and {@code add}/{@code offer} succeed
 * whenever it says there is room (one thread). Seeded: replay with {@code -Dmembus.seed=}.
 */
class DsmQueueCapacityTest {
    static final long SEED = Long.getLong("membus.seed", System.nanoTime());

    /** The reported case: capacity 4, one element, elements behind it added and removed. */
    @ParameterizedTest
    @ValueSource(strings = {"local", "tcp"})
    void elementsRemovedBehindTheHeadLeaveRoomForAdd(String transport) {
        try (CollCluster c = new CollCluster(transport, 2)) {
            DsmQueue<String> q = c.node(2).queue("q", String.class, 4);
            assertTrue(q.add("a"));
            assertTrue(q.add("b"));
            assertTrue(q.add("c"));
            assertTrue(q.add("d"));
            assertTrue(q.remove("d"));
            assertTrue(q.remove("b"));
            assertTrue(q.remove("c"));
            assertEquals(1, q.size());
            assertEquals(3, q.remainingCapacity());
            assertTrue(q.add("e"));
            assertTrue(q.add("f"));
            assertTrue(q.add("g"));
            assertEquals(0, q.remainingCapacity());
            assertEquals(List.of("a", "e", "f", "g"), new ArrayList<>(q));
            // many laps of "add behind, remove behind" while the head element stays
            for (int i = 0; i < 50; i++) {
                assertTrue(q.remove("f"));
                assertEquals(1, q.remainingCapacity());
                assertTrue(q.add("f"), "lap " + i);
            }
            assertEquals(List.of("a", "e", "g", "f"), new ArrayList<>(q));
            assertEquals("a", q.poll());
            assertEquals("e", q.poll());
            assertEquals("g", q.poll());
            assertEquals("f", q.poll());
            assertEquals(4, q.remainingCapacity());
        }
    }

    /** Random single-threaded sequences against ArrayBlockingQueue, with inline and large elements. */
    @Test
    void behavesAsArrayBlockingQueueWithOneThread() {
        System.out.println("DsmQueueCapacityTest seed=" + SEED + " (replay with -Dmembus.seed=" + SEED + ")");
        try (CollCluster c = new CollCluster("local", 2)) {
            for (int round = 0; round < 6; round++) {
                SplittableRandom r = new SplittableRandom(SEED + round);
                int capacity = 1 + r.nextInt(6);
                String where = "seed=" + SEED + " round=" + round + " capacity=" + capacity;
                DsmQueue<String> q = c.node(1 + round % 2).queue("m" + round, String.class, capacity);
                ArrayBlockingQueue<String> model = new ArrayBlockingQueue<>(capacity);
                List<String> log = new ArrayList<>();
                int next = 0;
                for (int step = 0; step < 600; step++) {
                    String e = (r.nextInt(8) == 0 ? "L".repeat(100) : "") + next;
                    int op = r.nextInt(11);
                    String what;
                    Object got;
                    Object want;
                    switch (op) {
                        case 0, 1 -> {
                            what = "offer(" + e + ")";
                            next++;
                            got = q.offer(e);
                            want = model.offer(e);
                        }
                        case 2 -> {
                            what = "add(" + e + ")";
                            next++;
                            got = outcome(() -> q.add(e));
                            want = outcome(() -> model.add(e));
                        }
                        case 3, 4 -> {
                            what = "poll";
                            got = q.poll();
                            want = model.poll();
                        }
                        case 5 -> {
                            what = "peek";
                            got = q.peek();
                            want = model.peek();
                        }
                        case 6, 7 -> {
                            List<String> now = new ArrayList<>(model);
                            String victim = now.isEmpty() || r.nextInt(5) == 0 ? "absent"
                                    : now.get(r.nextInt(now.size()));
                            what = "remove(" + victim + ")";
                            got = q.remove(victim);
                            want = model.remove(victim);
                        }
                        case 8 -> {
                            int k = r.nextInt(3);
                            what = "iterator.remove of every " + (k + 2) + "th";
                            got = removeEvery(q.iterator(), k + 2);
                            want = removeEvery(model.iterator(), k + 2);
                        }
                        case 9 -> {
                            int max = r.nextInt(3);
                            what = "drainTo(" + max + ")";
                            List<String> a = new ArrayList<>();
                            List<String> b = new ArrayList<>();
                            got = q.drainTo(a, max) + " " + a;
                            want = model.drainTo(b, max) + " " + b;
                        }
                        default -> {
                            what = "size";
                            got = q.size() + "/" + q.remainingCapacity();
                            want = model.size() + "/" + model.remainingCapacity();
                        }
                    }
                    log.add(what + " -> " + want);
                    String context = where + " step " + step + " " + what + "; last steps "
                            + log.subList(Math.max(0, log.size() - 12), log.size());
                    assertEquals(want, got, context);
                    assertEquals(model.remainingCapacity(), q.remainingCapacity(), context);
                    assertEquals(new ArrayList<>(model), new ArrayList<>(q), context);
                }
                q.clear();
            }
        }
    }

    /**
     * Removals from the middle racing producers and consumers on three nodes: every
     * element put is taken or removed exactly once, and each consumer takes each
     * producer's elements in the order they were put.
     */
    @ParameterizedTest
    @ValueSource(strings = {"local", "tcp"})
    void removalsRacingProducersAndConsumersLoseAndDuplicateNothing(String transport) throws Exception {
        System.out.println("DsmQueueCapacityTest seed=" + SEED + " (replay with -Dmembus.seed=" + SEED + ")");
        int perProducer = 300;
        try (CollCluster c = new CollCluster(transport, 3)) {
            List<DsmQueue<String>> qs = List.of(c.node(1).queue("race", String.class, 8),
                    c.node(2).queue("race", String.class, 8), c.node(3).queue("race", String.class, 8));
            java.util.concurrent.atomic.AtomicInteger producing = new java.util.concurrent.atomic.AtomicInteger(2);
            AtomicBoolean removing = new AtomicBoolean(true);
            java.util.Queue<Throwable> failures = new java.util.concurrent.ConcurrentLinkedQueue<>();
            List<List<String>> taken = List.of(new ArrayList<>(), new ArrayList<>());
            List<String> removed = new ArrayList<>();
            List<Thread> threads = new ArrayList<>();
            for (int p = 0; p < 2; p++) {
                DsmQueue<String> q = qs.get(p);
                String prefix = "p" + p + "-" + (p == 1 ? "L".repeat(80) : "");
                threads.add(new Thread(() -> {
                    try {
                        for (int k = 0; k < perProducer; k++) {
                            q.put(prefix + k);
                        }
                    } catch (Throwable t) {
                        failures.add(t);
                    } finally {
                        producing.decrementAndGet();
                    }
                }));
            }
            for (int i = 0; i < 2; i++) {
                DsmQueue<String> q = qs.get(1 + i);
                List<String> mine = taken.get(i);
                threads.add(new Thread(() -> {
                    try {
                        while (producing.get() > 0 || removing.get() || !q.isEmpty()) {
                            String e = q.poll(5, java.util.concurrent.TimeUnit.MILLISECONDS);
                            if (e != null) {
                                mine.add(e);
                            }
                        }
                    } catch (Throwable t) {
                        failures.add(t);
                    }
                }));
            }
            SplittableRandom r = new SplittableRandom(SEED);
            threads.add(new Thread(() -> {
                try {
                    DsmQueue<String> q = qs.get(2);
                    while (producing.get() > 0) {
                        List<String> seen = new ArrayList<>();
                        q.iterator().forEachRemaining(seen::add);
                        for (String e : seen) {
                            if (r.nextInt(2) == 0 && q.remove(e)) {
                                removed.add(e);
                            }
                        }
                    }
                } catch (Throwable t) {
                    failures.add(t);
                } finally {
                    removing.set(false);
                }
            }));
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join(120_000);
            }
            if (!failures.isEmpty()) {
                throw new AssertionError("seed=" + SEED + ": " + failures.peek(), failures.peek());
            }
            List<String> all = new ArrayList<>(taken.get(0));
            all.addAll(taken.get(1));
            java.util.Set<String> takenSet = new java.util.HashSet<>(all);
            assertEquals(all.size(), takenSet.size(), "seed=" + SEED + ": an element was taken twice");
            System.out.println("DsmQueueCapacityTest " + transport + ": taken " + all.size() + ", removed "
                    + removed.size());
            for (String e : removed) {
                assertTrue(!takenSet.contains(e), "seed=" + SEED + ": " + e + " was removed and taken");
            }
            assertEquals(2 * perProducer, all.size() + removed.size(), "seed=" + SEED + ": taken " + all.size()
                    + ", removed " + removed.size());
            for (int p = 0; p < 2; p++) {
                String prefix = "p" + p + "-" + (p == 1 ? "L".repeat(80) : "");
                for (int k = 0; k < perProducer; k++) {
                    String e = prefix + k;
                    assertTrue(takenSet.contains(e) || removed.contains(e),
                            "seed=" + SEED + ": " + e + " was neither taken nor removed");
                }
                for (List<String> mine : taken) {
                    int last = -1;
                    for (String e : mine) {
                        if (e.startsWith(prefix)) {
                            int k = Integer.parseInt(e.substring(prefix.length()));
                            assertTrue(k > last, "seed=" + SEED + ": " + e + " taken after " + prefix + last);
                            last = k;
                        }
                    }
                }
            }
            assertTrue(qs.get(0).isEmpty());
            assertEquals(8, qs.get(0).remainingCapacity());
        }
    }

    private static List<String> removeEvery(Iterator<String> it, int k) {
        List<String> removed = new ArrayList<>();
        int i = 0;
        while (it.hasNext()) {
            String e = it.next();
            if (++i % k == 0) {
                it.remove();
                removed.add(e);
            }
        }
        return removed;
    }

    private static Object outcome(java.util.function.BooleanSupplier call) {
        try {
            return call.getAsBoolean();
        } catch (IllegalStateException e) {
            return "IllegalStateException";
        }
    }
}
