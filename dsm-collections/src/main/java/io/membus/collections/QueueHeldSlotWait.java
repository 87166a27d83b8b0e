package io.membus.collections;

import io.membus.core.Backoff;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;

/**
 * One non-blocking {@link DsmQueue} call's wait for a slot a live node holds in a
 * transient phase: short pauses, ended by {@link #boundNanos} from the first pause or by
 * an interrupt, either one with a {@link QueueSlotBusyException} (nothing done; an
 * interrupt's status is kept).
 *
 * <p><b>Note:</b> not thread-safe: one per call, on its thread.
 */
final class QueueHeldSlotWait {
    private final String queue;
    private final String operation;
    private final RemoteMemory memory;
    private Backoff backoff;
    private long since;
    private long ticket;
    private long state;

    QueueHeldSlotWait(String queue, String operation, RemoteMemory memory) {
        this.queue = queue;
        this.operation = operation;
        this.memory = memory;
    }

    /**
     * How long a non-blocking call ({@code poll()}, {@code peek()}, {@code offer(e)}) waits
     * for a slot a live node holds in a transient phase before it gives up with a
     * {@link QueueSlotBusyException}: twice the operation timeout plus
     * {@link OperationDeadline#MARGIN}. A live holder's publishing verbs and its give-back
     * each end by the operation timeout, so a slot still held past this is a claim whose
     * give-back failed, which its holder retries in the background
     * ({@link QueueRecovery#giveBack}) until the slot's node answers.
     */
    static long boundNanos(RemoteMemory memory) {
        return 2 * memory.operationTimeout().toNanos() + OperationDeadline.MARGIN.toNanos();
    }

    /** The held slot the call found (before {@link #pause()}). */
    void saw(long t, long w) {
        ticket = t;
        state = w;
    }

    void pause() {
        QueueCounts.heldPauses.increment();
        if (backoff == null) {
            since = System.nanoTime();
            backoff = new Backoff(Backoff.POLL, since + boundNanos(memory));
        }
        boolean paused;
        try {
            paused = backoff.pauseInterruptibly();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // kept: poll(), peek() and offer(e) do not throw it
            throw busy(true);
        }
        if (!paused) {
            throw busy(false);
        }
    }

    private QueueSlotBusyException busy(boolean interrupted) {
        return new QueueSlotBusyException(queue, operation, ticket, SlotState.toString(state),
                SlotState.node(state), System.nanoTime() - since, interrupted);
    }
}
