package io.membus.core.transport;

/**
 * The completion of an atomic verb with its primitive result: the no-boxing form of
 * {@link Verbs#compareAndSwap(long, long, long, long, LongCompletion)} and
 * {@link Verbs#fetchAndAdd(long, long, long, LongCompletion)}. Called exactly once, with
 * the word's previous value and {@code failure == null}, or with {@code value == 0}
 * and the typed failure (the same exception the future form would complete with).
 *
 * <p><b>Note:</b> called on the thread that completes the verb (the caller for
 * {@code local}/{@code shm}, a transport thread otherwise), in issue order with the
 * connection's other verbs; it must not block. One object may serve many verbs.
 */
@FunctionalInterface
public interface LongCompletion {

    /** The verb finished: {@code failure} is null on success. */
    void completed(long value, Throwable failure);
}
