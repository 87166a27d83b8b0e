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
}
