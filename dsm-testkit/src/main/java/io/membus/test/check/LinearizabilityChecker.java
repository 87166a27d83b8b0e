package io.membus.test.check;

import io.membus.core.error.DsmConfigException;
import io.membus.test.history.History;
import io.membus.test.history.Operation;
import io.membus.test.history.Outcome;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;

/**
 * Decides whether a history is linearizable with respect to a {@link Model}: the
 * Wing &amp; Gong search with Lowe's memoisation, as Porcupine runs it. The
 * operations of each key are checked on their own (linearizability is
 * compositional), as a doubly linked list of call and return entries in real-time
 * order; the search linearizes the earliest call it can, backtracks when it meets
 * the return of an operation it has not placed, and never explores a (set of
 * linearized operations, model state) pair twice.
 *
 * <ul>
 *   <li>{@link Outcome#FAIL} operations are left out: they did not take effect.</li>
 *   <li>{@link Outcome#INFO} (indeterminate) operations never return: they may take
 *       effect at any point after their invocation, with any output, or never. The
 *       search succeeds once every determinate operation is placed. Indeterminate
 *       operations with the same function and input are interchangeable, so the search
 *       places them in invocation order only: k pending twins cost k + 1 subsets, not
 *       2^k (what keeps a counter or a queue with many timed-out operations decidable).
 *       A model may also {@linkplain Model#prune prune} indeterminate operations no one
 *       could have observed (a queue's unknown offers whose element nobody took): the
 *       pruned history is searched first, and only a LINEARIZABLE verdict of it is
 *       taken; any other verdict is decided on the whole history.</li>
 *   <li>A call and a return at the same instant are ordered call first (the two
 *       operations count as concurrent).</li>
 *   <li>The search is bounded: past {@code maxStepsPerKey} steps, past four million
 *       memoised states, or past the time budget for the whole history, a key's verdict
 *       is {@link Verdict#UNKNOWN}, never a hang, never an out-of-memory error and never
 *       a guess.</li>
 * </ul>
 *
 * <p><b>Note:</b> immutable and thread-safe; each {@code check} call uses only its own
 * state.
 */
public final class LinearizabilityChecker {
    private static final int HEAD = 0;
    private final long maxStepsPerKey;
    private final Duration timeBudget;
    /** Explored (set, state) pairs kept per key before the verdict is UNKNOWN: bounds the checker's memory. */
    private final int maxCacheEntries;

    /**
     * @param maxStepsPerKey search steps allowed per key before its verdict is UNKNOWN
     * @param timeBudget     time allowed for a whole history; keys not finished by then are UNKNOWN
     */
    public LinearizabilityChecker(long maxStepsPerKey, Duration timeBudget) {
        if (maxStepsPerKey <= 0) {
            throw new DsmConfigException("checker maxStepsPerKey", maxStepsPerKey, "1 or more search steps");
        }
        if (timeBudget.isNegative() || timeBudget.isZero()) {
            throw new DsmConfigException("checker timeBudget", timeBudget, "a positive duration");
        }
        this.maxStepsPerKey = maxStepsPerKey;
        this.timeBudget = timeBudget;
        this.maxCacheEntries = 4_000_000;
    }

    /** 20 million steps per key, one minute per history. */
    public LinearizabilityChecker() {
        this(20_000_000L, Duration.ofMinutes(1));
    }

    /** Checks every key of {@code history} against the same model. */
    public <S> CheckResult check(History history, Model<S> model) {
        return check(history, key -> model);
    }

    /** Checks every key of {@code history} against the model {@code models} gives for it. */
    public CheckResult check(History history, Function<String, Model<?>> models) {
        long deadline = System.nanoTime() + timeBudget.toNanos();
        Map<String, KeyResult> results = new LinkedHashMap<>();
        for (Map.Entry<String, List<Operation>> e : history.byKey().entrySet()) {
            Model<?> model = Objects.requireNonNull(models.apply(e.getKey()), "no model for key " + e.getKey());
            results.put(e.getKey(), checkKey(e.getKey(), e.getValue(), model, deadline));
        }
        return CheckResult.of(results);
    }

    /** Checks one object's operations. */
    public <S> KeyResult checkKey(String key, List<Operation> operations, Model<S> model) {
        return checkKey(key, operations, model, System.nanoTime() + timeBudget.toNanos());
    }

    private <S> KeyResult checkKey(String key, List<Operation> all, Model<S> model, long deadline) {
        List<Operation> ops = new ArrayList<>();
        for (Operation op : all) {
            if (op.outcome() != Outcome.FAIL) {
                ops.add(op);
            }
        }
        List<Operation> pruned = model.prune(ops);
        if (pruned.size() < ops.size()) {
            KeyResult first = new Search<>(key, pruned, model, deadline).run();
            if (first.verdict() == Verdict.LINEARIZABLE) {
                // the pruned operations never took effect: a linearization of the whole history
                return new KeyResult(key, Verdict.LINEARIZABLE, ops.size(), first.steps(), first.longestPrefix(),
                        first.stuck(), first.explanation());
            }
            // any other verdict is decided on the whole history (pruning must never make a violation)
            KeyResult whole = new Search<>(key, ops, model, deadline).run();
            return new KeyResult(key, whole.verdict(), whole.operations(), first.steps() + whole.steps(),
                    whole.longestPrefix(), whole.stuck(), whole.explanation());
        }
        return new Search<>(key, ops, model, deadline).run();
    }

    /** One key's search; single use. */
    private final class Search<S> {
        private final String key;
        private final List<Operation> ops;
        private final Model<S> model;
        private final long deadline;
        // entries 1..2n; 0 is the list head
        private final int[] next;
        private final int[] prev;
        private final int[] opOf;
        private final boolean[] isCall;
        private final int[] returnOf;
        /** Zobrist hash of the set of linearized operations: two independent 64-bit halves. */
        private long setHashA;
        private long setHashB;
        private final long[] zobristA;
        private final long[] zobristB;
        private final Set<CacheKey> seen = new HashSet<>();
        /** The latest indeterminate twin invoked before each indeterminate operation, or -1 ({@link #waitsForTwin}). */
        private final int[] twinBefore;
        private final boolean[] linearized;
        private final int[] stackEntry;
        private final Object[] stackState;
        private int depth;
        private final int[] best;
        private int bestValid;
        private int maxDepth;
        private int stuckOp = -1;
        private S stuckState;

        Search(String key, List<Operation> ops, Model<S> model, long deadline) {
            this.key = key;
            this.ops = ops;
            this.model = model;
            this.deadline = deadline;
            int n = ops.size();
            int entries = 2 * n;
            long[][] order = new long[entries][];
            for (int i = 0; i < n; i++) {
                Operation op = ops.get(i);
                long ret = op.indeterminate() ? Long.MAX_VALUE : op.completeNanos();
                order[2 * i] = new long[] {op.invokeNanos(), 0, i};
                order[2 * i + 1] = new long[] {ret, 1, i};
            }
            Arrays.sort(order, Comparator.<long[]>comparingLong(a -> a[0]).thenComparingLong(a -> a[1])
                    .thenComparingLong(a -> a[2]));
            next = new int[entries + 2];
            prev = new int[entries + 2];
            opOf = new int[entries + 2];
            isCall = new boolean[entries + 2];
            returnOf = new int[n];
            int[] callOf = new int[n];
            for (int k = 0; k < entries; k++) {
                int e = k + 1;
                opOf[e] = (int) order[k][2];
                isCall[e] = order[k][1] == 0;
                if (isCall[e]) {
                    callOf[opOf[e]] = e;
                } else {
                    returnOf[opOf[e]] = e;
                }
                prev[e] = e - 1;
                next[e] = k + 1 < entries ? e + 1 : -1;
            }
            next[HEAD] = entries > 0 ? 1 : -1;
            zobristA = new long[n];
            zobristB = new long[n];
            java.util.SplittableRandom z = new java.util.SplittableRandom(0x6d656d627573L ^ n);
            for (int i = 0; i < n; i++) {
                zobristA[i] = z.nextLong();
                zobristB[i] = z.nextLong();
            }
            twinBefore = new int[n];
            linearized = new boolean[n];
            Map<List<Object>, Integer> lastTwin = new java.util.HashMap<>();
            for (int k = 0; k < entries; k++) {
                int i = (int) order[k][2];
                if (order[k][1] == 0) {
                    twinBefore[i] = -1;
                    Operation op = ops.get(i);
                    if (op.indeterminate()) {
                        Integer before = lastTwin.put(java.util.Arrays.asList(op.f(), op.input()), i);
                        twinBefore[i] = before == null ? -1 : before;
                    }
                }
            }
            stackEntry = new int[n];
            stackState = new Object[n];
            best = new int[n];
        }

        KeyResult run() {
            S state = model.initial();
            int entry = next[HEAD];
            long steps = 0;
            while (next[HEAD] != -1) {
                if (seen.size() > maxCacheEntries) {
                    return result(Verdict.UNKNOWN, steps, "search memory budget exhausted: " + seen.size()
                            + " explored states (" + ops.size() + " operations); check shorter histories per key");
                }
                if (++steps > maxStepsPerKey || ((steps & 0xfff) == 0 && System.nanoTime() - deadline > 0)) {
                    return result(Verdict.UNKNOWN, steps, "search budget exhausted after " + steps
                            + " steps (" + ops.size() + " operations); raise the budget or check a shorter history");
                }
                if (isCall[entry]) {
                    int op = opOf[entry];
                    if (waitsForTwin(op)) {
                        entry = next[entry];
                        continue;
                    }
                    S after = model.step(state, ops.get(op));
                    if (after != null) {
                        toggle(op);
                        if (seen.add(new CacheKey(setHashA, setHashB, after))) {
                            stackEntry[depth] = entry;
                            stackState[depth] = state;
                            depth++;
                            if (depth > maxDepth) {
                                System.arraycopy(stackEntry, bestValid, best, bestValid, depth - bestValid);
                                bestValid = depth;
                                maxDepth = depth;
                                stuckOp = -1;
                            }
                            state = after;
                            lift(entry);
                            entry = next[HEAD];
                            continue;
                        }
                        toggle(op);
                    }
                    entry = next[entry];
                } else {
                    int op = opOf[entry];
                    if (ops.get(op).indeterminate()) {
                        return result(Verdict.LINEARIZABLE, steps, "");
                    }
                    if (depth == maxDepth && bestValid == maxDepth && stuckOp < 0) {
                        stuckOp = op;
                        stuckState = state;
                    }
                    if (depth == 0) {
                        return violation(steps);
                    }
                    depth--;
                    if (depth < bestValid) {
                        bestValid = depth;
                    }
                    int e = stackEntry[depth];
                    @SuppressWarnings("unchecked")
                    S previous = (S) stackState[depth];
                    stackState[depth] = null;
                    state = previous;
                    toggle(opOf[e]);
                    unlift(e);
                    entry = next[e];
                }
            }
            return result(Verdict.LINEARIZABLE, steps, "");
        }

        private KeyResult violation(long steps) {
            List<Operation> prefix = prefix();
            Operation stuck = stuckOp >= 0 ? ops.get(stuckOp) : null;
            StringBuilder why = new StringBuilder("not linearizable (model ").append(model.name()).append("): ");
            if (prefix.isEmpty()) {
                why.append("no operation can come first");
            } else {
                why.append("after the longest linearizable prefix of ").append(prefix.size())
                        .append(" operations (last: ").append(prefix.get(prefix.size() - 1)).append(")");
            }
            if (stuck != null) {
                why.append(", model state ").append(stuckState).append(", operation ").append(stuck)
                        .append(" cannot be placed: no order of the operations concurrent with it explains its output");
            }
            return new KeyResult(key, Verdict.VIOLATION, ops.size(), steps, prefix,
                    stuck == null ? List.of() : List.of(stuck), why.toString());
        }

        private List<Operation> prefix() {
            List<Operation> prefix = new ArrayList<>(maxDepth);
            for (int i = 0; i < maxDepth; i++) {
                prefix.add(ops.get(opOf[best[i]]));
            }
            return prefix;
        }

        private KeyResult result(Verdict verdict, long steps, String explanation) {
            return new KeyResult(key, verdict, ops.size(), steps, verdict == Verdict.UNKNOWN ? prefix() : List.of(),
                    List.of(), explanation);
        }

        /** Adds or removes {@code op} from the linearized set (XOR: the same either way). */
        private void toggle(int op) {
            setHashA ^= zobristA[op];
            setHashB ^= zobristB[op];
            linearized[op] = !linearized[op];
        }

        /**
         * Whether {@code op} is an indeterminate operation with an earlier-invoked twin
         * (same function, equal input, also indeterminate) that is not linearized yet.
         * Such twins are interchangeable: neither returns, their outputs are unknown, so
         * any linearization that places some of them can place the earliest-invoked ones
         * at the same positions instead (the k-th earliest twin is invoked no later than
         * the k-th placed one). The search therefore places twins only in invocation
         * order, which turns 2^k subsets of k pending twins into k + 1.
         */
        private boolean waitsForTwin(int op) {
            int twin = twinBefore[op];
            return twin >= 0 && !linearized[twin];
        }

        /** Takes a call entry and its return out of the list. */
        private void lift(int call) {
            remove(call);
            remove(returnOf[opOf[call]]);
        }

        /** Puts them back, in the reverse order. */
        private void unlift(int call) {
            restore(returnOf[opOf[call]]);
            restore(call);
        }

        private void remove(int e) {
            next[prev[e]] = next[e];
            if (next[e] != -1) {
                prev[next[e]] = prev[e];
            }
        }

        private void restore(int e) {
            next[prev[e]] = e;
            if (next[e] != -1) {
                prev[next[e]] = e;
            }
        }
    }

    /**
     * A memo entry: which operations are linearized (a 128-bit Zobrist hash of the set,
     * so an entry costs the same for a history of ten operations or of a million), and the
     * model's state after them. Two different sets share a hash with probability about
     * entries² / 2¹²⁹; a shared hash would make the search skip a branch, i.e. could only
     * turn a linearizable history into a reported violation, never hide one.
     */
    private static final class CacheKey {
        private final long a;
        private final long b;
        private final Object state;
        private final int hash;

        CacheKey(long a, long b, Object state) {
            this.a = a;
            this.b = b;
            this.state = state;
            this.hash = Long.hashCode(a * 31 + b) * 31 + Objects.hashCode(state);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof CacheKey k && a == k.a && b == k.b && Objects.equals(state, k.state);
        }

        @Override
        public int hashCode() {
            return hash;
        }
    }
}
