package io.membus.collections;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A {@link DsmQueue} operation found that the slot it had claimed was recovered
 * by another node meanwhile: this node was taken for dead (not a live member, or
 * fenced) while it was filling or emptying the slot. A producer's element was
 * then not enqueued; a consumer's element is delivered again to another consumer
 * (so this consumer must not use it, and does not get it).
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public class SlotLostException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String name;
    private final long ticket;

    public SlotLostException(String name, long ticket, String role, String found) {
        super(ErrorCode.NODE_UNAVAILABLE, "queue slot lost: name=" + name + ", ticket=" + ticket + ", role=" + role
                + ", found=" + found + ": this node was taken for dead and its slot recovered; "
                + ("producer".equals(role) ? "the element was not enqueued, offer it again"
                : "the element goes to another consumer"));
        this.name = name;
        this.ticket = ticket;
    }

    /** The operation did not happen: the element was not enqueued, or not taken. */
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
}
