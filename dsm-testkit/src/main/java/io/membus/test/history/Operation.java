package io.membus.test.history;

import java.util.Objects;

/**
 * One completed operation of a history: who ran it ({@code process}), on which
 * object ({@code key}), what it was ({@code f} and its {@code input}), what it
 * returned ({@code output}, meaningful only when {@link Outcome#OK}), and when it was
 * invoked and completed, in nanoseconds since the history began. An
 * {@link Outcome#INFO} operation's completion time is when its caller gave up; the
 * checker treats it as never completing.
 *
 * <p>Inputs and outputs are plain values ({@code Long}, {@code String},
 * {@code Boolean}, {@code null}, or a {@code java.util.List} of those): they are
 * compared with {@code equals} and written to JSON lines as they are.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public record Operation(int id, int process, String key, String f, Object input, Object output, Outcome outcome,
                        long invokeNanos, long completeNanos) {

    public Operation {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(f, "f");
        Objects.requireNonNull(outcome, "outcome");
        if (completeNanos < invokeNanos) {
            throw new IllegalArgumentException("operation " + id + " completes before it is invoked: invoke="
                    + invokeNanos + ", complete=" + completeNanos);
        }
    }

    /** Whether the operation may or may not have taken effect. */
    public boolean indeterminate() {
        return outcome == Outcome.INFO;
    }

    @Override
    public String toString() {
        return "#" + id + " p" + process + " " + key + " " + f + "(" + input + ")"
                + (outcome == Outcome.OK ? " -> " + output : " " + outcome)
                + " [" + invokeNanos / 1000 + "us.." + (outcome == Outcome.INFO ? "?" : completeNanos / 1000 + "us") + "]";
    }
}
