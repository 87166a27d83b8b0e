package io.membus.core.replication;

import io.membus.core.error.DsmException;

/**
 * The primary side of one replica group as a target's verb executor sees it: the point
 * past which an answer may leave. A change's answer may leave only when every in-sync
 * copy has the change; a read's answer only when no change it could have observed can
 * still be lost. Both wait for {@link #need()} read <em>after</em> the verb ran: the
 * group publishes a change's sequence before its effect, so a verb that made or saw an
 * effect reads a need at least that effect's sequence.
 *
 * <p>How an executor uses it:
 * <pre>{@code
 * result = table.write(ptr, ...);            // or any verb
 * AckGate g = table.gate(ptr);               // null: not replicated, answer now
 * long need = g == null ? 0 : g.need();
 * if (g == null || g.acked(need)) answer(result);
 * else g.whenAcked(need, failure -> answer(failure == null ? result : failure));  // or g.await(need, deadline)
 * }</pre>
 *
 * <p><b>Note:</b> thread-safe; {@link #need()} and {@link #acked(long)} are wait-free
 * volatile reads.
 */
public interface AckGate {

    /** The sequence of the latest change of the group that may be visible in its memory now. */
    long need();

    /** Whether every in-sync copy has applied every change up to {@code seq}. */
    boolean acked(long seq);

    /**
     * Calls {@code done} exactly once: with {@code null} when {@link #acked(long) acked(seq)}
     * (at once, on this thread, if it already is), or with the typed failure when the group
     * stops being served here before that (fenced by a promotion, closed: a
     * {@link io.membus.core.error.NodeUnavailableException} whose {@code mayHaveRun()} is
     * true, since the change may be on copies). Called on the thread that advanced the
     * acknowledgement or failed the group: it must not block.
     */
    void whenAcked(long seq, Done done);

    /**
     * Blocks until {@link #acked(long) acked(seq)}.
     *
     * @throws DsmException {@link io.membus.core.error.DsmTimeoutException} when {@code deadlineNanos}
     *                      ({@link System#nanoTime()} based) passes first, or the failure
     *                      {@link #whenAcked} would report
     */
    void await(long seq, long deadlineNanos);

    /** The outcome of {@link #whenAcked}. */
    @FunctionalInterface
    interface Done {
        /** @param failure {@code null} when acknowledged */
        void done(DsmException failure);
    }
}
