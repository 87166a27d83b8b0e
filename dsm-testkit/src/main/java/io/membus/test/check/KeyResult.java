package io.membus.test.check;

import io.membus.test.history.Operation;

import java.util.List;

/**
 * The checker's answer for one key: the verdict, how many operations it covered,
 * how many search steps it took, and on a violation an explanation: the longest
 * prefix of operations it could linearize, in linearization order, and the
 * operations it could not place after that prefix.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public record KeyResult(String key, Verdict verdict, int operations, long steps, List<Operation> longestPrefix,
                        List<Operation> stuck, String explanation) {

    public KeyResult {
        longestPrefix = List.copyOf(longestPrefix);
        stuck = List.copyOf(stuck);
    }
}
