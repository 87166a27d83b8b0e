package io.membus.core;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link Backoff#reset()}, what a polling loop (shm's message receiver) calls when it found
 * work: the schedule starts again, the deadline stays. (The rest of Backoff is tested in
 * dsm-coherence's BackoffTest, where its first users are.)
 */
class BackoffResetTest {
    @Test
    void resetStartsTheScheduleAgainAndKeepsTheDeadline() {
        Backoff idle = new Backoff(new Backoff.Policy(20, 20, 1_000, 1_000), Backoff.NO_DEADLINE);
        for (int i = 0; i < 45; i++) { // spins, yields, then parks
            assertTrue(idle.pause());
        }
        assertEquals(45, idle.pauses());
        idle.reset();
        assertEquals(0, idle.pauses(), "the next idle stretch spins first again");
        assertTrue(idle.pause());
        assertEquals(1, idle.pauses());

        Backoff passed = new Backoff(Backoff.POLL, System.nanoTime() - 1);
        passed.reset();
        assertFalse(passed.pause(), "a reset does not move the deadline");
    }
}
