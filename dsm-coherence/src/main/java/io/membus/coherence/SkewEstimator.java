package io.membus.coherence;

/**
 * The clock-skew verdict on one peer, from round trips on the clock channel, NTP style.
 *
 * <p>A sample is this node's clock {@code t0} before the request, the peer's clock
 * {@code p} when it answered, and this node's clock {@code t1} after the answer. The
 * peer read its clock somewhere inside the round trip, so its offset against this node
 * is {@code p − (t0 + t1)/2} give or take half the round trip {@code (t1 − t0)/2},
 * however the delay splits between the two directions. Of the samples of a window the
 * one with the shortest round trip counts (the least uncertain). Its offset gives two
 * bounds on the true skew: at most {@code |offset| + rtt/2}, and at least
 * {@code |offset| − rtt/2}.
 *
 * <p>The alarm is raised only on the lower bound: when it exceeds the clock bound ε in
 * {@code persistence} consecutive windows — a skew beyond ε that the measurement
 * proves, not one that a slow round trip merely leaves possible (two nodes reading one
 * clock can never give a lower bound above zero, however loaded the machine: this is what
 * the old rule, which alarmed on the upper bound of one window of five samples, got wrong
 * under load). The alarm is cleared the same way: {@code persistence} consecutive windows
 * whose lower bound is within ε. A skew larger than ε by less than half the shortest round
 * trip of a window can go unseen; that round trip is tens of microseconds on an idle LAN
 * and the status reports the upper bound beside the lower one.
 *
 * <p>A window ends early once more samples cannot change its verdict (the upper bound is
 * within ε, or the lower bound beyond it).
 *
 * <p><b>Note:</b> not thread-safe: one thread (the heap's skew check, which is never run
 * by two threads at once) feeds it; the results it returns are immutable.
 */
final class SkewEstimator {
    /** What one window measured: the offset and round trip of its shortest sample, and the verdict after it. */
    record Window(long offsetMicros, long rttMicros, int samples, boolean alarmed) {
        /** The skew is at least this (microseconds, never negative). */
        long atLeastMicros() {
            return Math.max(0, Math.abs(offsetMicros) - halfRtt());
        }

        /** The skew is at most this (microseconds). */
        long atMostMicros() {
            return Math.abs(offsetMicros) + halfRtt();
        }

        private long halfRtt() {
            return (rttMicros + 1) / 2; // rounded up: the bounds stay sound for odd round trips
        }
    }

    private final long boundMicros;
    private final int persistence;
    private long bestRtt = Long.MAX_VALUE;
    private long bestOffset;
    private int samples;
    private int over;
    private int within;
    private boolean alarmed;

    /**
     * @param boundMicros ε, the clock bound
     * @param persistence how many consecutive windows must agree to raise or clear the alarm (at least 1)
     */
    SkewEstimator(long boundMicros, int persistence) {
        if (boundMicros < 0 || persistence < 1) {
            throw new IllegalArgumentException("skew estimator: bound=" + boundMicros + "us, persistence="
                    + persistence + ": the bound must be >= 0 and the persistence >= 1");
        }
        this.boundMicros = boundMicros;
        this.persistence = persistence;
    }

    /** Adds a sample of the current window; a negative round trip (this node's clock stepped back) is ignored. */
    void sample(long t0Micros, long peerMicros, long t1Micros) {
        long rtt = t1Micros - t0Micros;
        if (rtt < 0) {
            return;
        }
        samples++;
        if (rtt < bestRtt) {
            bestRtt = rtt;
            bestOffset = peerMicros - (t0Micros + rtt / 2);
        }
    }

    /** Whether the current window has a sample, and more samples could not change its verdict. */
    boolean decided() {
        if (samples == 0) {
            return false;
        }
        Window w = new Window(bestOffset, bestRtt, samples, alarmed);
        return w.atMostMicros() <= boundMicros || w.atLeastMicros() > boundMicros;
    }

    /**
     * Ends the current window and judges it: returns what it measured and whether the
     * alarm is raised after it, or null when the window had no sample (the peer did not
     * answer: the verdict stays as it was).
     */
    Window endWindow() {
        if (samples == 0) {
            return null;
        }
        Window w = new Window(bestOffset, bestRtt, samples, alarmed);
        bestRtt = Long.MAX_VALUE;
        samples = 0;
        if (w.atLeastMicros() > boundMicros) {
            over++;
            within = 0;
        } else {
            within++;
            over = 0;
        }
        if (!alarmed && over >= persistence) {
            alarmed = true;
        } else if (alarmed && within >= persistence) {
            alarmed = false;
        }
        return new Window(w.offsetMicros(), w.rttMicros(), w.samples(), alarmed);
    }

    /** Whether the alarm is raised: the skew to this peer was proven beyond ε in the last windows. */
    boolean alarmed() {
        return alarmed;
    }

    /** Whether a verdict is pending: the last window disagreed with the alarm's state, and more must agree. */
    boolean pending() {
        return alarmed ? within > 0 : over > 0;
    }
}
