package io.membus.test.history;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A finished history: its operations, ordered by invocation, and the fault windows
 * of the run. Histories are partitioned by key for checking (linearizability is
 * compositional: a history is linearizable when each object's sub-history is).
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public record History(List<Operation> operations, List<FaultWindow> faults) {

    public History {
        List<Operation> sorted = new ArrayList<>(operations);
        sorted.sort(Comparator.comparingLong(Operation::invokeNanos).thenComparingInt(Operation::id));
        operations = List.copyOf(sorted);
        faults = List.copyOf(faults);
    }

    public History(List<Operation> operations) {
        this(operations, List.of());
    }

    /** The sub-histories of each key, in key order. */
    public Map<String, List<Operation>> byKey() {
        Map<String, List<Operation>> m = new TreeMap<>();
        for (Operation op : operations) {
            m.computeIfAbsent(op.key(), k -> new ArrayList<>()).add(op);
        }
        return m;
    }

    /** How many operations ended with {@code outcome}. */
    public long count(Outcome outcome) {
        return operations.stream().filter(o -> o.outcome() == outcome).count();
    }
}
