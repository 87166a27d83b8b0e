package io.membus.core.transport;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValue;
import com.typesafe.config.ConfigValueType;
import io.membus.core.RemotePtr;
import io.membus.core.config.KnownKeys;
import io.membus.core.error.DsmConfigException;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Settings of one node's transport: the node's identity, the deadlines, and the
 * {@value #ROOT} subtree of a Typesafe Config, in which every transport reads its own
 * subtree ({@code tcp { port = 0, ... }}, {@code shm { dir = ... }}, {@code local},
 * {@code rdma}, and {@code messages}, which every transport's messaging shares). The
 * {@code reference.conf} of each transport's module defines and documents its keys with
 * their defaults; what a node or a test sets lies over them.
 *
 * <p>Paths given to the getters are relative to {@value #ROOT} ({@code "tcp.port"}).
 * Durations and sizes use the Typesafe Config forms ({@code 250ms}, {@code 5s},
 * {@code 64KiB}). Every typed getter fails with a {@link DsmConfigException} that names
 * the full key ({@code membus.transports.tcp.port}), the value and what is allowed;
 * {@link Builder#build()} fails the same way on a key that no module's
 * {@code reference.conf} defines in a subtree it knows, so a misspelt key is reported
 * instead of ignored.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class TransportConfig {
    /** Where the transports' subtree sits in a node's config. */
    public static final String ROOT = "membus.transports";
    public static final Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(5);
    public static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(5);
    private static final String DURATION = "a positive duration such as 250ms, 5s or 2m";

    private final int nodeId;
    private final long incarnation;
    private final Duration operationTimeout;
    private final Duration connectTimeout;
    /** The {@value #ROOT} subtree, defaults included; resolved. */
    private final Config transports;

    private TransportConfig(Builder b) {
        this.nodeId = b.nodeId;
        this.incarnation = b.incarnation;
        this.operationTimeout = b.operationTimeout;
        this.connectTimeout = b.connectTimeout;
        Config reference = reference();
        Config given;
        try {
            given = ConfigFactory.parseMap(b.properties).withFallback(b.transports).resolve();
        } catch (ConfigException e) {
            throw new DsmConfigException(ROOT, "<unreadable>", "valid settings: " + e.getMessage(), e);
        }
        checkKnownKeys(given, reference);
        this.transports = given.withFallback(reference).resolve();
    }

    public static Builder builder(int nodeId) {
        return new Builder(nodeId);
    }

    /** The defaults: the {@value #ROOT} subtree of every {@code reference.conf} on the class path. */
    public static Config reference() {
        Config all = ConfigFactory.defaultReference(TransportConfig.class.getClassLoader());
        return all.hasPath(ROOT) ? all.getConfig(ROOT) : ConfigFactory.empty();
    }

    /** The full key of a path relative to {@value #ROOT}: {@code tcp.port} is {@code membus.transports.tcp.port}. */
    public static String key(String path) {
        return ROOT + "." + path;
    }

    /**
     * Refuses a key set in a subtree that a {@code reference.conf} defines ({@code tcp},
     * {@code messages}, ...) but that is not one of that subtree's keys. Subtrees no module
     * on the class path defines are left alone: they belong to a transport not in use here.
     */
    private static void checkKnownKeys(Config given, Config reference) {
        for (Map.Entry<String, ConfigValue> e : given.root().entrySet()) {
            String section = e.getKey();
            if (!reference.root().containsKey(section)) {
                continue;
            }
            if (e.getValue().valueType() != ConfigValueType.OBJECT) {
                throw new DsmConfigException(key(section), e.getValue().unwrapped(), "an object of settings, e.g. "
                        + key(section) + " { ... } (see the reference.conf of the module that defines it)");
            }
            Config known = reference.getConfig(section);
            for (Map.Entry<String, ConfigValue> k : given.getConfig(section).entrySet()) {
                if (!known.hasPathOrNull(k.getKey())) {
                    java.util.List<String> paths = new java.util.ArrayList<>();
                    KnownKeys.collect(known.root(), key(section), paths);
                    String full = key(section + "." + k.getKey());
                    throw new DsmConfigException(full, k.getKey().contains("secret")
                            ? "<hidden>" : k.getValue().unwrapped(), "one of the keys of " + key(section) + ": "
                            + String.join(", ", new TreeSet<>(known.root().keySet())) + "; closest known key: "
                            + KnownKeys.closest(full, paths) + "; set at " + (k.getValue().origin() == null
                            ? "(unknown origin)" : k.getValue().origin().description()));
                }
            }
        }
    }

    public int nodeId() {
        return nodeId;
    }

    public long incarnation() {
        return incarnation;
    }

    /** Deadline of every verb, from its issue. */
    public Duration operationTimeout() {
        return operationTimeout;
    }

    /** Deadline of opening a connection. */
    public Duration connectTimeout() {
        return connectTimeout;
    }

    /** The whole {@value #ROOT} subtree, defaults included. */
    public Config transports() {
        return transports;
    }

    /** One transport's subtree ({@code "tcp"}), defaults included; empty when nothing defines it. */
    public Config section(String name) {
        return transports.hasPath(name) ? transports.getConfig(name) : ConfigFactory.empty();
    }

    /** Whether {@code path} has a value (other than null). */
    public boolean has(String path) {
        return transports.hasPath(path);
    }

    /** A string; a missing key fails naming what is allowed. */
    public String getString(String path, String allowed) {
        try {
            return transports.getString(path);
        } catch (ConfigException e) {
            throw bad(path, shown(path), allowed, e);
        }
    }

    /** A string that must not be blank (a required setting whose default is {@code ""}). */
    public String require(String path, String allowed) {
        String v = getString(path, allowed);
        if (v.isBlank()) {
            throw bad(path, "<missing>", allowed);
        }
        return v;
    }

    public boolean getBoolean(String path) {
        try {
            return transports.getBoolean(path);
        } catch (ConfigException e) {
            throw bad(path, shown(path), "true or false", e);
        }
    }

    public int getInt(String path, int min, int max) {
        String allowed = "an integer in " + min + ".." + max;
        int v;
        try {
            v = transports.getInt(path);
        } catch (ConfigException e) {
            throw bad(path, shown(path), allowed, e);
        }
        if (v < min || v > max) {
            throw bad(path, v, allowed);
        }
        return v;
    }

    /** A size in bytes: a number or a Typesafe Config size ({@code 64KiB}, {@code 16MiB}). */
    public long getBytes(String path, long min, long max) {
        String allowed = "a size of " + min + ".." + max + " bytes (sizes such as 4096, 64KiB or 16MiB)";
        long v;
        try {
            v = transports.getBytes(path);
        } catch (ConfigException e) {
            throw bad(path, shown(path), allowed, e);
        }
        if (v < min || v > max) {
            throw bad(path, v, allowed);
        }
        return v;
    }

    /** A positive duration: {@code 250ms}, {@code 5s}, {@code 2m} (a bare number is milliseconds). */
    public Duration getDuration(String path) {
        Duration d;
        try {
            d = transports.getDuration(path);
        } catch (ConfigException e) {
            throw bad(path, shown(path), DURATION, e);
        }
        if (d.isNegative() || d.isZero()) {
            throw bad(path, shown(path), DURATION);
        }
        return d;
    }

    /** A complaint about the setting at {@code path}, naming its full key. */
    public static DsmConfigException bad(String path, Object value, String allowed) {
        return new DsmConfigException(key(path), value, allowed);
    }

    public static DsmConfigException bad(String path, Object value, String allowed, Throwable cause) {
        return new DsmConfigException(key(path), value, allowed, cause);
    }

    private String shown(String path) {
        if (!transports.hasPathOrNull(path)) {
            return "<missing>";
        }
        if (path.contains("secret")) {
            return "<hidden>";
        }
        return transports.getIsNull(path) ? "null" : String.valueOf(transports.getValue(path).unwrapped());
    }

    @Override
    public String toString() {
        Map<String, Object> shown = new TreeMap<>();
        for (Map.Entry<String, ConfigValue> e : transports.entrySet()) {
            shown.put(e.getKey(), e.getKey().contains("secret") ? "<hidden>" : e.getValue().unwrapped());
        }
        return "TransportConfig{node=" + nodeId + ", incarnation=" + incarnation + ", operationTimeout="
                + operationTimeout + ", connectTimeout=" + connectTimeout + ", " + ROOT + "=" + shown + "}";
    }

    /**
     * Builder of a {@link TransportConfig}.
     *
     * <p><b>Note:</b> not thread-safe.
     */
    public static final class Builder {
        private final int nodeId;
        private long incarnation = System.currentTimeMillis() * 1000 + (System.nanoTime() & 0x3ff);
        private Duration operationTimeout = DEFAULT_OPERATION_TIMEOUT;
        private Duration connectTimeout = DEFAULT_CONNECT_TIMEOUT;
        private final Map<String, Object> properties = new LinkedHashMap<>();
        private Config transports = ConfigFactory.empty();

        private Builder(int nodeId) {
            if (nodeId < 1 || nodeId > RemotePtr.MAX_NODE_ID) {
                throw new DsmConfigException("node-id", nodeId, "1.." + RemotePtr.MAX_NODE_ID);
            }
            this.nodeId = nodeId;
        }

        /** Defaults to a value derived from the wall clock, so a restarted node gets a new one. */
        public Builder incarnation(long incarnation) {
            this.incarnation = incarnation;
            return this;
        }

        public Builder operationTimeout(Duration timeout) {
            if (timeout.isNegative() || timeout.isZero()) {
                throw new DsmConfigException("operation-timeout", timeout, "a positive duration");
            }
            this.operationTimeout = timeout;
            return this;
        }

        public Builder connectTimeout(Duration timeout) {
            if (timeout.isNegative() || timeout.isZero()) {
                throw new DsmConfigException("connect-timeout", timeout, "a positive duration");
            }
            this.connectTimeout = timeout;
            return this;
        }

        /**
         * Sets one setting: {@code path} is relative to {@value #ROOT} ({@code "tcp.port"}); the
         * value a string, number, boolean or {@link Duration}. Overrides {@link #transports(Config)}.
         */
        public Builder property(String path, Object value) {
            properties.put(path, value instanceof Duration d ? d.toNanos() + "ns"
                    : value instanceof Number || value instanceof Boolean || value instanceof String ? value
                    : String.valueOf(value));
            return this;
        }

        /** {@link #property} for each entry. */
        public Builder properties(Map<String, ?> values) {
            values.forEach(this::property);
            return this;
        }

        /** A {@value #ROOT} subtree (e.g. a node config's), laid over the defaults. */
        public Builder transports(Config subtree) {
            this.transports = subtree;
            return this;
        }

        /** @throws DsmConfigException on a key no {@code reference.conf} defines in a subtree it knows */
        public TransportConfig build() {
            return new TransportConfig(this);
        }
    }
}
