package io.membus.samples.stress;

import io.membus.alloc.Placement;
import io.membus.codec.Codecs;
import io.membus.collections.DsmCollections;
import io.membus.collections.DsmLock;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmQueue;

import java.util.SplittableRandom;
import java.util.function.IntFunction;

/**
 * The workloads on the collections: each key is one object of a collection, named
 * from the key ({@link #spreadName}: key {@code k}'s root is on node {@code k % nodes + 1}),
 * found by every node through the name registry.
 *
 * <ul>
 *   <li>{@code register}, {@code counter}: a {@link io.membus.collections.DsmAtomicLong} per
 *       key ({@link WordWorkloads}, {@link #atomicLongs});</li>
 *   <li>{@code map}: one key of one {@link DsmMap}: {@code get}, {@code put},
 *       {@code putIfAbsent}, {@code remove} with values 0..4;</li>
 *   <li>{@code queue}: a {@link DsmQueue} of capacity {@value #QUEUE_CAPACITY}: {@code offer}
 *       of a value unique to the client, {@code poll};</li>
 *   <li>{@code lock}: a {@link DsmLock}: {@code tryAcquire} (its fencing token, or
 *       nothing) and {@code release} of a held lock.</li>
 * </ul>
 * In event lines, an absent value (a map miss, an empty poll, a lock not taken) is -1.
 *
 * <p><b>Note:</b> each instance is confined to one client thread; the collections'
 * handles are shared by the node's clients (one handle per name per node).
 */
final class CollectionWorkloads {
    static final int QUEUE_CAPACITY = 64;
    static final long ABSENT = -1;

    private CollectionWorkloads() {
    }

    /** Salts tried per key before {@link #spreadName} gives up (each hits with chance 1/nodes). */
    private static final int MAX_SALTS = 10_000;

    /**
     * The name of key {@code key}'s object: {@code prefix + key}, with the smallest salt
     * ({@code @1}, {@code @2}, ...) that makes {@link Placement#byKey(String)} place its
     * root on node {@code key % nodes + 1} of memory nodes {@code 1..nodes}. So the keys
     * spread over every node, as the raw-verb and coherent workloads' do, and every
     * {@code kill} or {@code pause} hits some key's data (names hashed as they are put
     * three keys on one node about one run in nine). The same name in every process.
     */
    static String spreadName(String prefix, int key, int nodes) {
        int[] all = java.util.stream.IntStream.rangeClosed(1, nodes).toArray();
        int home = key % nodes + 1;
        String base = prefix + key;
        if (Placement.homeOf(base, all) == home) {
            return base;
        }
        for (int salt = 1; salt <= MAX_SALTS; salt++) {
            String name = base + "@" + salt;
            if (Placement.homeOf(name, all) == home) {
                return name;
            }
        }
        throw new IllegalStateException("no name for key " + key + " lands on node " + home + " of " + nodes);
    }

    /** Key {@code k}'s {@link io.membus.collections.DsmAtomicLong} as a word, its root on node {@code k % nodes + 1}. */
    static IntFunction<WordWorkloads.Word> atomicLongs(DsmCollections c, String prefix, int nodes) {
        return k -> WordWorkloads.atomic(c.atomicLong(spreadName(prefix, k, nodes)));
    }

    /** One key of a DsmMap per history key. */
    static final class MapKeys implements Workload {
        private final DsmMap<String, Long> map;

        MapKeys(DsmMap<String, Long> map) {
            this.map = map;
        }

        @Override
        public String model() {
            return "map";
        }

        @Override
        public Call next(SplittableRandom r) {
            return switch (r.nextInt(5)) {
                case 0, 1 -> new Call("get", 0, 0);
                case 2 -> new Call("put", r.nextInt(WordWorkloads.REGISTER_VALUES), 0);
                case 3 -> new Call("putIfAbsent", r.nextInt(WordWorkloads.REGISTER_VALUES), 0);
                default -> new Call("remove", 0, 0);
            };
        }

        private static long orAbsent(Long v) {
            return v == null ? ABSENT : v;
        }

        @Override
        public Outcome run(int key, Call call) {
            String k = "k" + key;
            return switch (call.f()) {
                case "get" -> Outcome.ok(orAbsent(map.get(k)), 0);
                case "put" -> Outcome.ok(call.a(), orAbsent(map.put(k, call.a())));
                case "putIfAbsent" -> Outcome.ok(call.a(), orAbsent(map.putIfAbsent(k, call.a())));
                case "remove" -> Outcome.ok(0, orAbsent(map.remove(k)));
                default -> throw new IllegalArgumentException("map has no operation " + call.f());
            };
        }

        @Override
        public boolean readOnly(Call call) {
            return call.f().equals("get");
        }
    }

    /** A bounded DsmQueue per key; every offered value is unique. */
    static final class Queues implements Workload {
        private final IntFunction<DsmQueue<Long>> queue;
        private final long base;
        private long next;

        Queues(DsmCollections c, int nodes, long base) {
            this.queue = k -> c.queue(spreadName("stress-queue-", k, nodes), Codecs.longs(), QUEUE_CAPACITY);
            this.base = base;
        }

        @Override
        public String model() {
            return "queue";
        }

        @Override
        public Call next(SplittableRandom r) {
            return r.nextBoolean() ? new Call("offer", base + next++, 0) : new Call("poll", 0, 0);
        }

        @Override
        public Outcome run(int key, Call call) {
            DsmQueue<Long> q = queue.apply(key);
            return switch (call.f()) {
                case "offer" -> Outcome.ok(call.a(), q.offer(call.a()) ? 1 : 0);
                case "poll" -> {
                    Long v = q.poll();
                    yield Outcome.ok(v == null ? ABSENT : v, 0);
                }
                default -> throw new IllegalArgumentException("queue has no operation " + call.f());
            };
        }

        @Override
        public boolean preciseFailure(Call call) {
            return true; // DsmQueue: a failure before the claim is rethrown as is, later ones are OutcomeUnknown
        }

        @Override
        public boolean readOnly(Call call) {
            return false; // a failed poll may have taken an element
        }
    }

    /**
     * A DsmLock per key: try to take it; when taken, the next operation of this client
     * releases it (a client holds at most one lock at a time).
     */
    static final class Locks implements Workload {
        private final IntFunction<DsmLock> lock;
        private int heldKey = -1;
        private long heldToken;

        Locks(DsmCollections c, int nodes) {
            this.lock = k -> c.lock(spreadName("stress-lock-", k, nodes));
        }

        @Override
        public String model() {
            return "lock";
        }

        @Override
        public Call next(SplittableRandom r) {
            return heldKey >= 0 ? new Call("release", heldToken, heldKey) : new Call("tryAcquire", 0, 0);
        }

        @Override
        public int key(int drawn) {
            return heldKey >= 0 ? heldKey : drawn;
        }

        @Override
        public Outcome run(int key, Call call) {
            DsmLock l = lock.apply(key);
            switch (call.f()) {
                case "tryAcquire" -> {
                    if (l.tryLock()) {
                        heldKey = key;
                        heldToken = l.token();
                        return Outcome.ok(heldToken, 0);
                    }
                    return Outcome.ok(ABSENT, 0);
                }
                case "release" -> {
                    heldKey = -1; // whatever happens, this client no longer holds it
                    l.unlock();
                    return Outcome.ok(call.a(), 0);
                }
                default -> throw new IllegalArgumentException("lock has no operation " + call.f());
            }
        }

        @Override
        public boolean readOnly(Call call) {
            return false;
        }
    }
}
