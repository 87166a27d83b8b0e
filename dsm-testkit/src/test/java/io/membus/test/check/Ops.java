package io.membus.test.check;

import io.membus.test.history.History;
import io.membus.test.history.Operation;
import io.membus.test.history.Outcome;

import java.util.ArrayList;
import java.util.List;

/** Builds histories by hand: {@code op(process, f, input, output, invoke, complete)} on one key. */
final class Ops {
    private final List<Operation> ops = new ArrayList<>();
    private final String key;

    Ops(String key) {
        this.key = key;
    }

    Ops ok(int process, String f, Object input, Object output, long invoke, long complete) {
        ops.add(new Operation(ops.size(), process, key, f, input, output, Outcome.OK, invoke, complete));
        return this;
    }

    Ops info(int process, String f, Object input, long invoke) {
        ops.add(new Operation(ops.size(), process, key, f, input, null, Outcome.INFO, invoke, invoke + 1));
        return this;
    }

    Ops fail(int process, String f, Object input, long invoke, long complete) {
        ops.add(new Operation(ops.size(), process, key, f, input, null, Outcome.FAIL, invoke, complete));
        return this;
    }

    List<Operation> list() {
        return ops;
    }

    History history() {
        return new History(ops);
    }
}
