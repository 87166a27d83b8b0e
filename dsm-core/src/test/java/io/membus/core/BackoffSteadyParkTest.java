package io.membus.core;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A policy with steady parks (rdma's completion poller's idle strategy): spins, then
 * {@code steadyParks} parks of the first length, then doubling to the cap; without steady
 * parks the parks double from the first, as they always did. Read through
 * {@link Backoff#nextParkNanos()}, not the clock.
 */
class BackoffSteadyParkTest {
    /** The park length before each of {@code pauses} pauses (the spins' entries are the first park's, unchanged). */
    private static List<Long> schedule(Backoff.Policy policy, int pauses) {
        Backoff b = new Backoff(policy, Backoff.NO_DEADLINE);
        List<Long> parks = new ArrayList<>();
        for (int i = 0; i < pauses; i++) {
            parks.add(b.nextParkNanos());
            b.pause();
        }
        return parks;
    }

    @Test
    void steadyParksStayAtTheFirstLengthThenDoubleToTheCap() {
        assertEquals(List.of(1_000L, 1_000L, 1_000L, 1_000L, 1_000L, 2_000L, 4_000L, 8_000L, 8_000L),
                schedule(new Backoff.Policy(2, 0, 1_000, 8_000, 3), 9),
                "2 spins, 3 parks of 1 us, then 2, 4, 8, 8 us");
    }

    @Test
    void withoutSteadyParksTheParksDoubleFromTheFirstAsBefore() {
        assertEquals(List.of(1_000L, 1_000L, 2_000L, 4_000L, 4_000L),
                schedule(new Backoff.Policy(1, 0, 1_000, 4_000), 5));
        assertEquals(schedule(new Backoff.Policy(1, 0, 1_000, 4_000), 5),
                schedule(new Backoff.Policy(1, 0, 1_000, 4_000, 1), 5), "0 and 1 steady parks are the same");
    }

    @Test
    void resetStartsTheSteadyParksAgain() {
        Backoff b = new Backoff(new Backoff.Policy(0, 0, 1_000, 4_000, 2), Backoff.NO_DEADLINE);
        for (int i = 0; i < 4; i++) {
            b.pause();
        }
        assertEquals(4_000, b.nextParkNanos());
        b.reset();
        assertEquals(1_000, b.nextParkNanos());
        b.pause();
        assertEquals(1_000, b.nextParkNanos(), "the second steady park");
    }

    @Test
    void aNegativeSteadyParkCountIsRefused() {
        DsmConfigException e = assertThrows(DsmConfigException.class,
                () -> new Backoff.Policy(0, 0, 1_000, 2_000, -1));
        assertTrue(e.getMessage().contains("-1 steady parks"), e.getMessage());
    }
}
