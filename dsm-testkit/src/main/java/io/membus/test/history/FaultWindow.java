package io.membus.test.history;

/**
 * A fault the nemesis held over part of a run: its kind ({@code partition},
 * {@code kill}, {@code pause}, {@code delay}, {@code drop}, {@code skew}), what it hit,
 * and when it started and ended, in nanoseconds since the history began. Reports
 * shade these windows.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public record FaultWindow(String kind, String targets, long startNanos, long endNanos) {
}
