package io.membus.test.check;

import io.membus.test.history.Operation;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The models the kit ships. Each names the operation functions ({@code f}) it knows
 * and what their inputs and outputs are; an unknown {@code f} is refused with
 * {@link IllegalArgumentException} naming the model and the functions it knows.
 *
 * <table>
 *   <caption>Models and their operations</caption>
 *   <tr><th>model</th><th>f: input -&gt; output</th></tr>
 *   <tr><td>{@link #register(Object)}</td><td>read: - -&gt; value; write: v -&gt; -;
 *       cas: [expected, new] -&gt; Boolean</td></tr>
 *   <tr><td>{@link #counter(long)}</td><td>read -&gt; value; add: d -&gt; -; addAndGet/incrementAndGet: d -&gt;
 *       new; getAndAdd: d -&gt; old; set: v -&gt; -; cas: [expected, new] -&gt; Boolean</td></tr>
 *   <tr><td>{@link #mapKey()}</td><td>one key of a {@code ConcurrentMap} (absent = null): get -&gt; v;
 *       put: v -&gt; previous; putIfAbsent: v -&gt; previous; replace: v -&gt; previous;
 *       replaceIf: [old, new] -&gt; Boolean; remove -&gt; previous; removeIf: v -&gt; Boolean;
 *       containsKey -&gt; Boolean</td></tr>
 *   <tr><td>{@link #fifoQueue(int)}</td><td>offer: v -&gt; Boolean; poll -&gt; head or null; put: v -&gt; -;
 *       take -&gt; head</td></tr>
 *   <tr><td>{@link #lock()}</td><td>acquire -&gt; fencing token (Long, must grow; holders never overlap);
 *       tryAcquire -&gt; token or null; release: token -&gt; -</td></tr>
 * </table>
 *
 * <p><b>Note:</b> every model is stateless and thread-safe.
 */
public final class Models {
    private Models() {
    }

    private static IllegalArgumentException unknown(String model, Operation op, String known) {
        return new IllegalArgumentException("model=" + model + ", f=" + op.f() + " (operation " + op.id()
                + "): unknown function; this model knows " + known);
    }

    private static boolean out(Operation op, Object expected) {
        return op.indeterminate() || Objects.equals(op.output(), expected);
    }

    private static Object[] pair(Operation op) {
        if (!(op.input() instanceof List<?> l) || l.size() != 2) {
            throw new IllegalArgumentException("f=" + op.f() + " (operation " + op.id()
                    + ") takes [expected, new] as its input, got " + op.input());
        }
        return new Object[] {l.get(0), l.get(1)};
    }

    /** A read/write/compare-and-set register holding {@code initial} at the start. */
    public static Model<Object> register(Object initial) {
        return new Model<>() {
            @Override
            public Object initial() {
                return initial;
            }

            @Override
            public Object step(Object state, Operation op) {
                switch (op.f()) {
                    case "read":
                        return out(op, state) ? state : null;
                    case "write":
                        return op.input();
                    case "cas": {
                        Object[] p = pair(op);
                        boolean swapped = Objects.equals(state, p[0]);
                        return out(op, swapped) ? (swapped ? p[1] : state) : null;
                    }
                    default:
                        throw unknown(name(), op, "read, write, cas");
                }
            }

            @Override
            public String name() {
                return "register";
            }
        };
    }

    /** A 64-bit counter starting at {@code initial}. */
    public static Model<Long> counter(long initial) {
        return new Model<>() {
            @Override
            public Long initial() {
                return initial;
            }

            @Override
            public Long step(Long state, Operation op) {
                long s = state;
                switch (op.f()) {
                    case "read":
                    case "get":
                        return out(op, s) ? state : null;
                    case "add":
                        return s + (Long) op.input();
                    case "addAndGet":
                    case "incrementAndGet": {
                        long n = s + (Long) op.input();
                        return out(op, n) ? n : null;
                    }
                    case "getAndAdd":
                        return out(op, s) ? s + (Long) op.input() : null;
                    case "set":
                        return (Long) op.input();
                    case "cas": {
                        Object[] p = pair(op);
                        boolean swapped = Objects.equals(state, p[0]);
                        return out(op, swapped) ? (swapped ? (Long) p[1] : state) : null;
                    }
                    default:
                        throw unknown(name(), op, "read/get, add, addAndGet/incrementAndGet, getAndAdd, set, cas");
                }
            }

            @Override
            public String name() {
                return "counter";
            }
        };
    }

    /** The state of an absent key. */
    private enum Absent { ABSENT }

    /** One key of a {@code ConcurrentMap}, absent at the start. */
    public static Model<Object> mapKey() {
        return new Model<>() {
            @Override
            public Object initial() {
                return Absent.ABSENT;
            }

            @Override
            public Object step(Object state, Operation op) {
                boolean present = state != Absent.ABSENT;
                Object value = present ? state : null;
                switch (op.f()) {
                    case "get":
                        return out(op, value) ? state : null;
                    case "containsKey":
                        return out(op, present) ? state : null;
                    case "put":
                        return out(op, value) ? op.input() : null;
                    case "putIfAbsent":
                        return out(op, value) ? (present ? state : op.input()) : null;
                    case "replace":
                        return out(op, value) ? (present ? op.input() : state) : null;
                    case "replaceIf": {
                        Object[] p = pair(op);
                        boolean swapped = present && Objects.equals(value, p[0]);
                        return out(op, swapped) ? (swapped ? p[1] : state) : null;
                    }
                    case "remove":
                        return out(op, value) ? Absent.ABSENT : null;
                    case "removeIf": {
                        boolean removed = present && Objects.equals(value, op.input());
                        return out(op, removed) ? (removed ? Absent.ABSENT : state) : null;
                    }
                    default:
                        throw unknown(name(), op,
                                "get, containsKey, put, putIfAbsent, replace, replaceIf, remove, removeIf");
                }
            }

            @Override
            public String name() {
                return "map-key";
            }
        };
    }

    /** A FIFO queue holding at most {@code capacity} elements. State: an immutable list, head first. */
    public static Model<List<Object>> fifoQueue(int capacity) {
        return new Model<>() {
            @Override
            public List<Object> initial() {
                return List.of();
            }

            @Override
            public List<Object> step(List<Object> state, Operation op) {
                switch (op.f()) {
                    case "offer": {
                        boolean room = state.size() < capacity;
                        return out(op, room) ? (room ? append(state, op.input()) : state) : null;
                    }
                    case "put":
                        return state.size() < capacity ? append(state, op.input()) : null;
                    case "poll": {
                        Object head = state.isEmpty() ? null : state.get(0);
                        return out(op, head) ? (state.isEmpty() ? state : List.copyOf(state.subList(1, state.size()))) : null;
                    }
                    case "take":
                        if (state.isEmpty()) {
                            return null;
                        }
                        return out(op, state.get(0)) ? List.copyOf(state.subList(1, state.size())) : null;
                    default:
                        throw unknown(name(), op, "offer, put, poll, take");
                }
            }

            private List<Object> append(List<Object> state, Object element) {
                List<Object> next = new ArrayList<>(state.size() + 1);
                next.addAll(state);
                next.add(element);
                return next;
            }

            /**
             * Drops indeterminate offers and puts whose element no completed poll or take
             * returned: left out, they never took effect. (Kept, such an element would sit
             * in the queue ahead of everything offered after it, forever; an unknown offer
             * per client and fault is what makes queue histories expensive to search.)
             */
            @Override
            public List<Operation> prune(List<Operation> ops) {
                java.util.Set<Object> taken = new java.util.HashSet<>();
                for (Operation op : ops) {
                    if (!op.indeterminate() && (op.f().equals("poll") || op.f().equals("take"))
                            && op.output() != null) {
                        taken.add(op.output());
                    }
                }
                List<Operation> kept = new ArrayList<>(ops.size());
                for (Operation op : ops) {
                    boolean unseenOffer = op.indeterminate() && (op.f().equals("offer") || op.f().equals("put"))
                            && !taken.contains(op.input());
                    if (!unseenOffer) {
                        kept.add(op);
                    }
                }
                return kept;
            }

            @Override
            public String name() {
                return "fifo-queue";
            }
        };
    }

    /**
     * A lock with fencing tokens: {@code holder} is the token of the holder (0: free,
     * -1: held by an acquire whose outcome is unknown), {@code last} the largest token
     * handed out.
     *
     * <p><b>Note:</b> immutable.
     */
    public record LockState(long holder, long last) {
    }

    /** A mutual-exclusion lock whose acquisitions return growing fencing tokens. */
    public static Model<LockState> lock() {
        return new Model<>() {
            @Override
            public LockState initial() {
                return new LockState(0, 0);
            }

            @Override
            public LockState step(LockState state, Operation op) {
                switch (op.f()) {
                    case "acquire":
                    case "tryAcquire": {
                        if (op.indeterminate()) {
                            return state.holder() == 0 ? new LockState(-1, state.last()) : null;
                        }
                        if (op.output() == null || Boolean.FALSE.equals(op.output())) {
                            return "tryAcquire".equals(op.f()) ? state : null; // a failed try changes nothing
                        }
                        long token = (Long) op.output();
                        return state.holder() == 0 && token > state.last() ? new LockState(token, token) : null;
                    }
                    case "release": {
                        long token = (Long) op.input();
                        if (state.holder() == token) {
                            return new LockState(0, state.last());
                        }
                        if (state.holder() == -1 && token > state.last()) {
                            return new LockState(0, token); // the unknown acquire took effect with this token
                        }
                        return null;
                    }
                    default:
                        throw unknown(name(), op, "acquire, tryAcquire, release");
                }
            }

            @Override
            public String name() {
                return "lock";
            }
        };
    }
}
