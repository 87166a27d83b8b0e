package io.membus.coherence;

import io.membus.core.Backoff;
import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link Backoff} (dsm-core), tested where its first users are: the deadline ends the
 * pauses, the interrupt modes keep, throw or take and restore the flag, and a policy that
 * cannot work is refused with the key named. (No assertion on how long a pause took.)
 */
class BackoffTest {
    @Test
    void pausesUntilTheDeadlineThenRefuses() {
        Backoff b = new Backoff(new Backoff.Policy(2, 2, 1_000, 4_000), System.nanoTime() - 1);
        assertTrue(b.expired());
        assertFalse(b.pause(), "a pause asked for after the deadline is refused at once");
        assertEquals(0, b.pauses());

        Backoff open = new Backoff(Backoff.SPIN_THEN_PARK, Backoff.NO_DEADLINE);
        for (int i = 0; i < 20; i++) { // spins, then parks doubling to the 1 ms cap
            assertTrue(open.pause());
        }
        assertEquals(20, open.pauses());
        assertFalse(open.expired());
        assertEquals(Long.MAX_VALUE, Backoff.remaining(Backoff.NO_DEADLINE));
        assertEquals(Backoff.NO_DEADLINE, Backoff.deadlineIn(Long.MAX_VALUE));
    }

    @Test
    void aLoopEndsByItsDeadline() {
        Backoff b = new Backoff(Backoff.Policy.every(100_000), Backoff.deadlineIn(5_000_000));
        int pauses = 0;
        while (b.pause()) {
            pauses++;
            assertTrue(pauses < 1_000_000, "the loop ends");
        }
        assertTrue(b.expired());
    }

    @Test
    void interruptsAreKeptThrownOrTakenAndRestored() {
        Thread.currentThread().interrupt();
        assertTrue(new Backoff(Backoff.POLL, Backoff.NO_DEADLINE).pause());
        assertTrue(Thread.currentThread().isInterrupted(), "pause() leaves the flag alone");

        assertThrows(InterruptedException.class,
                () -> new Backoff(Backoff.POLL, Backoff.NO_DEADLINE).pauseInterruptibly());
        assertFalse(Thread.currentThread().isInterrupted(), "InterruptedException clears the flag");

        Backoff b = new Backoff(Backoff.Policy.every(1_000), Backoff.NO_DEADLINE);
        Thread.currentThread().interrupt();
        assertTrue(b.pauseUninterruptibly());
        assertFalse(Thread.currentThread().isInterrupted(), "taken off so that parks park");
        assertTrue(b.tookInterrupt());
        b.restoreInterrupt();
        assertTrue(Thread.interrupted(), "and set again at the end (cleared here for the next test)");
    }

    @Test
    void aPolicyThatCannotWorkIsRefused() {
        assertThrows(DsmConfigException.class, () -> new Backoff.Policy(-1, 0, 1, 1));
        assertThrows(DsmConfigException.class, () -> new Backoff.Policy(0, 0, 0, 1));
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> new Backoff.Policy(0, 0, 10, 5));
        assertTrue(e.getMessage().contains("backoff"), e.getMessage());
    }
}
