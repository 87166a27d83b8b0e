package io.membus.test.check;

import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * The checker's answer for a whole history: the verdict of every key, and the
 * history's verdict ({@link Verdict#VIOLATION} if any key has one, else
 * {@link Verdict#UNKNOWN} if any key ran out of budget, else
 * {@link Verdict#LINEARIZABLE}).
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public record CheckResult(Verdict verdict, Map<String, KeyResult> keys) {

    public CheckResult {
        keys = Map.copyOf(keys);
    }

    static CheckResult of(Map<String, KeyResult> keys) {
        Verdict v = Verdict.LINEARIZABLE;
        for (KeyResult k : keys.values()) {
            if (k.verdict() == Verdict.VIOLATION) {
                v = Verdict.VIOLATION;
                break;
            }
            if (k.verdict() == Verdict.UNKNOWN) {
                v = Verdict.UNKNOWN;
            }
        }
        return new CheckResult(v, keys);
    }

    public boolean linearizable() {
        return verdict == Verdict.LINEARIZABLE;
    }

    /** The keys with this verdict, sorted. */
    public List<String> keysWith(Verdict verdict) {
        return keys.values().stream().filter(k -> k.verdict() == verdict).map(KeyResult::key).sorted()
                .collect(Collectors.toList());
    }

    /** A few lines for a log or a report: the verdict, counts per verdict, and each violation's explanation. */
    public String summary() {
        StringBuilder sb = new StringBuilder();
        sb.append("verdict=").append(verdict).append(", keys=").append(keys.size())
                .append(", linearizable=").append(keysWith(Verdict.LINEARIZABLE).size())
                .append(", violations=").append(keysWith(Verdict.VIOLATION).size())
                .append(", unknown=").append(keysWith(Verdict.UNKNOWN).size()).append('\n');
        for (String k : keysWith(Verdict.VIOLATION)) {
            sb.append("  key ").append(k).append(": ").append(keys.get(k).explanation()).append('\n');
        }
        for (String k : keysWith(Verdict.UNKNOWN)) {
            sb.append("  key ").append(k).append(": ").append(keys.get(k).explanation()).append('\n');
        }
        return sb.toString();
    }
}
