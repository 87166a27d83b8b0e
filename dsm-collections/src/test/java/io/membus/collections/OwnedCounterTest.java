package io.membus.collections;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;

class OwnedCounterTest {

    @Test
    void countsOfOneThreadAreExact() {
        OwnedCounter c = new OwnedCounter();
        assertEquals(0, c.sum());
        for (int i = 0; i < 1_000; i++) {
            c.increment();
        }
        assertEquals(1_000, c.sum());
    }

    /** More threads than cells: many share a cell's index, and their counts go to the shared adder. */
    @Test
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void countsOfManyThreadsAreExactOnceTheyEnd() throws InterruptedException {
        OwnedCounter c = new OwnedCounter();
        int threads = 150;
        int each = 20_000;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> all = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int i = 0; i < each; i++) {
                    c.increment();
                }
            });
            th.start();
            all.add(th);
        }
        start.countDown();
        for (Thread th : all) {
            th.join();
        }
        assertEquals((long) threads * each, c.sum());
        // a cell whose owner ended keeps its count, and its index still falls back for others
        Thread late = new Thread(() -> {
            for (int i = 0; i < 10; i++) {
                c.increment();
            }
        });
        late.start();
        late.join();
        assertEquals((long) threads * each + 10, c.sum());
    }
}
