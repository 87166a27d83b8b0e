package io.membus.coherence;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The skew verdict from synthetic round trips: a shared clock under any delays, a real skew, a transient one. */
class SkewEstimatorTest {
    private static final long BOUND = 5_000; // ε = 5 ms, the default

    /**
     * One window of round trips to a peer whose clock is ours plus {@code skew}: each request
     * takes {@code out} to arrive and the answer {@code back} to return (jittered and skewed
     * as a loaded machine makes them).
     */
    private static SkewEstimator.Window window(SkewEstimator e, SplittableRandom rnd, long skew, long maxDelay) {
        long t = 1_700_000_000_000_000L + rnd.nextLong(1_000_000_000L);
        for (int i = 0; i < CoherentHeap.SKEW_SAMPLES && !e.decided(); i++) {
            long out = delay(rnd, maxDelay);
            long back = delay(rnd, maxDelay);
            long t0 = t;
            long peer = t0 + out + skew;
            long t1 = t0 + out + back;
            e.sample(t0, peer, t1);
            t = t1 + rnd.nextLong(1, 1000);
        }
        return e.endWindow();
    }

    /** A delay of a loaded machine: sometimes a few hundred microseconds, mostly milliseconds, up to {@code max}. */
    private static long delay(SplittableRandom rnd, long max) {
        double u = rnd.nextDouble();
        long d = u < 0.2 ? rnd.nextLong(20, 2_000) : u < 0.8 ? rnd.nextLong(2_000, 12_000) : rnd.nextLong(12_000, max);
        return Math.min(d, max);
    }

    @Test
    void aSharedClockNeverAlarmsHoweverLongAndLopsidedTheRoundTrips() {
        long seed = System.nanoTime();
        System.out.println("SkewEstimatorTest seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        SkewEstimator e = new SkewEstimator(BOUND, CoherentHeap.SKEW_PERSISTENCE);
        int oldRuleAlarms = 0;
        for (int w = 0; w < 2_000; w++) {
            SkewEstimator.Window win = window(e, rnd, 0, 40_000);
            assertFalse(win.alarmed(), "seed=" + seed + ": a shared clock alarmed at window " + w + ": " + win);
            assertEquals(0, win.atLeastMicros(), "seed=" + seed + ": nothing is proven about a shared clock: " + win);
            assertTrue(win.atMostMicros() >= 0);
            if (win.atMostMicros() > BOUND) {
                oldRuleAlarms++; // what the old rule (the upper bound of one window) alarmed on
            }
        }
        assertFalse(e.alarmed());
        assertTrue(oldRuleAlarms > 0, "seed=" + seed + ": the delays are ones that fooled the upper-bound rule");
        System.out.println("windows the old upper-bound rule would have alarmed on: " + oldRuleAlarms + " of 2000");
    }

    @Test
    void aRealSkewOf200msIsMeasuredToWithinTheRoundTripAndAlarmsAfterThePersistenceThenClears() {
        long seed = System.nanoTime();
        System.out.println("SkewEstimatorTest seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        SkewEstimator e = new SkewEstimator(BOUND, CoherentHeap.SKEW_PERSISTENCE);
        for (int w = 1; w <= CoherentHeap.SKEW_PERSISTENCE; w++) {
            SkewEstimator.Window win = window(e, rnd, 200_000, 20_000);
            assertTrue(Math.abs(win.offsetMicros() - 200_000) <= (win.rttMicros() + 1) / 2,
                    "seed=" + seed + ": the offset is within half the round trip of the skew: " + win);
            assertTrue(win.atLeastMicros() > BOUND, "seed=" + seed + ": " + win);
            assertEquals(w == CoherentHeap.SKEW_PERSISTENCE, win.alarmed(), "seed=" + seed + ": alarm only after "
                    + CoherentHeap.SKEW_PERSISTENCE + " windows; window " + w + ": " + win);
            assertEquals(w < CoherentHeap.SKEW_PERSISTENCE, e.pending());
        }
        for (int w = 1; w <= CoherentHeap.SKEW_PERSISTENCE; w++) {
            SkewEstimator.Window win = window(e, rnd, 0, 20_000);
            assertEquals(w < CoherentHeap.SKEW_PERSISTENCE, win.alarmed(), "seed=" + seed + ": cleared after "
                    + CoherentHeap.SKEW_PERSISTENCE + " windows within the bound; window " + w + ": " + win);
        }
    }

    @Test
    void aSkewBackwardsAlarmsToo() {
        SkewEstimator e = new SkewEstimator(BOUND, 2);
        for (int w = 0; w < 2; w++) {
            e.sample(1_000_000, 1_000_100 - 50_000, 1_000_200);
            assertEquals(-50_000, e.endWindow().offsetMicros());
        }
        assertTrue(e.alarmed());
    }

    @Test
    void anExcessThatDoesNotPersistRaisesNoAlarm() {
        SkewEstimator e = new SkewEstimator(BOUND, 3);
        long[] skews = {9_000, 9_000, 0, 9_000, 9_000, 0, 9_000, 9_000};
        for (long skew : skews) {
            e.sample(0, 100 + skew, 200);
            assertFalse(e.endWindow().alarmed(), "no " + 3 + " consecutive windows beyond the bound");
        }
        e.sample(0, 100 + 9_000, 200);
        assertTrue(e.endWindow().alarmed(), "the third in a row");
    }

    @Test
    void theShortestRoundTripCountsAndAWindowEndsOnceItsVerdictIsCertain() {
        SkewEstimator e = new SkewEstimator(BOUND, 1);
        assertFalse(e.decided(), "no sample yet");
        e.sample(0, 9_000, 12_000);      // offset 3 ms ± 6 ms: could be 9 ms, undecided
        assertFalse(e.decided());
        e.sample(20_000, 20_100, 20_200); // offset 0 ± 0.1 ms: within the bound whatever more samples say
        assertTrue(e.decided());
        SkewEstimator.Window w = e.endWindow();
        assertEquals(200, w.rttMicros());
        assertEquals(0, w.offsetMicros());
        assertEquals(2, w.samples());
        assertNull(e.endWindow(), "a window with no sample (the peer did not answer) judges nothing");
        e.sample(10, 0, 5); // this node's clock stepped back: ignored
        assertNull(e.endWindow());
        assertThrows(IllegalArgumentException.class, () -> new SkewEstimator(BOUND, 0));
    }
}
