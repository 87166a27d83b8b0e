package io.membus.core.time;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The wheel fires every entry once, never before its time, and moves, cancels and re-arms entries. */
class TimerWheelTest {

    /** Records when it fired. */
    private static class Entry extends TimerWheel.Timeout {
        final AtomicInteger fired = new AtomicInteger();
        final AtomicLong firedAt = new AtomicLong();
        final CountDownLatch done = new CountDownLatch(1);
        volatile long at;

        @Override
        protected void expired() {
            firedAt.set(System.nanoTime());
            fired.incrementAndGet();
            done.countDown();
        }
    }

    @Test
    void entriesFireOnceAndNeverBeforeTheirTimeAcrossRoundsOfTheWheel() throws Exception {
        TimerWheel wheel = new TimerWheel("test-wheel-rounds");
        List<Entry> entries = new ArrayList<>();
        long now = System.nanoTime();
        // 0 ms to 1.2 s: beyond one round of 512 ticks, and entries sharing buckets across rounds
        long[] delaysMs = {0, 1, 3, 7, 50, 300, 511, 512, 513, 700, 1024, 1200};
        for (long d : delaysMs) {
            Entry e = new Entry();
            e.at = now + TimeUnit.MILLISECONDS.toNanos(d);
            wheel.arm(e, e.at);
            entries.add(e);
        }
        // the far ones are armed at their times (the near ones may have fired already: 0-7 ms is no time under load)
        for (int i = 0; i < delaysMs.length; i++) {
            if (delaysMs[i] >= 300) {
                assertEquals(entries.get(i).at, wheel.armedAt(entries.get(i)), "armed at its time: " + delaysMs[i] + " ms");
            }
        }
        assertTrue(wheel.armedCount() <= delaysMs.length);
        for (Entry e : entries) {
            assertTrue(e.done.await(10, TimeUnit.SECONDS), "an entry never fired");
            assertTrue(e.firedAt.get() - e.at >= 0, "fired before its time");
        }
        Thread.sleep(20);
        for (Entry e : entries) {
            assertEquals(1, e.fired.get(), "fired once");
        }
        assertEquals(0, wheel.armedCount());
    }

    @Test
    void armingAnArmedEntryMovesItAndCancelledEntriesNeverFire() throws Exception {
        TimerWheel wheel = new TimerWheel("test-wheel-moves");
        long now = System.nanoTime();
        Entry moved = new Entry();
        wheel.arm(moved, now + TimeUnit.SECONDS.toNanos(60));
        moved.at = now + TimeUnit.MILLISECONDS.toNanos(5);
        wheel.arm(moved, moved.at); // earlier: the sleeping thread must wake for it
        assertEquals(1, wheel.armedCount(), "one entry, moved, not two");
        Entry cancelled = new Entry();
        wheel.arm(cancelled, now + TimeUnit.MILLISECONDS.toNanos(5));
        wheel.cancel(cancelled);
        wheel.cancel(cancelled); // idempotent
        assertEquals(Long.MIN_VALUE, wheel.armedAt(cancelled));
        assertTrue(moved.done.await(10, TimeUnit.SECONDS), "the moved entry never fired");
        assertTrue(moved.firedAt.get() - moved.at >= 0);
        // re-armed from its own expiry, as a pipeline does
        Entry again = new Entry() {
            final AtomicInteger rounds = new AtomicInteger();

            @Override
            protected void expired() {
                if (rounds.incrementAndGet() < 3) {
                    wheel.arm(this, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(2));
                } else {
                    super.expired();
                }
            }
        };
        wheel.arm(again, System.nanoTime());
        assertTrue(again.done.await(10, TimeUnit.SECONDS), "the re-armed entry stopped");
        Thread.sleep(20);
        assertEquals(0, cancelled.fired.get(), "a cancelled entry fired");
        assertEquals(0, wheel.armedCount());
    }

    /**
     * The earliest entry's tick begins while the wheel thread computes how long to sleep: it must
     * look again, not park without a deadline (the thread once parked for good there and an entry
     * never fired). A clock that moves 0.7 ms at every read makes that interleaving certain.
     */
    @Test
    void anEntryWhoseTickBeginsWhileTheThreadPlansItsSleepStillFires() throws Exception {
        long step = 700_000;
        AtomicLong reads = new AtomicLong();
        TimerWheel wheel = new TimerWheel("test-wheel-late-plan", () -> reads.getAndIncrement() * step);
        // wait for the first pass (nothing armed) to park: the entry's arm wakes it for the next pass
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!(reads.get() >= 2 && wheel.thread().getState() == Thread.State.WAITING)) {
            assertTrue(System.nanoTime() < until, "the wheel thread never parked");
            Thread.sleep(1);
        }
        // next pass reads 1.4 ms (tick 1 has begun, tick 2 not), then 2.1 ms when planning its sleep
        Entry e = new Entry();
        wheel.arm(e, 2 * TimerWheel.TICK_NANOS);
        assertTrue(e.done.await(10, TimeUnit.SECONDS), "the entry never fired: the thread parked without a deadline");
    }
}
