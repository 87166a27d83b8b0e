package io.membus.collections;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@link LeasedCache} on its own: copies are stand-ins whose version a test sets. */
class LeasedCacheTest {
    /** A stand-in for a stripe's cached copy: served at {@code version} until set to -1. */
    private static final class Copy {
        volatile long version;

        Copy(long version) {
            this.version = version;
        }
    }

    private static LeasedCache<Copy> cache(int max, Class<?> keyType) {
        return new LeasedCache<>((c, now) -> c == null ? -1 : c.version, () -> 0, 64, max, keyType);
    }

    private static byte[] bytes(long v) {
        return ByteBuffer.allocate(8).putLong(v).array();
    }

    private static long valueOf(Object hit) {
        return ByteBuffer.wrap((byte[]) hit).getLong();
    }

    @Test
    void integralKeysAreFoundByValueNotByIdentityAndReplaceTheirValue() {
        LeasedCache<Copy> c = cache(100, Long.class);
        Copy copy = new Copy(7);
        c.keep(Long.valueOf(1_000_000L), 3, 7, copy, bytes(1), null);
        assertEquals(1, valueOf(c.hit(Long.valueOf(1_000_000L), false)), "another Long object, equal value");
        copy.version = 8;
        assertNull(c.hit(1_000_000L, false), "kept at version 7, the stripe's copy is at 8 now");
        c.keep(1_000_000L, 3, 8, copy, bytes(2), null);
        assertEquals(1, c.size(), "a kept key's value is replaced");
        assertEquals(2, valueOf(c.hit(1_000_000L, false)));
        assertNull(c.hit(1_000_001L, false));
    }

    @Test
    void aHitNeedsTheLastCopyOfItsStripeServedAtItsVersion() {
        LeasedCache<Copy> c = cache(100, Long.class);
        Copy a = new Copy(5);
        Copy b = new Copy(9);
        c.keep(1L, 0, 5, a, bytes(1), null);
        c.keep(2L, 1, 9, b, bytes(2), null);
        assertEquals(1, valueOf(c.hit(1L, false)));
        a.version = -1; // dropped (an invalidation) or its lease ran out
        assertNull(c.hit(1L, false), "the stripe's copy is no longer served");
        assertEquals(2, valueOf(c.hit(2L, false)), "another stripe's keys are unaffected");
        c.keep(3L, 0, 5, new Copy(5), bytes(3), null); // a new copy of stripe 0 at the same version
        assertEquals(1, valueOf(c.hit(1L, false)), "same stripe version: key 1's value is still current");
        c.keep(4L, 0, 6, new Copy(6), bytes(4), null); // stripe 0 changed since
        assertNull(c.hit(1L, false), "read under version 5, the stripe is at 6");
        assertEquals(4, valueOf(c.hit(4L, false)));
    }

    @Test
    void aHitIsJudgedByTheClockReadingItTakes() {
        java.util.concurrent.atomic.AtomicLong now = new java.util.concurrent.atomic.AtomicLong(1_000);
        // a copy served until 2_000 (its lease), at version 3
        LeasedCache<Copy> c = new LeasedCache<>((copy, at) -> copy != null && at < 2_000 ? copy.version : -1,
                now::get, 64, 10, Long.class);
        c.keep(1L, 0, 3, new Copy(3), bytes(1), null);
        assertEquals(1, valueOf(c.hit(1L, false)));
        now.set(1_999);
        assertEquals(1, valueOf(c.hit(1L, false)));
        now.set(2_000);
        assertNull(c.hit(1L, false), "the lease has run out by the clock");
    }

    @Test
    void absentKeysAndDecodedValuesAreKept() {
        LeasedCache<Copy> c = cache(10, String.class);
        Copy copy = new Copy(1);
        c.keep("gone", 0, 1, copy, null, null);
        assertSame(LeasedCache.ABSENT, c.hit("gone", false));
        assertSame(LeasedCache.ABSENT, c.hit("gone", true));
        Object decoded = new Object();
        c.keep("k", 0, 1, copy, bytes(9), decoded);
        assertSame(decoded, c.hit("k", true));
        assertEquals(9, valueOf(c.hit("k", false)));
        c.keep("raw", 0, 1, copy, bytes(8), null);
        assertNull(c.hit("raw", true), "no decoded form kept: a miss, not a null value");
    }

    @Test
    void aKeyOfAnotherClassNeverMatchesAnIntegralKeyOfTheSameValue() {
        LeasedCache<Copy> c = cache(100, Long.class);
        Copy copy = new Copy(1);
        c.keep(5L, 0, 1, copy, bytes(5), null);
        assertNull(c.hit(5, false), "Integer 5 is not the Long 5, as in any Map");
        assertNull(c.hit((short) 5, false));
        assertNull(c.hit(ByteBuffer.wrap(bytes(5)), false));
        c.keep(ByteBuffer.wrap(bytes(5)), 0, 1, copy, bytes(50), null);
        assertEquals(2, c.size(), "the wrapped bytes are a key of their own beside the Long");
        assertEquals(5, valueOf(c.hit(5L, false)));
        assertEquals(50, valueOf(c.hit(ByteBuffer.wrap(bytes(5)), false)));
    }

    @Test
    void everyIntegralKeyTypeAndObjectKeysKeepTheirOwnValues() {
        Object[][] keys = {
                {Integer.class, 3, -3}, {Short.class, (short) 3, (short) -3}, {Byte.class, (byte) 3, (byte) -3},
                {Character.class, 'a', 'b'}, {Boolean.class, true, false}, {String.class, "a", "b"}, {null, "x", "y"}};
        for (Object[] k : keys) {
            LeasedCache<Copy> c = cache(10, (Class<?>) k[0]);
            Copy copy = new Copy(1);
            c.keep(k[1], 0, 1, copy, bytes(1), null);
            c.keep(k[2], 0, 1, copy, bytes(2), null);
            assertEquals(1, valueOf(c.hit(k[1], false)), "type " + k[0]);
            assertEquals(2, valueOf(c.hit(k[2], false)), "type " + k[0]);
            assertEquals(2, c.size(), "type " + k[0]);
        }
    }

    @Test
    void keysWhoseHashesCollideAreToldApartByEquals() {
        // "Aa" and "BB" have the same String hash: the same home slot, compared by equals
        LeasedCache<Copy> c = cache(10, String.class);
        Copy copy = new Copy(1);
        c.keep("Aa", 0, 1, copy, bytes(1), null);
        c.keep("BB", 0, 1, copy, bytes(2), null);
        c.keep("Aa", 0, 1, copy, bytes(3), null);
        assertEquals(3, valueOf(c.hit("Aa", false)));
        assertEquals(2, valueOf(c.hit("BB", false)));
        assertEquals(2, c.size());
    }

    @Test
    void theBoundIsKeptThroughEvictionsAndRebuildsAndWhatStaysIsRight() {
        long seed = System.nanoTime();
        System.out.println("LeasedCacheTest.theBoundIsKeptThroughEvictionsAndRebuildsAndWhatStaysIsRight seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int max : new int[] {1, 7, 64, 1_000}) {
            LeasedCache<Copy> c = cache(max, rnd.nextBoolean() ? Long.class : null);
            Copy copy = new Copy(1);
            Map<Long, Long> last = new HashMap<>();
            for (int i = 0; i < 20_000; i++) {
                long k = rnd.nextInt(3 * max + 10);
                long v = rnd.nextLong();
                c.keep(k, 0, 1, copy, bytes(v), null);
                last.put(k, v);
                assertEquals(v, valueOf(c.hit(k, false)), "seed=" + seed + ": the key just kept is found");
                assertTrue(c.size() <= max, "seed=" + seed + ": size " + c.size() + " > " + max);
            }
            int kept = 0;
            for (long k = 0; k < 3 * max + 10; k++) {
                Object hit = c.hit(k, false);
                if (hit != null) {
                    kept++;
                    assertEquals(last.get(k), valueOf(hit), "seed=" + seed + ": key " + k);
                }
            }
            assertEquals(c.size(), kept, "seed=" + seed + ", max=" + max + ": every key counted is found");
        }
    }

    /**
     * Two keys with one home slot in a cache of one key: every keep evicts the other and
     * rewrites that same slot, while a reader hits both. A reader that used a slot without
     * its sequence check would pair one key with the other's value.
     */
    @Test
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void aSlotRewrittenForAnotherKeyIsNeverReadHalfOldHalfNew() throws Exception {
        LeasedCache<Copy> c = cache(1, Long.class);
        long a = 1;
        long b = 2;
        while (LeasedCache.home(b, 15) != LeasedCache.home(a, 15)) { // 16 slots: the table of a cache of one key
            b++;
        }
        long keyA = a;
        long keyB = b;
        Copy copy = new Copy(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread writer = new Thread(() -> {
            byte[] va = bytes(keyA);
            byte[] vb = bytes(keyB);
            while (!stop.get()) {
                c.keep(keyA, 0, 1, copy, va, keyA);
                c.keep(keyB, 0, 1, copy, vb, keyB);
            }
        });
        writer.start();
        long hits = 0;
        try {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (System.nanoTime() < end) {
                for (int i = 0; i < 10_000; i++) {
                    long k = (i & 1) == 0 ? keyA : keyB;
                    Object decoded = c.hit(k, true);
                    Object raw = c.hit(k, false);
                    if (decoded != null) {
                        hits++;
                        assertEquals(k, decoded, "key " + k + " got the decoded value of another key");
                    }
                    if (raw != null) {
                        assertEquals(k, valueOf(raw), "key " + k + " got the bytes of another key");
                    }
                }
            }
        } finally {
            stop.set(true);
            writer.join();
        }
        assertTrue(hits > 0, "the reader hit the rewritten slot");
    }

    @Test
    void aCacheKeepsAtLeastOneKey() {
        assertThrows(IllegalArgumentException.class, () -> cache(0, Long.class));
    }

    @Test
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void concurrentKeepsAndHitsNeverPairAKeyWithAnotherKeysValue() throws Exception {
        long seed = System.nanoTime();
        System.out.println("LeasedCacheTest.concurrentKeepsAndHitsNeverPairAKeyWithAnotherKeysValue seed=" + seed);
        LeasedCache<Copy> c = cache(256, Long.class);
        Copy copy = new Copy(1);
        int threads = 4;
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> all = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            SplittableRandom rnd = new SplittableRandom(seed + t);
            Thread th = new Thread(() -> {
                try {
                    start.await();
                    for (int i = 0; i < 200_000 && failure.get() == null; i++) {
                        long k = rnd.nextInt(2_000);
                        if (rnd.nextInt(10) < 3) {
                            c.keep(k, (int) (k & 63), 1, copy, bytes(k * 31 + 7), k); // the value names its key
                        } else {
                            Object hit = c.hit(k, rnd.nextBoolean());
                            if (hit instanceof byte[] && valueOf(hit) != k * 31 + 7) {
                                throw new AssertionError("key " + k + " found the bytes of key " + (valueOf(hit) - 7) / 31);
                            }
                            if (hit instanceof Long && (Long) hit != k) {
                                throw new AssertionError("key " + k + " found the decoded value of key " + hit);
                            }
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            th.start();
            all.add(th);
        }
        start.countDown();
        for (Thread th : all) {
            th.join(TimeUnit.SECONDS.toMillis(50));
        }
        if (failure.get() != null) {
            throw new AssertionError("seed=" + seed, failure.get());
        }
        int kept = 0;
        for (long k = 0; k < 2_000; k++) {
            if (c.hit(k, false) != null) {
                kept++;
            }
        }
        assertEquals(c.size(), kept, "seed=" + seed + ": the count matches the keys found once changes stop");
        assertTrue(kept <= 256, "seed=" + seed + ": " + kept + " keys");
    }
}
