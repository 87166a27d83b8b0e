package io.membus.core.time;

/**
 * A clock that reads another and adds an offset a test (or the nemesis) can set
 * at any time, to skew one node's clock against the others'.
 *
 * <p><b>Note:</b> thread-safe: the offset is a volatile field, so a new skew is
 * seen by the next {@link #nowMicros()} of any thread.
 */
public final class SkewableClock implements Clock {
    private final Clock base;
    private volatile long offsetMicros;

    public SkewableClock(Clock base) {
        this.base = base;
    }

    public SkewableClock() {
        this(Clock.system());
    }

    @Override
    public long nowMicros() {
        return base.nowMicros() + offsetMicros;
    }

    @Override
    public long nowMicrosAtLeast() {
        return base.nowMicrosAtLeast() + offsetMicros;
    }

    /** Sets the skew: positive runs this clock ahead of its base. */
    public void skewMicros(long offsetMicros) {
        this.offsetMicros = offsetMicros;
    }

    public long skewMicros() {
        return offsetMicros;
    }
}
