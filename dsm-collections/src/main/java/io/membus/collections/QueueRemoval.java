package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.error.OutcomeUnknownException;

import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.CompletableFuture;

import static io.membus.collections.SlotState.EMPTY;
import static io.membus.collections.SlotState.FULL;
import static io.membus.collections.SlotState.MOVING;

/**
 * A {@link DsmQueue}'s walk over its elements and removal from the middle: the weakly
 * consistent iterator ({@link Itr}: the tickets between a head and a tail read once, in
 * FIFO order) and {@link #removeTicket}, which takes an element out and closes the gap it
 * leaves by moving the elements ahead of it up by one ticket, as
 * {@code ArrayBlockingQueue.removeAt} does.
 *
 * <p><b>Note:</b> thread-safe: one removal at a time per handle (a lock: a dead node's two
 * {@code MOVING} slots must be told apart, {@link QueueRecovery#recoverMoving}); any number
 * of iterators, each used by one thread. Every slot change is one remote CAS; a moved
 * element's data is written before the CAS that publishes it in its new slot (issue order
 * on one connection).
 */
final class QueueRemoval<E> {
    private final QueueRing ring;
    private final RemoteMemory memory;
    private final GlobalAllocator allocator;
    private final QueueClaims<E> claims;
    private final QueueRecovery recovery;
    private final WakeUps wakeUps;
    private final Handle handle;
    /** One removal from the middle at a time per handle (see {@link #removeTicket}). */
    private final Object removals = new Object();

    QueueRemoval(QueueRing ring, GlobalAllocator allocator, QueueClaims<E> claims, QueueRecovery recovery,
                 WakeUps wakeUps, Handle handle) {
        this.ring = ring;
        this.memory = ring.memory;
        this.allocator = allocator;
        this.claims = claims;
        this.recovery = recovery;
        this.wakeUps = wakeUps;
        this.handle = handle;
    }

    private String name() {
        return handle.root().name();
    }

    /** An iterator over the tickets {@code [max(head, tail - capacity), tail)}. */
    Itr iterator(long head, long tail) {
        return new Itr(head, tail);
    }

    /**
     * A weakly consistent iterator over the elements between a head and a tail read when
     * it is made, in ticket (FIFO) order; {@code remove()} takes the last returned element
     * out if it is still queued.
     *
     * <p><b>Note:</b> not thread-safe: one thread uses an iterator.
     */
    final class Itr implements Iterator<E> {
        private long cursor;
        private final long end;
        private E next;
        private long nextTicket = -1;
        private long nextState;
        private long lastTicket = -1;
        private long lastState;

        Itr(long head, long tail) {
            this.cursor = Math.max(head, tail - ring.capacity);
            this.end = tail;
            advance();
        }

        private void advance() {
            next = null;
            while (cursor < end && next == null) {
                long t = cursor++;
                CompletableFuture<byte[]> stateRead = memory.readAsync(ring.statePtr(t), Long.BYTES);
                CompletableFuture<byte[]> dataRead = memory.readAsync(ring.dataPtr(t), ring.slotBytes);
                long w = Words.getLong(memory.await(stateRead), 0);
                byte[] data = memory.await(dataRead);
                if (w == SlotState.of(t, FULL, 0)) {
                    next = claims.readElement(t, w, data);
                    nextTicket = t;
                    nextState = w;
                }
            }
        }

        @Override
        public boolean hasNext() {
            return next != null;
        }

        @Override
        public E next() {
            if (next == null) {
                throw new NoSuchElementException();
            }
            E e = next;
            lastTicket = nextTicket;
            lastState = nextState;
            advance();
            return e;
        }

        @Override
        public void remove() {
            removeLast();
        }

        /** {@link #remove()}; whether the element was still there and this call took it out. */
        boolean removeLast() {
            if (lastTicket < 0) {
                throw new IllegalStateException("next() was not called, or remove() was called already");
            }
            long t = lastTicket;
            lastTicket = -1;
            return removeTicket(t, lastState);
        }
    }

    /**
     * Takes the element of FULL slot {@code t} out and closes the gap it leaves, as
     * {@code ArrayBlockingQueue.removeAt} does: the elements ahead of it (older tickets)
     * move up by one ticket each, from the nearest to the head, so the gap ends at the
     * head, where it is emptied for the ticket a lap later — a removal from the middle
     * costs the ring no room. False when the element was taken already.
     *
     * <p>The remover holds the gap as {@code MOVING(g, me)}. One step: claim the element
     * ahead, {@code FULL(g - 1) -> MOVING(g - 1, me)}, pipelined with the read of its
     * data; write that data into slot {@code g} and CAS {@code MOVING(g) -> FULL(g)},
     * pipelined; the gap is now {@code g - 1}. A claim that fails ends the walk (the
     * element ahead was taken by a consumer, or the gap is at the head): the gap becomes
     * {@code EMPTY(g + capacity)}. Consumers and {@code peek} wait for a {@code MOVING}
     * slot at the head as for an offer being written (the element in it is on its way
     * one ticket up, the element behind it must not be taken first); a producer a lap
     * later waits as for a consumer. One remover per handle at a time (a dead node's two
     * {@code MOVING} slots must be told apart: {@link QueueRecovery#recoverMoving}). Costs two round
     * trips per element moved: {@code remove(o)} is linear, as in {@code ArrayBlockingQueue}.
     */
    boolean removeTicket(long t, long full) {
        synchronized (removals) {
            long gap = SlotState.of(t, MOVING, ring.self);
            recovery.enter(t);
            // a MOVING slot is waited for where it is: a failed claim is put back in place
            QueueClaims.Claimed c = claims.claim(t, full, gap, full);
            if (c.witness() != full) {
                recovery.leave(t);
                return false;
            }
            // linearized: the element is out. Its large block is freed once the gap is closed.
            BlockRef block = null;
            try {
                block = QueueRing.largeBlock(memory.await(c.data()));
                closeGap(t);
            } finally {
                recovery.wakeAll();
            }
            if (block != null) {
                allocator.free(block);
            }
            return true;
        }
    }

    /**
     * Moves the elements ahead of gap {@code g} (held MOVING by this handle) up, then
     * empties the gap. When a verb fails, the slots this handle holds are left to
     * {@link QueueRecovery#recoverMoving} at once (best effort; a slot of this node that no operation
     * holds counts as dead, so this node's next operation that meets it recovers it too).
     */
    private void closeGap(long g) {
        long ahead = -1;
        try {
            while (g > 0) {
                long x = g - 1;
                long full = SlotState.of(x, FULL, 0);
                recovery.enter(x);
                ahead = x;
                CompletableFuture<Long> cas = memory.compareAndSwapAsync(ring.statePtr(x), full,
                        SlotState.of(x, MOVING, ring.self));
                CompletableFuture<byte[]> data = memory.readAsync(ring.dataPtr(x), ring.slotBytes);
                if (memory.await(cas) != full) {
                    ahead = -1;
                    recovery.leave(x);
                    break; // taken, being taken, or no element: the gap is at the head
                }
                byte[] bytes = memory.await(data);
                long mine = SlotState.of(g, MOVING, ring.self);
                CompletableFuture<Void> write = memory.writeAsync(ring.dataPtr(g), bytes);
                CompletableFuture<Long> publish = memory.compareAndSwapAsync(ring.statePtr(g), mine,
                        SlotState.of(g, FULL, 0));
                memory.await(write);
                long p = memory.await(publish);
                if (p != mine) {
                    recovery.leave(g);
                    throw new SlotLostException(name(), g, "remover", SlotState.toString(p));
                }
                recovery.leave(g);
                wakeUps.notifyAfter(ring.takeWaitersPtr);
                g = x;
                ahead = -1;
            }
            long mine = SlotState.of(g, MOVING, ring.self);
            long w = memory.compareAndSwap(ring.statePtr(g), mine, SlotState.of(g + ring.capacity, EMPTY, 0));
            recovery.leave(g);
            if (w != mine) {
                throw new SlotLostException(name(), g, "remover", SlotState.toString(w));
            }
        } catch (SlotLostException e) {
            if (ahead >= 0) {
                recovery.leave(ahead);
                recovery.recoverOwn(ahead, e);
            }
            throw e;
        } catch (RuntimeException e) {
            recovery.leave(g);
            if (ahead >= 0) {
                recovery.leave(ahead);
                recovery.recoverOwn(ahead, e);
            }
            recovery.recoverOwn(g, e);
            // the element asked for was taken out (linearized at the claim); closing its gap failed
            throw new OutcomeUnknownException("remove", "queue " + name() + " ticket " + g, e);
        }
    }
}
