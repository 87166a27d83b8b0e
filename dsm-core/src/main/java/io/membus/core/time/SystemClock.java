package io.membus.core.time;

import java.time.Instant;

/** {@link Clock#system()}: {@link Instant#now()} in microseconds. Stateless. */
enum SystemClock implements Clock {
    INSTANCE;

    @Override
    public long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /**
     * {@link System#currentTimeMillis()} rounded up to the end of its millisecond: the
     * same wall clock, read without {@code Instant.now()}'s native call and allocation
     * (an intrinsic), and never earlier than the microsecond time.
     */
    @Override
    public long nowMicrosAtLeast() {
        return System.currentTimeMillis() * 1_000L + 999L;
    }
}
