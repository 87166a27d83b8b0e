package io.membus.collections;

/**
 * The state word of a {@link DsmQueue} slot (layout in {@link QueueDescriptor}):
 * which ticket the slot serves and in which phase it is, and the node that holds
 * it in the two transient phases.
 *
 * <pre>
 *   EMPTY(t)          waits for the producer of ticket t
 *   WRITING(t, node)  claimed by that producer, data being written
 *   FULL(t)           holds the element of ticket t
 *   READING(t, node)  claimed by that consumer, data being read
 *   then EMPTY(t + capacity)
 *   MOVING(t, node)   held by a remover compacting the ring (QueueRemoval#removeTicket): the
 *                     element of ticket t being moved to ticket t + 1, or the hole it left
 * </pre>
 * Every transition is one CAS.
 *
 * <p><b>Note:</b> constants and pure functions; thread-safe.
 */
final class SlotState {
    static final int EMPTY = 0;
    static final int WRITING = 1;
    static final int FULL = 2;
    static final int READING = 3;
    static final int MOVING = 4;
    static final int TICKET_SHIFT = 19;
    static final int PHASE_SHIFT = 16;
    static final long MAX_TICKET = (1L << (64 - TICKET_SHIFT)) - 1;

    private SlotState() {
    }

    static long of(long ticket, int phase, int node) {
        return (ticket << TICKET_SHIFT) | ((long) phase << PHASE_SHIFT) | (node & 0xFFFFL);
    }

    static long ticket(long state) {
        return state >>> TICKET_SHIFT;
    }

    static int phase(long state) {
        return (int) ((state >>> PHASE_SHIFT) & 7);
    }

    static int node(long state) {
        return (int) (state & 0xFFFF);
    }

    static String toString(long state) {
        String[] names = {"EMPTY", "WRITING", "FULL", "READING", "MOVING"};
        int p = phase(state);
        return (p < names.length ? names[p] : "phase" + p) + "(" + ticket(state)
                + (p == WRITING || p == READING || p == MOVING ? ", node=" + node(state) : "") + ")";
    }
}
