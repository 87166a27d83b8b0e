package io.membus.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import io.membus.core.error.DsmConfigException;

import java.time.Duration;

/**
 * Typed reads of single keys under {@code membus} for {@link NodeConfig}: each returns the
 * value of one key or throws a {@link DsmConfigException} naming the full key
 * ({@code membus.segments.size}), the value as written and what is allowed. One job: the
 * type and range of a key; which keys a node has and what they mean stay in
 * {@link NodeConfig}.
 *
 * <p><b>Note:</b> stateless (static methods over an immutable {@link Config}); thread-safe.
 * No shared state, so no memory-ordering concern.
 */
final class ConfigValues {
    private ConfigValues() {
    }

    static DsmConfigException bad(String key, Object value, String allowed) {
        return new DsmConfigException("membus." + key, value, allowed);
    }

    static DsmConfigException bad(String key, Object value, String allowed, Throwable cause) {
        return new DsmConfigException("membus." + key, value, allowed, cause);
    }

    static String render(Config m, String key) {
        return m.hasPath(key) ? m.getValue(key).render() : "<missing>";
    }

    static String string(Config m, String key) {
        try {
            return m.getString(key);
        } catch (ConfigException e) {
            throw bad(key, render(m, key), "a string", e);
        }
    }

    static boolean bool(Config m, String key) {
        try {
            return m.getBoolean(key);
        } catch (ConfigException e) {
            throw bad(key, render(m, key), "true or false", e);
        }
    }

    static int intIn(Config m, String key, int min, int max, String allowed) {
        int v;
        try {
            v = m.getInt(key);
        } catch (ConfigException e) {
            throw bad(key, render(m, key), allowed, e);
        }
        if (v < min || v > max) {
            throw bad(key, v, allowed);
        }
        return v;
    }

    static long bytes(Config m, String key, long min, long max) {
        String allowed = "a size " + min + ".." + max + " bytes, a multiple of 8 (HOCON sizes such as 64MiB work)";
        long v;
        try {
            v = m.getBytes(key);
        } catch (ConfigException e) {
            throw bad(key, render(m, key), allowed, e);
        }
        if (v < min || v > max || v % 8 != 0) {
            throw bad(key, v, allowed);
        }
        return v;
    }

    /** A size in bytes without a range (the caller checks it, or the record it feeds does). */
    static long size(Config m, String key, String allowed) {
        try {
            return m.getBytes(key);
        } catch (ConfigException e) {
            throw bad(key, render(m, key), allowed, e);
        }
    }

    static Duration duration(Config m, String key) {
        Duration d;
        try {
            d = m.getDuration(key);
        } catch (ConfigException e) {
            throw bad(key, render(m, key), "a positive duration such as 250ms, 5s or 2m", e);
        }
        if (d.isNegative() || d.isZero()) {
            throw bad(key, d, "a positive duration such as 250ms, 5s or 2m");
        }
        return d;
    }
}
