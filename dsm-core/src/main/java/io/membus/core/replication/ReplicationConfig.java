package io.membus.core.replication;

import io.membus.core.error.DsmConfigException;

/**
 * The settings of replication ({@code membus.replication} in the configuration).
 *
 * @param backups           copies of every segment besides its primary, on other memory nodes; 0 turns
 *                          replication off
 * @param windowEffects     changes of one group a copy may have unacknowledged; beyond it the primary
 *                          holds further changes of the group (back-pressure, never unbounded buffering)
 * @param windowBytes       bytes of such changes
 * @param chunkBytes        the unit in which a new copy's memory is copied while changes flow
 * @param rereplicationRate cap of that copy in bytes per second per new copy of a group (a token bucket
 *                          of one chunk checked before each chunk, {@code CopyPacer}); 0: no cap
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public record ReplicationConfig(int backups, int windowEffects, long windowBytes, int chunkBytes,
                                long rereplicationRate) {
    /** The most copies a group may have besides its primary. */
    public static final int MAX_BACKUPS = 3;

    /** Replication off: today's single-copy memory. */
    public static final ReplicationConfig OFF = new ReplicationConfig(0, 4096, 64L << 20, 256 << 10, 0);

    /** The defaults of {@code reference.conf}: one backup. */
    public static final ReplicationConfig DEFAULT = OFF.withBackups(1);

    public ReplicationConfig {
        check(backups >= 0 && backups <= MAX_BACKUPS, "backups", backups, "0.." + MAX_BACKUPS);
        check(windowEffects >= 1, "window-effects", windowEffects, ">= 1");
        check(windowBytes >= 1, "window-bytes", windowBytes, ">= 1");
        check(chunkBytes >= 4096 && chunkBytes <= (16 << 20) && (chunkBytes & 7) == 0, "chunk", chunkBytes,
                "4KiB..16MiB, a multiple of 8");
        check(rereplicationRate >= 0, "rereplication-rate", rereplicationRate, ">= 0 (0: no cap)");
    }

    private static void check(boolean ok, String key, Object value, String allowed) {
        if (!ok) {
            throw new DsmConfigException("membus.replication." + key, String.valueOf(value), allowed);
        }
    }

    public boolean enabled() {
        return backups > 0;
    }

    public ReplicationConfig withBackups(int value) {
        return new ReplicationConfig(value, windowEffects, windowBytes, chunkBytes, rereplicationRate);
    }
}
