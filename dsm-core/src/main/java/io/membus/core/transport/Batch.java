package io.membus.core.transport;

import io.membus.core.time.Deadlines;

/**
 * Verbs posted together: nothing leaves until {@link #submit()}, then all of them
 * go in one flush (one doorbell, one syscall), in the order they were added. The
 * futures returned by the verb methods complete as the verbs complete, in order.
 * Deadlines start at {@link #submit()}.
 *
 * <p>A batch that is never submitted posts nothing; its futures never complete.
 *
 * <p><b>Note:</b> not thread-safe: one thread fills and submits a batch. A batch is
 * submitted at most once.
 */
public interface Batch extends Verbs {

    /** Posts every verb added so far, in order. */
    void submit();

    /** Verbs added and not yet submitted. */
    int size();
}
