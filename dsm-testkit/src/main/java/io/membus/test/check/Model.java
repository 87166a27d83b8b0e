package io.membus.test.check;

import io.membus.test.history.Operation;

/**
 * A sequential specification the checker tests a history against: a start state
 * and a step function. States must be immutable values with {@code equals} and
 * {@code hashCode} (the checker memoises on them).
 *
 * <p>{@link #step} applies one operation. For an {@link Operation#indeterminate()}
 * operation the output is unknown: apply its effect and accept. (That it may also
 * never have taken effect is the checker's business, not the model's.)
 *
 * <p><b>Note:</b> implementations are stateless and thread-safe.
 *
 * @param <S> the state type
 */
public interface Model<S> {

    /** The state before any operation. */
    S initial();

    /**
     * The state after {@code op}, or {@code null} when {@code op} could not have
     * returned its output in {@code state}.
     */
    S step(S state, Operation op);

    /**
     * The operations a first, cheaper search may check instead of {@code ops}: the
     * history without indeterminate operations whose effect no completed operation
     * could have observed, or {@code ops} itself. The checker accepts a LINEARIZABLE
     * verdict on the pruned history (each pruned operation then simply never took
     * effect, which an indeterminate operation may do) and checks the whole history
     * again for any other verdict, so a model's pruning can make the checker faster,
     * never wrong.
     */
    default java.util.List<Operation> prune(java.util.List<Operation> ops) {
        return ops;
    }

    /** The model's name, for reports. */
    default String name() {
        return getClass().getSimpleName();
    }
}
