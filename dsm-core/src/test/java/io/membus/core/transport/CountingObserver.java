package io.membus.core.transport;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A {@link VerbObserver} for tests: counts outcomes, payload bytes and completions by
 * kind, and checks that every report names the one peer a test expects and a latency
 * that is not negative.
 *
 * <p><b>Note:</b> thread-safe (the counters are atomic; {@link #byKind} is written under
 * this object's lock).
 */
public final class CountingObserver implements VerbObserver {
    public final AtomicInteger completed = new AtomicInteger();
    public final AtomicInteger timedOut = new AtomicInteger();
    public final AtomicInteger failed = new AtomicInteger();
    public final AtomicLong bytes = new AtomicLong();
    /** Completions by kind ({@link VerbObserver#READ} ... {@link VerbObserver#FAA}); read under this object's lock. */
    public final int[] byKind = new int[4];
    private final int peer;

    /** @param peer the node every report must name */
    public CountingObserver(int peer) {
        this.peer = peer;
    }

    @Override
    public synchronized void completed(int peer, int kind, int b, long latencyNanos) {
        assertEquals(this.peer, peer);
        assertTrue(latencyNanos >= 0, "latency=" + latencyNanos);
        completed.incrementAndGet();
        bytes.addAndGet(b);
        byKind[kind]++;
    }

    @Override
    public void timedOut(int peer, int kind) {
        timedOut.incrementAndGet();
    }

    @Override
    public void failed(int peer, int kind) {
        failed.incrementAndGet();
    }
}
