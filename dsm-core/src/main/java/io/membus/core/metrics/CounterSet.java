package io.membus.core.metrics;

import io.membus.core.error.DsmConfigException;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

/**
 * A fixed, named set of JVM-wide step counters, the evidence a benchmark or a test reads
 * of what a path cost (refills, claim CASes, stream messages, flushes) independent of the
 * machine's load: each count a {@link LongAdder}, read as a {@link #snapshot()} and, later,
 * as the named changes {@link #since(long[]) since} it. Nothing in the engine reads them.
 *
 * <p>A counting class declares its counts once, in the order they are printed, with a
 * {@link Builder} in its static initializer; each {@link Builder#add} returns the count's
 * {@link LongAdder}, which the class keeps as a {@code static final} field, its handle:
 *
 * <pre>{@code
 *   private static final CounterSet.Builder DECLARE = CounterSet.builder("allocator");
 *   static final LongAdder refills = DECLARE.add("refills");
 *   static final LongAdder carves = DECLARE.add("carves");
 *   public static final CounterSet COUNTS = DECLARE.build();
 * }</pre>
 *
 * The hot path counts through the handle: {@code refills.increment()} is one
 * {@link LongAdder#increment()} (no lookup, no boxing, no allocation), so counting is left
 * on. A handle is never {@link LongAdder#reset() reset}: that would make every earlier mark
 * of this set wrong.
 *
 * <p><b>Note:</b> thread-safe; the set itself is immutable once {@link Builder#build() built}.
 * Counting: any thread may increment any count at any time; no increment is ever lost, but
 * increments are not ordered with each other nor with what the counting thread does around
 * them (a reader may see a later step's count before an earlier one's). Reading: each count
 * of a {@link #snapshot()} is a {@link LongAdder#sum()}, which sees at least every increment
 * that happened-before the snapshot (the counting threads were joined, or handed their
 * results over through a lock, a volatile or a concurrent queue); increments racing with it
 * may or may not be seen. A snapshot is not atomic across counts: taken while counting
 * goes on, two counts may reflect different instants (a claim counted without the offer it
 * led to), so read it while the counted path is quiet, or read the figures as approximate.
 */
public final class CounterSet {
    private final String name;
    private final List<String> names;
    private final LongAdder[] counts;

    private CounterSet(String name, List<String> names, LongAdder[] counts) {
        this.name = name;
        this.names = names;
        this.counts = counts;
    }

    /**
     * A builder of the set called {@code name} (what {@link #toString()} and failures name,
     * e.g. {@code "allocator"}).
     *
     * @throws DsmConfigException if {@code name} is null or empty
     */
    public static Builder builder(String name) {
        if (name == null || name.isEmpty()) {
            throw new DsmConfigException("counter set name", name == null ? "null" : "\"\"",
                    "a non-empty name saying what the set counts, e.g. \"allocator\"");
        }
        return new Builder(name);
    }

    /** The set's name, as given to {@link #builder(String)}. */
    public String name() {
        return name;
    }

    /** How many counts the set has. */
    public int size() {
        return counts.length;
    }

    /** The counts' names, in their order (unmodifiable). */
    public List<String> names() {
        return names;
    }

    /**
     * The name of count {@code index}.
     *
     * @throws DsmConfigException if {@code index} is not in {@code 0..size()-1}
     */
    public String name(int index) {
        return names.get(checkIndex(index));
    }

    /**
     * The position of the count called {@code name}.
     *
     * @throws DsmConfigException if the set has no count of that name
     */
    public int indexOf(String name) {
        int i = name == null ? -1 : names.indexOf(name); // an immutable list's indexOf(null) throws
        if (i < 0) {
            throw new DsmConfigException("counter name in set " + this.name, name, "one of " + names);
        }
        return i;
    }

    /**
     * The handle of count {@code index}: what {@link Builder#add} returned for it.
     *
     * @throws DsmConfigException if {@code index} is not in {@code 0..size()-1}
     */
    public LongAdder counter(int index) {
        return counts[checkIndex(index)];
    }

    /**
     * The handle of the count called {@code name} (a lookup: keep the handle, do not call this
     * per increment).
     *
     * @throws DsmConfigException if the set has no count of that name
     */
    public LongAdder counter(String name) {
        return counts[indexOf(name)];
    }

    /**
     * Every count now, in the set's order: a mark for {@link #since(long[])}. Not atomic
     * across counts (see the class note).
     */
    public long[] snapshot() {
        long[] now = new long[counts.length];
        for (int i = 0; i < now.length; i++) {
            now[i] = counts[i].sum();
        }
        return now;
    }

    /**
     * How much each count changed since {@code mark}, a {@link #snapshot()} of this set taken
     * earlier: a fresh snapshot minus the mark, with the counts' names.
     *
     * @throws DsmConfigException if {@code mark} is null or not of this set's size
     */
    public Deltas since(long[] mark) {
        if (mark == null || mark.length != counts.length) {
            throw new DsmConfigException("mark of counter set " + name,
                    mark == null ? "null" : "long[" + mark.length + "]",
                    "a snapshot() of this set: long[" + counts.length + "]");
        }
        long[] d = snapshot();
        for (int i = 0; i < d.length; i++) {
            d[i] -= mark[i];
        }
        return new Deltas(this, d);
    }

    /** {@code name{count=value, ...}} of every count now. */
    @Override
    public String toString() {
        return name + "{" + Deltas.list(names, snapshot()) + "}";
    }

    private int checkIndex(int index) {
        if (index < 0 || index >= counts.length) {
            throw new DsmConfigException("counter index in set " + name, index, "0.." + (counts.length - 1));
        }
        return index;
    }

    /**
     * The changes of a set's counts between a mark and a later snapshot, by name. A value:
     * what was counted when {@link CounterSet#since(long[])} read it, never updated.
     *
     * <p><b>Note:</b> immutable; thread-safe.
     */
    public static final class Deltas {
        private final CounterSet set;
        private final long[] values;

        private Deltas(CounterSet set, long[] values) {
            this.set = set;
            this.values = values;
        }

        /** How many counts there are (the set's size). */
        public int size() {
            return values.length;
        }

        /** The counts' names, in their order (unmodifiable). */
        public List<String> names() {
            return set.names;
        }

        /**
         * The name of count {@code index}.
         *
         * @throws DsmConfigException if {@code index} is not in {@code 0..size()-1}
         */
        public String name(int index) {
            return set.name(index);
        }

        /**
         * The change of count {@code index}.
         *
         * @throws DsmConfigException if {@code index} is not in {@code 0..size()-1}
         */
        public long get(int index) {
            return values[set.checkIndex(index)];
        }

        /**
         * The change of the count called {@code name}.
         *
         * @throws DsmConfigException if the set has no count of that name
         */
        public long get(String name) {
            return values[set.indexOf(name)];
        }

        /** Every change, in the set's order (a copy). */
        public long[] toArray() {
            return values.clone();
        }

        /** {@code name=change} of each count, in the set's order, joined by {@code ", "}. */
        @Override
        public String toString() {
            return list(set.names, values).toString();
        }

        /**
         * As {@link #toString()}, each count but {@code per} followed by its change per
         * {@code unit}: {@code " (%.2f/unit)"}, divided by {@code per}'s change (at least 1).
         * E.g. {@code toString("changes", "change")}: {@code changes=10, acks=12 (1.20/change)}.
         *
         * @throws DsmConfigException if the set has no count called {@code per}
         */
        public String toString(String per, String unit) {
            int p = set.indexOf(per);
            double divisor = Math.max(1, values[p]);
            StringBuilder s = new StringBuilder();
            for (int i = 0; i < values.length; i++) {
                s.append(i == 0 ? "" : ", ").append(set.names.get(i)).append('=').append(values[i]);
                if (i != p) {
                    s.append(String.format(" (%.2f/%s)", values[i] / divisor, unit));
                }
            }
            return s.toString();
        }

        private static StringBuilder list(List<String> names, long[] values) {
            StringBuilder s = new StringBuilder();
            for (int i = 0; i < values.length; i++) {
                s.append(i == 0 ? "" : ", ").append(names.get(i)).append('=').append(values[i]);
            }
            return s;
        }
    }

    /**
     * Declares a set's counts, in order; {@link #build()} ends the declaration. Meant for one
     * class's static initializer.
     *
     * <p><b>Note:</b> not thread-safe: one thread declares (a class initializer is run by one
     * thread); the set it builds is thread-safe.
     */
    public static final class Builder {
        private final String name;
        private final List<String> names = new ArrayList<>();
        private final List<LongAdder> counts = new ArrayList<>();
        private boolean built;

        private Builder(String name) {
            this.name = name;
        }

        /**
         * Adds the count called {@code name}, after those added before it, and returns its handle.
         *
         * @throws DsmConfigException if {@code name} is null, empty or already added, or the set was built
         */
        public LongAdder add(String name) {
            if (built) {
                throw new DsmConfigException("counter " + name + " of set " + this.name, "added after build()",
                        "every count added before build()");
            }
            if (name == null || name.isEmpty() || names.contains(name)) {
                throw new DsmConfigException("counter name in set " + this.name, name == null ? "null" : "\"" + name + "\"",
                        "a non-empty name not used yet in the set (used: " + names + ")");
            }
            LongAdder count = new LongAdder();
            names.add(name);
            counts.add(count);
            return count;
        }

        /**
         * The set of the counts added, in their order; the builder takes no more.
         *
         * @throws DsmConfigException if called twice, or before any {@link #add}
         */
        public CounterSet build() {
            if (built) {
                throw new DsmConfigException("counter set " + name, "built twice", "one build() per builder");
            }
            if (names.isEmpty()) {
                throw new DsmConfigException("counter set " + name, "no counts", "at least one add(name) before build()");
            }
            built = true;
            return new CounterSet(name, List.copyOf(names), counts.toArray(new LongAdder[0]));
        }
    }
}
