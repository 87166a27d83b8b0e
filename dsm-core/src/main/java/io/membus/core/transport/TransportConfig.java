package io.membus.core.transport;

import io.membus.core.RemotePtr;
import io.membus.core.error.DsmConfigException;

import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;

/**
 * Settings of one node's transport: the node's identity, the deadlines, and
 * transport-specific properties (keys prefixed with the transport's name, e.g.
 * {@code tcp.port}, {@code shm.dir}). Typed getters fail with a
 * {@link DsmConfigException} that names the key and what is allowed.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class TransportConfig {
    public static final Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(5);
    public static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(5);

    private final int nodeId;
    private final long incarnation;
    private final Duration operationTimeout;
    private final Duration connectTimeout;
    private final Map<String, String> properties;

    private TransportConfig(Builder b) {
        this.nodeId = b.nodeId;
        this.incarnation = b.incarnation;
        this.operationTimeout = b.operationTimeout;
        this.connectTimeout = b.connectTimeout;
        this.properties = Map.copyOf(b.properties);
    }

    public static Builder builder(int nodeId) {
        return new Builder(nodeId);
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

    public Map<String, String> properties() {
        return properties;
    }

    public String get(String key, String defaultValue) {
        return properties.getOrDefault(key, defaultValue);
    }

    /** A required string property. */
    public String require(String key, String allowed) {
        String v = properties.get(key);
        if (v == null || v.isBlank()) {
            throw new DsmConfigException(key, "<missing>", allowed);
        }
        return v;
    }

    public int getInt(String key, int defaultValue, int min, int max) {
        String v = properties.get(key);
        if (v == null) {
            return defaultValue;
        }
        try {
            int i = Integer.parseInt(v.trim());
            if (i < min || i > max) {
                throw new DsmConfigException(key, v, "an integer in " + min + ".." + max);
            }
            return i;
        } catch (NumberFormatException e) {
            throw new DsmConfigException(key, v, "an integer in " + min + ".." + max, e);
        }
    }

    public Duration getDuration(String key, Duration defaultValue) {
        String v = properties.get(key);
        if (v == null) {
            return defaultValue;
        }
        return parseDuration(key, v);
    }

    /** Parses {@code 250ms}, {@code 5s}, {@code 2m}, a bare number of milliseconds, or an ISO-8601 duration. */
    public static Duration parseDuration(String key, String v) {
        String t = v.trim().toLowerCase();
        try {
            Duration d;
            if (t.startsWith("p")) {
                d = Duration.parse(v.trim());
            } else if (t.endsWith("ms")) {
                d = Duration.ofMillis(Long.parseLong(t.substring(0, t.length() - 2).trim()));
            } else if (t.endsWith("s")) {
                d = Duration.ofSeconds(Long.parseLong(t.substring(0, t.length() - 1).trim()));
            } else if (t.endsWith("m")) {
                d = Duration.ofMinutes(Long.parseLong(t.substring(0, t.length() - 1).trim()));
            } else {
                d = Duration.ofMillis(Long.parseLong(t)); // a bare number is milliseconds
            }
            if (d.isNegative() || d.isZero()) {
                throw new DsmConfigException(key, v, "a positive duration such as 250ms, 5s or 2m");
            }
            return d;
        } catch (RuntimeException e) {
            if (e instanceof DsmConfigException dce) {
                throw dce;
            }
            throw new DsmConfigException(key, v, "a positive duration such as 250ms, 5s or 2m", e);
        }
    }

    @Override
    public String toString() {
        Map<String, String> shown = new TreeMap<>(properties);
        shown.replaceAll((k, v) -> k.contains("secret") ? "<hidden>" : v);
        return "TransportConfig{node=" + nodeId + ", incarnation=" + incarnation + ", operationTimeout="
                + operationTimeout + ", connectTimeout=" + connectTimeout + ", properties=" + shown + "}";
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
        private final Map<String, String> properties = new TreeMap<>();

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

        public Builder property(String key, String value) {
            properties.put(key, value);
            return this;
        }

        public Builder properties(Map<String, String> values) {
            properties.putAll(values);
            return this;
        }

        public TransportConfig build() {
            return new TransportConfig(this);
        }
    }
}
