package io.membus.cluster.names;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import io.membus.core.error.DsmConfigException;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.capability.TransportCapabilities;

import java.util.Locale;

/**
 * The {@code membus.names} settings: whether the cluster's names are a {@link NameTable}
 * in replicated memory or go through the Distributed Data arbiter, the table's capacity
 * and the size of the system segment that holds it. Only the node that forms the cluster
 * acts on them (it records its choice in the {@code membus-system} register; every
 * other node follows the register).
 *
 * <p><b>Note:</b> immutable; thread-safe (final fields).
 */
public final class NameTableSettings {
    /** The index of the system segment on the founding node. */
    public static final int SYSTEM_SEGMENT = 255;
    /** The largest capacity accepted. */
    public static final int MAX_CAPACITY = 1 << 26;

    /** {@code membus.names.table}. */
    public enum Mode { AUTO, ON, OFF }

    private final Mode mode;
    private final int capacity;
    private final long segmentSize;

    public NameTableSettings(Mode mode, int capacity, long segmentSize) {
        if (capacity < 1 || capacity > MAX_CAPACITY) {
            throw new DsmConfigException("membus.names.capacity", capacity, "an integer 1.." + MAX_CAPACITY);
        }
        long needed = NameTable.bytesFor(capacity);
        long size = segmentSize == 0 ? (needed + 4095) & ~4095L : segmentSize;
        if (size < needed) {
            throw new DsmConfigException("membus.names.segment-size", segmentSize, "0 (fitted to the capacity) or at"
                    + " least " + needed + " B, the table of membus.names.capacity = " + capacity + " slots");
        }
        this.mode = mode;
        this.capacity = capacity;
        this.segmentSize = size;
    }

    /** The defaults: {@code auto}, 65,536 slots, a 516 KiB segment. */
    public static NameTableSettings defaults() {
        return new NameTableSettings(Mode.AUTO, NameTable.DEFAULT_CAPACITY, 0);
    }

    /**
     * Reads {@code membus.names} from a node's config as given, over the defaults of the
     * {@code reference.conf} files on the class path.
     *
     * @throws DsmConfigException naming the key of a bad value
     */
    public static NameTableSettings from(Config given) {
        Config c = withDefaults(given);
        String raw = c.hasPath("membus.names.table") ? c.getString("membus.names.table") : "auto";
        Mode mode;
        try {
            mode = Mode.valueOf(raw.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new DsmConfigException("membus.names.table", raw, "auto, on or off");
        }
        long capacity;
        long size;
        try {
            capacity = c.hasPath("membus.names.capacity") ? c.getLong("membus.names.capacity") : NameTable.DEFAULT_CAPACITY;
            size = c.hasPath("membus.names.segment-size") ? c.getBytes("membus.names.segment-size") : 0;
        } catch (ConfigException e) {
            throw new DsmConfigException("membus.names", "<unreadable>", "capacity: an integer, segment-size: a size"
                    + " such as 1MiB (" + e.getMessage() + ")", e);
        }
        if (capacity < 1 || capacity > MAX_CAPACITY) {
            throw new DsmConfigException("membus.names.capacity", capacity, "an integer 1.." + MAX_CAPACITY);
        }
        if (size < 0) {
            throw new DsmConfigException("membus.names.segment-size", size, "0 or a positive size");
        }
        return new NameTableSettings(mode, (int) capacity, size);
    }

    private static Config withDefaults(Config given) {
        try {
            return given.withFallback(ConfigFactory.defaultReference(NameTableSettings.class.getClassLoader()))
                    .resolve();
        } catch (ConfigException e) {
            throw new DsmConfigException("membus", "<unreadable>", "valid HOCON: " + e.getMessage(), e);
        }
    }

    public Mode mode() {
        return mode;
    }

    public int capacity() {
        return capacity;
    }

    /** Bytes of the system segment. */
    public long segmentSize() {
        return segmentSize;
    }

    /**
     * Whether a cluster formed by this node keeps its names in the table: {@code on}, or
     * {@code auto} when replication can keep the system segment — {@code backups > 0}
     * on a transport that forwards changes to copies, or one whose copies adopt the
     * segment's memory (shm) — and not with {@code off}, on rdma (no replication there
     * yet) or with {@code backups = 0}.
     */
    public boolean useTable(int backups, TransportCapabilities capabilities) {
        return switch (mode) {
            case ON -> true;
            case OFF -> false;
            case AUTO -> backups > 0 && (capabilities.replication() == ReplicationSupport.FORWARDING
                    || capabilities.replication() == ReplicationSupport.ADOPTION);
        };
    }

    @Override
    public String toString() {
        return "names{table=" + mode.name().toLowerCase(Locale.ROOT) + ", capacity=" + capacity + ", segment-size="
                + segmentSize + "}";
    }
}
