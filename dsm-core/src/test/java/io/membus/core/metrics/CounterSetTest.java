package io.membus.core.metrics;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The shared counter set: names and handles in declaration order, snapshots, named changes, bad input. */
class CounterSetTest {

    /** A set called "test" of counts {@code names}, in that order. */
    private static CounterSet set(String... names) {
        CounterSet.Builder b = CounterSet.builder("test");
        for (String name : names) {
            b.add(name);
        }
        return b.build();
    }

    @Test
    void namesAndHandlesKeepTheirDeclarationOrder() {
        CounterSet.Builder b = CounterSet.builder("test");
        LongAdder claims = b.add("claims");
        LongAdder lost = b.add("lost");
        LongAdder polled = b.add("polled");
        CounterSet set = b.build();

        assertEquals("test", set.name());
        assertEquals(3, set.size());
        assertEquals(List.of("claims", "lost", "polled"), set.names());
        assertEquals("lost", set.name(1));
        assertEquals(2, set.indexOf("polled"));
        assertSame(claims, set.counter(0));
        assertSame(lost, set.counter("lost"));
        assertSame(polled, set.counter(2));
        assertThrows(UnsupportedOperationException.class, () -> set.names().add("more"));
    }

    @Test
    void sinceIsTheChangeOfEachCountByNameAndIndex() {
        CounterSet set = set("changes", "acks", "records");
        LongAdder changes = set.counter("changes");
        LongAdder acks = set.counter("acks");
        LongAdder records = set.counter("records");
        changes.add(7); // before the mark: not in the changes since it
        records.increment();

        long[] mark = set.snapshot();
        assertArrayEquals(new long[] {7, 0, 1}, mark);
        changes.add(10);
        acks.add(12);
        CounterSet.Deltas d = set.since(mark);

        assertEquals(10, d.get("changes"));
        assertEquals(12, d.get(1));
        assertEquals(0, d.get("records"));
        assertEquals(3, d.size());
        assertEquals("acks", d.name(1));
        assertEquals(set.names(), d.names());
        assertArrayEquals(new long[] {10, 12, 0}, d.toArray());
        assertEquals("changes=10, acks=12, records=0", d.toString());
        assertEquals(String.format("changes=10, acks=12 (%.2f/change), records=0 (%.2f/change)", 1.2, 0.0),
                d.toString("changes", "change"));
        assertEquals("test{changes=17, acks=12, records=1}", set.toString());

        d.toArray()[0] = 99;
        changes.add(5);
        assertEquals(10, d.get(0), "a value: neither its array nor later increments change it");
        assertEquals(0, set.since(set.snapshot()).get(0), "a fresh mark starts from zero");
    }

    @Test
    void perUnitDividesByAtLeastOne() {
        CounterSet set = set("offered", "claims");
        LongAdder claims = set.counter("claims");
        long[] mark = set.snapshot();
        claims.add(3);
        assertEquals(String.format("offered=0, claims=3 (%.2f/offer)", 3.0), set.since(mark).toString("offered", "offer"));
    }

    @Test
    void concurrentIncrementsAreSummedExactlyOnceTheThreadsJoined() throws InterruptedException {
        CounterSet set = set("ones", "batches");
        LongAdder ones = set.counter(0);
        LongAdder batches = set.counter(1);
        long[] mark = set.snapshot();
        int threads = 4;
        int perThread = 50_000;
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> started = new ArrayList<>();
        try {
            for (int t = 0; t < threads; t++) {
                Thread thread = new Thread(() -> {
                    try {
                        start.await();
                        for (int i = 0; i < perThread; i++) {
                            ones.increment();
                            if (i % 10 == 0) {
                                batches.add(3);
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }, "counterset-test-" + t);
                thread.start();
                started.add(thread);
            }
            start.countDown();
        } finally {
            start.countDown();
            for (Thread thread : started) {
                thread.join(60_000);
                assertFalse(thread.isAlive(), thread.getName() + " still counting after 60 s");
            }
        }
        assertNull(failure.get());
        CounterSet.Deltas d = set.since(mark);
        assertEquals((long) threads * perThread, d.get("ones"), "no increment lost");
        assertEquals((long) threads * (perThread / 10) * 3, d.get("batches"));
    }

    @Test
    void badDeclarationsAreRefusedWithWhatIsAllowed() {
        assertThrows(DsmConfigException.class, () -> CounterSet.builder(null));
        assertThrows(DsmConfigException.class, () -> CounterSet.builder(""));
        CounterSet.Builder b = CounterSet.builder("test");
        assertThrows(DsmConfigException.class, b::build, "no counts");
        b.add("a");
        DsmConfigException twice = assertThrows(DsmConfigException.class, () -> b.add("a"));
        assertTrue(twice.getMessage().contains("not used yet"), twice.getMessage());
        assertThrows(DsmConfigException.class, () -> b.add(null));
        assertThrows(DsmConfigException.class, () -> b.add(""));
        b.build();
        assertThrows(DsmConfigException.class, () -> b.add("b"), "after build()");
        assertThrows(DsmConfigException.class, b::build, "built twice");
    }

    @Test
    void badReadsAreRefusedWithWhatIsAllowed() {
        CounterSet set = set("a", "b");
        DsmConfigException wrongSize = assertThrows(DsmConfigException.class, () -> set.since(new long[3]));
        assertTrue(wrongSize.getMessage().contains("long[2]"), wrongSize.getMessage());
        assertThrows(DsmConfigException.class, () -> set.since(null));
        assertThrows(DsmConfigException.class, () -> set.counter("c"));
        assertThrows(DsmConfigException.class, () -> set.indexOf(null));
        assertThrows(DsmConfigException.class, () -> set.counter(2));
        assertThrows(DsmConfigException.class, () -> set.name(-1));
        CounterSet.Deltas d = set.since(set.snapshot());
        assertThrows(DsmConfigException.class, () -> d.get("c"));
        assertThrows(DsmConfigException.class, () -> d.get(2));
        assertThrows(DsmConfigException.class, () -> d.toString("c", "c"));
    }
}
