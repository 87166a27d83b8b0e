package io.membus.collections;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A non-blocking {@link DsmQueue} operation ({@code poll()}, {@code peek()},
 * {@code offer(e)}) waited for a slot that a live node holds in a transient phase (an
 * offer claimed the head slot and has not published it; a consumer or remover has not
 * emptied the slot the tail needs) and gave up: the holder did not finish within the
 * bound ({@link DsmQueue#heldSlotBoundNanos()}: twice the operation timeout plus the
 * deadline margin, past which a live holder's own verbs have failed), or the waiting
 * thread was interrupted (its interrupt status is kept). Nothing was done: no element
 * was taken or enqueued ({@link #mayHaveRun()} is false). Try again later: a holder
 * whose verbs failed gives its claim back by itself once the slot's node answers, and
 * a holder that dies is recovered by the next operation that meets its slot.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public class QueueSlotBusyException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String name;
    private final long ticket;
    private final int holder;
    private final boolean interrupted;

    public QueueSlotBusyException(String name, String operation, long ticket, String state, int holder,
                                  long waitedNanos, boolean interrupted) {
        super(ErrorCode.TIMEOUT, "queue slot busy: name=" + name + ", operation=" + operation + ", ticket=" + ticket
                + ", state=" + state + ", holder=" + holder + ", waitedMs=" + waitedNanos / 1_000_000
                + (interrupted ? ": interrupted while waiting for live node " + holder + " to finish with the slot"
                : ": live node " + holder + " has held the slot past the bound (2 x the operation timeout + margin)")
                + "; nothing was done, try again (a holder whose verbs failed gives the slot back by itself)");
        this.name = name;
        this.ticket = ticket;
        this.holder = holder;
        this.interrupted = interrupted;
    }

    /** Nothing was taken or enqueued. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }

    public String name() {
        return name;
    }

    public long ticket() {
        return ticket;
    }

    /** The node holding the slot. */
    public int holder() {
        return holder;
    }

    /** Whether the wait ended because the thread was interrupted (its interrupt status is kept). */
    public boolean interrupted() {
        return interrupted;
    }
}
