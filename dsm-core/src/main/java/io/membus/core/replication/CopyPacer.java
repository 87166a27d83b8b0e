package io.membus.core.replication;

import java.util.function.LongSupplier;

/**
 * Caps how fast re-replication copies one group's memory to a new copy
 * ({@code membus.replication.rereplication-rate}, bytes per second), so a rebuild cannot
 * starve the traffic of the node: a token bucket that fills at the rate and holds at most
 * one chunk. Before each chunk the copier {@link #reserve() reserves} a chunk's bytes; when
 * the bucket is short it gets the nanoseconds to wait and reschedules itself on the shared
 * timer ({@link ReplicationService#later}): no thread ever blocks on the pace.
 *
 * <p>Over any span of {@code t} seconds at most {@code 1 + t * rate / chunkBytes} chunks
 * are let through (the one chunk the full bucket holds, then one per
 * {@code chunkBytes / rate} seconds). Each chunk is charged a whole chunk, the last (shorter)
 * one too: the cap is never exceeded. A rate of 0 is no cap.
 *
 * <p><b>Note:</b> not thread-safe: one pacer per copy in progress, used only by the
 * replication service's thread (the tasks of one service run one at a time, each after the
 * last, so they see each other's writes).
 */
final class CopyPacer {
    private final long rate;
    private final long chunkBytes;
    private final LongSupplier nanoClock;
    /** Bytes that may go now, at most one chunk. */
    private double tokens;
    private long filledAt;

    /**
     * @param rate       bytes per second, 0: no cap
     * @param chunkBytes the bytes one chunk is charged
     * @param nanoClock  the clock ({@code System::nanoTime}, a fake one in tests)
     */
    CopyPacer(long rate, long chunkBytes, LongSupplier nanoClock) {
        if (rate < 0 || chunkBytes < 1) {
            throw new IllegalStateException("pacer rate=" + rate + ", chunk=" + chunkBytes
                    + " (checked by ReplicationConfig already)");
        }
        this.rate = rate;
        this.chunkBytes = chunkBytes;
        this.nanoClock = nanoClock;
        this.tokens = chunkBytes;
        this.filledAt = nanoClock.getAsLong();
    }

    /**
     * Takes a chunk's bytes if the bucket holds them.
     *
     * @return 0 when the chunk may go now (its bytes are taken), else the nanoseconds until it may
     *         (nothing is taken: ask again then)
     */
    long reserve() {
        if (rate == 0) {
            return 0;
        }
        long now = nanoClock.getAsLong();
        tokens = Math.min(chunkBytes, tokens + (now - filledAt) * (double) rate / 1e9);
        filledAt = now;
        if (tokens >= chunkBytes) {
            tokens -= chunkBytes;
            return 0;
        }
        return Math.max(1L, (long) Math.ceil((chunkBytes - tokens) * 1e9 / rate));
    }
}
