package io.membus.core.replication;

import org.junit.jupiter.api.Test;

import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code membus.replication.rereplication-rate}: the pacer lets at most
 * {@code 1 + t * rate / chunk} chunks through in any {@code t} seconds, and no fewer than
 * the rate allows when the copier asks whenever it is told to; all on a fake clock (no
 * wall-clock time is measured).
 */
class CopyPacerTest {
    private static final long SECOND = 1_000_000_000L;

    @Test
    void noRateIsNoCap() {
        AtomicLong now = new AtomicLong();
        CopyPacer p = new CopyPacer(0, 256 << 10, now::get);
        for (int i = 0; i < 10_000; i++) {
            assertEquals(0, p.reserve(), "chunk " + i);
        }
    }

    @Test
    void aCopyTakesAtLeastItsSizeOverTheRate() {
        // 64 chunks of 64 KiB (a 4 MiB segment) at 1 MiB/s: at least (64 - 1) / 16 s after the first chunk
        long chunk = 64 << 10;
        long rate = 1 << 20;
        AtomicLong now = new AtomicLong(123 * SECOND);
        long start = now.get();
        CopyPacer p = new CopyPacer(rate, chunk, now::get);
        int sent = 0;
        while (sent < 64) {
            long wait = p.reserve();
            if (wait == 0) {
                sent++;
            } else {
                now.addAndGet(wait); // what the copier does: comes back when told
            }
        }
        long took = now.get() - start;
        assertTrue(took >= (64 - 1) * chunk * SECOND / rate, "took " + took + " ns");
        // and it is not slower than the rate: the copier came back exactly when told
        assertTrue(took <= 64 * chunk * SECOND / rate + 64, "took " + took + " ns");
    }

    @Test
    void chunksPerIntervalNeverExceedTheRate() {
        long seed = Long.getLong("membus.seed", System.nanoTime());
        System.out.println("CopyPacerTest seed=" + seed + " (replay: -Dmembus.seed=" + seed + ")");
        Random random = new Random(seed);
        long chunk = 4096L << random.nextInt(7);
        long rate = chunk * (1 + random.nextInt(40)) / (1 + random.nextInt(4));
        AtomicLong now = new AtomicLong(random.nextLong());
        CopyPacer p = new CopyPacer(rate, chunk, now::get);
        long tick = SECOND / 10;
        int ticks = 200;
        int[] perTick = new int[ticks];
        long begin = now.get();
        int total = 0;
        // a copier that asks at random moments (often too early, sometimes late), far more often than the rate allows
        while (now.get() - begin < ticks * tick) {
            if (p.reserve() == 0) {
                perTick[(int) ((now.get() - begin) / tick)]++;
                total++;
            }
            now.addAndGet(1 + random.nextInt((int) (tick / 20)));
        }
        // any window of w ticks: at most 1 + w * tick * rate / chunk chunks
        for (int w = 1; w <= ticks; w *= 2) {
            for (int from = 0; from + w <= ticks; from++) {
                int n = 0;
                for (int i = from; i < from + w; i++) {
                    n += perTick[i];
                }
                double cap = 1 + (double) w * tick * rate / SECOND / chunk;
                assertTrue(n <= cap, "seed " + seed + ": " + n + " chunks in ticks " + from + ".." + (from + w)
                        + ", cap " + cap + " (rate " + rate + " B/s, chunk " + chunk + " B)");
            }
        }
        // asked that often, the copier gets close to the rate: the pace is the rate, not something slower
        double allowed = (double) ticks * tick * rate / SECOND / chunk;
        assertTrue(total >= allowed * 0.9 - 1, "seed " + seed + ": " + total + " chunks, the rate allows " + allowed);
    }
}
