package io.membus.core.replication;

/**
 * An immutable open-addressed map from group id to {@link Hosted}: what
 * {@link io.membus.core.transport.SegmentTable} looks up on every verb of a hosted or
 * replicated group, without allocating. Changes build a new table (groups change
 * rarely); the table publishes it through one volatile field.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class HostedTable {
    /** The table with no group. */
    public static final HostedTable EMPTY = new HostedTable(new int[0], new Hosted[0], 0);

    private final int[] keys;
    private final Hosted[] values;
    private final int size;

    private HostedTable(int[] keys, Hosted[] values, int size) {
        this.keys = keys;
        this.values = values;
        this.size = size;
    }

    public int size() {
        return size;
    }

    /** The entry of {@code group}, or {@code null}. Allocation-free. */
    public Hosted get(int group) {
        if (size == 0) {
            return null;
        }
        int mask = keys.length - 1;
        for (int i = mix(group) & mask; ; i = (i + 1) & mask) {
            Hosted h = values[i];
            if (h == null) {
                return null;
            }
            if (keys[i] == group) {
                return h;
            }
        }
    }

    /** A table with {@code h} added (or replacing the entry of its group). */
    public HostedTable with(Hosted h) {
        java.util.List<Hosted> all = all();
        all.removeIf(e -> e.group() == h.group());
        all.add(h);
        return of(all);
    }

    /** A table without {@code group}. */
    public HostedTable without(int group) {
        java.util.List<Hosted> all = all();
        if (!all.removeIf(e -> e.group() == group)) {
            return this;
        }
        return of(all);
    }

    /** Every entry (a new list). */
    public java.util.List<Hosted> all() {
        java.util.List<Hosted> list = new java.util.ArrayList<>(size);
        for (Hosted h : values) {
            if (h != null) {
                list.add(h);
            }
        }
        return list;
    }

    private static HostedTable of(java.util.List<Hosted> all) {
        if (all.isEmpty()) {
            return EMPTY;
        }
        int cap = Integer.highestOneBit(Math.max(4, all.size() * 2 - 1)) << 1;
        int[] keys = new int[cap];
        Hosted[] values = new Hosted[cap];
        for (Hosted h : all) {
            int mask = cap - 1;
            int i = mix(h.group()) & mask;
            while (values[i] != null) {
                i = (i + 1) & mask;
            }
            keys[i] = h.group();
            values[i] = h;
        }
        return new HostedTable(keys, values, all.size());
    }

    private static int mix(int k) {
        int h = k * 0x9E3779B9;
        return h ^ (h >>> 16);
    }
}
