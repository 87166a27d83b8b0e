package io.membus.core.metrics;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

/** The per-operation event record is off unless asked for, and names its bits. */
class OpEventsTest {
    @Test
    void offByDefaultMarksNothing() {
        assertFalse(OpEvents.ON, "the test JVM does not set -Dmembus.op-events=true");
        OpEvents.begin();
        OpEvents.mark(OpEvents.ALLOC_WAIT);
        OpEvents.laneVerb();
        assertEquals(0, OpEvents.end(), "off: no record is kept");
    }

    @Test
    void describesEachBitLowestFirst() {
        assertEquals("none", OpEvents.describe(0));
        assertEquals("refill-wait+lane-fallback", OpEvents.describe(OpEvents.LANE_FALLBACK | OpEvents.ALLOC_WAIT));
        assertEquals("refill+scan+lane-open+cas-retry+table-again+gc", OpEvents.describe(OpEvents.ALLOC_REFILL
                | OpEvents.ALLOC_SCAN | OpEvents.LANE_OPEN | OpEvents.CAS_RETRY | OpEvents.TABLE_AGAIN | OpEvents.GC));
        assertEquals("none", OpEvents.describe(1 << 16), "lane verbs above the bits are not events");
    }
}
