package io.membus.core.time;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link Clock#nowMicrosAtLeast()} is an upper bound of the exact reading: a reading
 * taken after an exact one is not earlier, and one taken before an exact one is at most
 * its millisecond's remainder ahead. (A backward step of the system clock in the middle
 * of this test would fail it; none is expected while it runs.)
 */
class ClockTest {

    @Test
    void systemUpperBoundIsNeverEarlierAndAtMostAMillisecondAhead() {
        Clock c = Clock.system();
        for (int i = 0; i < 200_000; i++) {
            long exact = c.nowMicros();
            long upper = c.nowMicrosAtLeast();
            assertTrue(upper >= exact, "upper " + upper + " < exact " + exact + " read before it");
            long upperFirst = c.nowMicrosAtLeast();
            long exactAfter = c.nowMicros();
            assertTrue(upperFirst <= exactAfter + 1_000, "upper " + upperFirst + " more than 1 ms ahead of " + exactAfter);
            assertEquals(999, Math.floorMod(upper, 1_000), "rounded up to the end of its millisecond");
        }
    }

    @Test
    void skewableClockShiftsBothReadings() {
        SkewableClock c = new SkewableClock();
        c.skewMicros(-3_000_000);
        long exact = Clock.system().nowMicros();
        long upper = c.nowMicrosAtLeast();
        assertTrue(upper < exact - 2_000_000, "the skew applies to the upper bound too: " + upper + " vs " + exact);
        Clock plain = () -> 42L;
        assertEquals(42L, plain.nowMicrosAtLeast(), "a clock without a cheaper reading gives its exact one");
    }
}
