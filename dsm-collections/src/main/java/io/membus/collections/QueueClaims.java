package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.UseAfterFreeException;
import io.membus.codec.Codec;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.error.DsmException;
import io.membus.core.error.OutcomeUnknownException;

import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;

import static io.membus.collections.QueueDescriptor.LENGTH_FIELD;
import static io.membus.collections.QueueDescriptor.PAYLOAD_FIELD;
import static io.membus.collections.SlotState.EMPTY;
import static io.membus.collections.SlotState.FULL;
import static io.membus.collections.SlotState.MOVING;
import static io.membus.collections.SlotState.READING;
import static io.membus.collections.SlotState.WRITING;

/**
 * The claim protocol of a {@link DsmQueue}: one pass of an offer ({@code EMPTY(t) ->
 * WRITING(t, me)}, then the data write and {@code WRITING -> FULL(t)} pipelined), of a poll
 * ({@code FULL(t) -> READING(t, me)} pipelined with the data read, then {@code READING ->
 * EMPTY(t + capacity)}), of a peek, and the take-over of elements stranded by dead
 * consumers; the head and tail hints. A pass says what it found (an element, none, a full
 * ring, or a slot a live node holds, for the caller to wait on); the waiting is the
 * caller's ({@link DsmQueue}, {@link QueueHeldSlotWait}, {@link Waiting}). Slots held by
 * the dead, and claims whose verbs failed, go to {@link QueueRecovery}.
 *
 * <p>The threads of one handle do not race each other for a ticket: a claim CAS in flight
 * is registered by ticket, and another thread that wants that ticket waits for its answer
 * and moves on when it says the ticket is claimed ({@link #share}; issue 28, counted in
 * {@link QueueCounts}).
 *
 * <p><b>Note:</b> thread-safe: the hints are atomics (only raised, or reset from the
 * remote word), the claims in flight a concurrent map of futures (each completed once, by
 * its claimer, before any further verb or hook; completion publishes the answer to the
 * waiters), every slot change is one remote CAS on its state word. Memory ordering:
 * a publish's data write is issued before its CAS on one connection (executed in issue
 * order), a poll's data read after its claim CAS; so a consumer that claimed {@code FULL(t)}
 * reads the data that producer wrote, and the producer's actions before its offer
 * happen-before the consumer's after its take.
 */
final class QueueClaims<E> {
    /** How often a handle may look for elements stranded by dead consumers. */
    static final long STRANDED_SCAN_NANOS = 100_000_000L;
    static final int OFFERED = 0;
    static final int FULL_NOW = 1;
    /** The slot is being emptied by a live consumer: room in a moment. */
    static final int BUSY = 2;
    /** What {@link #tryPoll} returns when the head's offer is still being written by a live producer. */
    static final Object WRITING_NOW = new Object();

    private final QueueRing ring;
    private final RemoteMemory memory;
    private final GlobalAllocator allocator;
    private final Codec<E> codec;
    private final QueueElements<E> elements;
    private final QueueRecovery recovery;
    private final WakeUps wakeUps;
    private final Handle handle;
    /** Tests only: the hook run right after a claim succeeded ({@code DsmQueue.afterClaim}). */
    private final Supplier<Runnable> afterClaim;
    private final int capacity;
    private final AtomicLong lastStrandedScan = new AtomicLong(System.nanoTime() - STRANDED_SCAN_NANOS);
    private final AtomicLong headHint = new AtomicLong();
    private final AtomicLong tailHint = new AtomicLong();
    /**
     * The offers' claim CASes this handle has in flight, by ticket, each with its answer:
     * true when the ticket turned out claimed (by that CAS or before it). A thread of this
     * handle about to claim a ticket another one is claiming waits for that answer instead
     * of sending a CAS that would lose to it (issue 28: at 8 threads sharing one handle,
     * 1.2 of every offer's 2.2 claim CASes and 3.2 of every poll's 4.2 were lost, each a
     * round trip on a loaded connection and node).
     */
    private final ConcurrentHashMap<Long, CompletableFuture<Boolean>> offering = new ConcurrentHashMap<>();
    /** The polls' claim CASes this handle has in flight, as {@link #offering}. */
    private final ConcurrentHashMap<Long, CompletableFuture<Boolean>> polling = new ConcurrentHashMap<>();

    QueueClaims(QueueRing ring, GlobalAllocator allocator, Codec<E> codec, QueueElements<E> elements,
                QueueRecovery recovery, WakeUps wakeUps, Handle handle, Supplier<Runnable> afterClaim) {
        this.ring = ring;
        this.memory = ring.memory;
        this.allocator = allocator;
        this.codec = codec;
        this.elements = elements;
        this.recovery = recovery;
        this.wakeUps = wakeUps;
        this.handle = handle;
        this.afterClaim = afterClaim;
        this.capacity = ring.capacity;
        headHint.set(memory.readLong(ring.headPtr));
        tailHint.set(memory.readLong(ring.tailPtr));
    }

    private String name() {
        return handle.root().name();
    }

    private void claimed() {
        Runnable hook = afterClaim.get();
        if (hook != null) {
            hook.run();
        }
    }

    // ------------------------------------------------------------------ producers

    /**
     * One pass: puts {@code p} in the slot of the tail's ticket: OFFERED, FULL_NOW or BUSY
     * (the slot's state noted in {@code held}, when given).
     */
    int tryOffer(QueueElements.Prepared p, QueueHeldSlotWait held) {
        handle.check();
        long t = tailHint.get();
        boolean lapped = false;
        while (true) {
            t = Math.max(t, tailHint.get()); // every ticket below the hint is claimed
            checkTicket(t);
            CompletableFuture<Boolean> answer = share(offering, t);
            if (answer == null) {
                QueueCounts.offerShared.increment();
                t = next(t, tailHint, false, ring.tailPtr, QueueCounts.tailReads);
                continue;
            }
            long empty = SlotState.of(t, EMPTY, 0);
            long mine = SlotState.of(t, WRITING, ring.self);
            recovery.enter(t);
            long w;
            QueueCounts.offerClaims.increment();
            try {
                w = memory.compareAndSwap(ring.statePtr(t), empty, mine);
                settle(offering, t, answer, w == empty || SlotState.ticket(w) >= t);
            } catch (RuntimeException e) {
                settle(offering, t, answer, false); // the waiters claim for themselves now, not after the give-back
                recovery.unclaim(t, empty, mine, SlotState.of(t + capacity, EMPTY, 0), null, e);
                recovery.leave(t);
                throw e;
            } finally {
                settle(offering, t, answer, false); // nothing when settled above
            }
            if (w == empty) {
                claimed();
                helpAdvance(ring.tailPtr, t);
                tailHint.accumulateAndGet(t + 1, Math::max);
                publish(t, mine, p);
                QueueCounts.offered.increment();
                return OFFERED;
            }
            recovery.leave(t);
            long st = SlotState.ticket(w);
            int phase = SlotState.phase(w);
            if (st >= t) {
                // ticket t is claimed (or long done): move on, from the tail word when the hint is a lap behind
                QueueCounts.offerLost.increment();
                helpAdvance(ring.tailPtr, t);
                boolean lap = st >= t + capacity;
                t = next(t, tailHint, lap && lapped, ring.tailPtr, QueueCounts.tailReads);
                lapped |= lap;
                continue;
            }
            // the slot still serves an earlier lap
            if ((phase == WRITING || phase == READING || phase == MOVING) && recovery.holderDead(w)) {
                recovery.recover(w);
                continue;
            }
            if (phase == EMPTY) {
                // a hint ahead of the ring (not reachable by the invariants): re-read the tail word
                tailHint.set(readHint(ring.tailPtr, QueueCounts.tailReads));
            }
            // a consumer that claimed the element a lap earlier has taken it (linearized): wait for its room
            if (phase == READING || phase == MOVING) {
                if (held != null) {
                    held.saw(t, w);
                }
                QueueCounts.offerBusy.increment();
                return BUSY;
            }
            return FULL_NOW;
        }
    }

    /** Writes the data and publishes FULL(t), pipelined; gives the ticket up when that fails. */
    private void publish(long t, long mine, QueueElements.Prepared p) {
        CompletableFuture<Long> cas = null;
        try {
            CompletableFuture<Void> write = memory.writeAsync(ring.dataPtr(t), p.data);
            cas = memory.compareAndSwapAsync(ring.statePtr(t), mine, SlotState.of(t, FULL, 0));
            // the takers' waiters word, read after the publishing CAS (one connection: issue order) in the same
            // round trip; a publish that fails only wakes them for nothing
            wakeUps.notifyAfter(ring.takeWaitersPtr);
            memory.await(write);
            long w = memory.await(cas);
            if (w != mine) {
                SlotLostException lost = new SlotLostException(name(), t, "producer", SlotState.toString(w));
                elements.discard(p, lost);
                throw lost;
            }
            p.settled = true; // the ring holds it now
        } catch (SlotLostException e) {
            throw e;
        } catch (RuntimeException e) {
            recovery.giveBack(t, mine, SlotState.of(t + capacity, EMPTY, 0), p, e);
            throw publishFailure(cas, e);
        } finally {
            recovery.leave(t);
        }
    }

    /**
     * What a failed publish throws. The offer takes effect at its publishing CAS: when
     * that CAS certainly did not run (refused before it was sent), nothing was enqueued
     * and its failure is rethrown as it is ({@code mayHaveRun() == false}); otherwise
     * the offer's outcome is unknown.
     */
    private RuntimeException publishFailure(CompletableFuture<Long> cas, RuntimeException failure) {
        if (cas != null && cas.isCompletedExceptionally()) {
            Throwable c = cas.handle((v, x) -> x).join();
            c = c instanceof java.util.concurrent.CompletionException && c.getCause() != null ? c.getCause() : c;
            if (c instanceof DsmException d && !d.mayHaveRun()) {
                if (failure.getCause() == d || failure == d) {
                    return failure; // the publishing CAS's own failure, as await rethrew it
                }
                DsmException copy = d.forCaller();
                copy.addSuppressed(failure);
                return copy;
            }
        }
        return new OutcomeUnknownException("offer", "queue " + name() + " ticket", failure);
    }

    // ------------------------------------------------------------------ consumers

    /**
     * One pass: the element at the head; null when there is none now; {@link #WRITING_NOW}
     * (the head slot's state noted in {@code held}, when given).
     */
    Object tryPoll(QueueHeldSlotWait held) {
        handle.check();
        long t = headHint.get();
        boolean lapped = false;
        while (true) {
            t = Math.max(t, headHint.get()); // every ticket below the hint is claimed
            CompletableFuture<Boolean> answer = share(polling, t);
            if (answer == null) {
                QueueCounts.pollShared.increment();
                t = next(t, headHint, false, ring.headPtr, QueueCounts.headReads);
                continue;
            }
            long full = SlotState.of(t, FULL, 0);
            long mine = SlotState.of(t, READING, ring.self);
            recovery.enter(t);
            QueueCounts.pollClaims.increment();
            Claimed c;
            try {
                long ticket = t;
                c = claim(t, full, mine, SlotState.of(t + capacity, FULL, 0), () -> settle(polling, ticket, answer, false));
                settle(polling, t, answer, c.witness() == full || takenOrPassed(t, c.witness()));
            } finally {
                settle(polling, t, answer, false); // nothing when settled above
            }
            long w = c.witness();
            if (w == full) {
                claimed();
                helpAdvance(ring.headPtr, t);
                headHint.accumulateAndGet(t + 1, Math::max);
                E e = consume(t, mine, c.data());
                QueueCounts.polled.increment();
                return e;
            }
            recovery.leave(t);
            long st = SlotState.ticket(w);
            int phase = SlotState.phase(w);
            if (st == t && phase == EMPTY) {
                QueueCounts.pollEmpty.increment();
                return takeStranded();
            }
            if (st == t && (phase == WRITING || phase == MOVING)) {
                if (recovery.holderDead(w)) {
                    recovery.recover(w);
                    continue;
                }
                // its offer has claimed the head, or a remover is moving the head element up
                // by one ticket (or emptying the hole it left): it comes first, in a moment
                if (held != null) {
                    held.saw(t, w);
                }
                QueueCounts.pollWriting.increment();
                return WRITING_NOW;
            }
            if (st >= t) {
                QueueCounts.pollLost.increment();
                helpAdvance(ring.headPtr, t);
                boolean lap = st >= t + capacity;
                t = next(t, headHint, lap && lapped, ring.headPtr, QueueCounts.headReads);
                lapped |= lap;
                continue;
            }
            if ((phase == READING || phase == MOVING) && recovery.holderDead(w)) {
                recovery.recover(w); // redelivered as ticket t
                continue;
            }
            QueueCounts.pollEmpty.increment();
            return takeStranded(); // ticket t not offered yet
        }
    }

    /**
     * The queue looked empty at its head: takes an element a dead consumer had claimed
     * and not returned ({@code READING(x, dead)}), if there is one, instead of leaving it
     * until the ring comes round to its slot. It is the oldest element there is, so
     * taking it first keeps FIFO. One read of the state words, at most every
     * {@value #STRANDED_SCAN_NANOS} ns per handle.
     */
    private Object takeStranded() {
        long now = System.nanoTime();
        long last = lastStrandedScan.get();
        if (now - last < STRANDED_SCAN_NANOS || !lastStrandedScan.compareAndSet(last, now)) {
            return null;
        }
        for (int from = 0; from < capacity; from += QueueRing.STATES_PER_READ) {
            int n = Math.min(QueueRing.STATES_PER_READ, capacity - from);
            byte[] states = ring.readStates(from, n);
            for (int i = 0; i < n; i++) {
                long w = Words.getLong(states, i * Long.BYTES);
                if (SlotState.phase(w) != READING || !recovery.holderDead(w)) {
                    continue;
                }
                long x = SlotState.ticket(w);
                long mine = SlotState.of(x, READING, ring.self);
                recovery.enter(x);
                Claimed c = claim(x, w, mine, SlotState.of(x + capacity, FULL, 0));
                if (c.witness() != w) {
                    recovery.leave(x);
                    continue;
                }
                return consume(x, mine, c.data());
            }
        }
        return null;
    }

    /** What a claim CAS found (the claim won when it is the state expected), and the read of the slot's data behind it. */
    record Claimed(long witness, CompletableFuture<byte[]> data) {
    }

    /**
     * CASes ticket {@code t}'s state from {@code expected} to {@code mine}, pipelined with the
     * read of the slot's data (issued after the CAS on one connection: it reads a claimed
     * slot), and waits for the CAS. The caller has entered {@code t}
     * ({@link QueueRecovery#enter}); when a verb fails, a claim that may have run is given
     * back ({@code mine -> next}, {@link QueueRecovery#unclaim}), {@code t} is left and the
     * failure rethrown.
     */
    Claimed claim(long t, long expected, long mine, long next) {
        return claim(t, expected, mine, next, null);
    }

    /** {@link #claim(long, long, long, long)}, running {@code failed} (when not null) first when a verb fails. */
    private Claimed claim(long t, long expected, long mine, long next, Runnable failed) {
        CompletableFuture<Long> cas = null;
        try {
            cas = memory.compareAndSwapAsync(ring.statePtr(t), expected, mine);
            CompletableFuture<byte[]> data = memory.readAsync(ring.dataPtr(t), ring.slotBytes);
            return new Claimed(memory.await(cas), data);
        } catch (RuntimeException e) {
            if (failed != null) {
                failed.run(); // before the give-back, a verb of its own
            }
            recovery.unclaim(t, expected, mine, next, cas, e);
            recovery.leave(t);
            throw e;
        }
    }

    /** Reads the claimed slot's element, empties the slot, frees a large element's block. */
    private E consume(long t, long mine, CompletableFuture<byte[]> dataRead) {
        byte[] bytes;
        BlockRef block;
        try {
            byte[] data = memory.await(dataRead);
            int length = Words.getInt(data, LENGTH_FIELD);
            block = QueueRing.largeBlock(data);
            if (block != null) {
                bytes = allocator.read(block, 0, length);
            } else {
                bytes = Arrays.copyOfRange(data, PAYLOAD_FIELD, PAYLOAD_FIELD + length);
            }
            CompletableFuture<Long> empty = memory.compareAndSwapAsync(ring.statePtr(t), mine,
                    SlotState.of(t + capacity, EMPTY, 0));
            wakeUps.notifyAfter(ring.putWaitersPtr); // read after the emptying CAS, in its round trip (as publish does)
            long w = memory.await(empty);
            if (w != mine) {
                throw new SlotLostException(name(), t, "consumer", SlotState.toString(w));
            }
        } catch (SlotLostException e) {
            recovery.leave(t);
            throw e;
        } catch (RuntimeException e) {
            // put it back for another consumer (as the recovery of a dead consumer would)
            recovery.giveBack(t, mine, SlotState.of(t + capacity, FULL, 0), null, e);
            recovery.leave(t);
            // the claim ran: the element may be taken (the emptying CAS may have run) or moved a lap on
            throw new OutcomeUnknownException("poll", "queue " + name() + " ticket " + t, e);
        }
        recovery.leave(t);
        if (block != null) {
            allocator.free(block);
        }
        return codec.decode(bytes);
    }

    /**
     * The head element without taking it, or null. Waits in {@code held} for an offer in
     * progress at the head, as a poll does.
     */
    E peek(QueueHeldSlotWait held) {
        handle.check();
        long t = headHint.get();
        while (true) {
            CompletableFuture<byte[]> stateRead = memory.readAsync(ring.statePtr(t), Long.BYTES);
            CompletableFuture<byte[]> dataRead = memory.readAsync(ring.dataPtr(t), ring.slotBytes);
            long w = Words.getLong(memory.await(stateRead), 0);
            long st = SlotState.ticket(w);
            int phase = SlotState.phase(w);
            if (st == t && phase == FULL) {
                E e = readElement(t, w, memory.await(dataRead));
                if (e != null) {
                    return e;
                }
                continue; // taken meanwhile: look again
            }
            if (st == t && phase == EMPTY) {
                return null;
            }
            if (st == t && (phase == WRITING || phase == MOVING)) {
                if (recovery.holderDead(w)) {
                    recovery.recover(w);
                } else {
                    held.saw(t, w);
                    held.pause();
                }
                continue;
            }
            if (st >= t) {
                t = st >= t + capacity ? Math.max(t + 1, memory.readLong(ring.headPtr)) : t + 1;
                headHint.accumulateAndGet(t, Math::max);
                continue;
            }
            if ((phase == READING || phase == MOVING) && recovery.holderDead(w)) {
                recovery.recover(w);
                continue;
            }
            return null;
        }
    }

    /**
     * Decodes the element of FULL slot {@code t} from {@code data} read after state
     * {@code w}, if the slot still holds it (state read again after the data); else null.
     */
    E readElement(long t, long w, byte[] data) {
        int length = Words.getInt(data, LENGTH_FIELD);
        byte[] bytes;
        BlockRef block = QueueRing.largeBlock(data);
        if (block != null) {
            try {
                bytes = allocator.read(block, 0, length);
            } catch (UseAfterFreeException e) {
                return null; // taken and freed since the state was read
            }
        } else {
            if (length < 0 || length > ring.slotBytes - PAYLOAD_FIELD) {
                return null; // torn: the slot changed under the read; the state check below would fail
            }
            bytes = Arrays.copyOfRange(data, PAYLOAD_FIELD, PAYLOAD_FIELD + length);
        }
        if (memory.readLong(ring.statePtr(t)) != w) {
            return null;
        }
        return codec.decode(bytes);
    }

    /**
     * The ticket a pass tries after finding ticket {@code t} claimed: {@code t + 1}, or
     * further when this handle's hint is further (other threads of this handle claimed or
     * passed those tickets while this one's CAS was on its way: at 8 threads sharing one
     * handle, walking them one by one cost a lost claim CAS, a round trip, each), or the
     * head or tail word ({@code ptr}, read when {@code readWord}: the pass met a slot a lap
     * ahead of its ticket a second time, so this handle's hint may be laps behind). Raises
     * the hint to the answer. Safe as a fresh pass is: every ticket below the hint and
     * below the word has been claimed.
     *
     * <p>A slot a lap ahead ({@code EMPTY(t + capacity)}: ticket {@code t} taken and the
     * slot emptied) is what a claim that lost to a faster thread usually meets, so the
     * first one costs no read of the word; before, every one did (0.34 head-word reads
     * per poll at 8 threads).
     */
    private long next(long t, AtomicLong hint, boolean readWord, long ptr, LongAdder reads) {
        long n = Math.max(t + 1, hint.get());
        if (readWord) {
            n = Math.max(n, readHint(ptr, reads));
        }
        return hint.accumulateAndGet(n, Math::max);
    }

    /**
     * Whether a poll's claim of ticket {@code t} that found state {@code w} moves on to
     * {@code t + 1} (the ticket is taken, being taken, or long gone), rather than report
     * an empty queue or wait for the slot's holder.
     */
    private static boolean takenOrPassed(long t, long w) {
        long st = SlotState.ticket(w);
        int phase = SlotState.phase(w);
        return st > t || (st == t && phase == READING);
    }

    /**
     * Registers the calling thread's claim of ticket {@code t} in {@code inFlight} and
     * returns the future it must {@link #settle} with its answer; or, when another thread
     * of this handle is claiming {@code t} already, waits for that one's answer (its CAS's
     * answer, given before any hook or further verb, and before the give-back of a claim whose
     * verb failed), at most what one verb of the caller would have (the operation timeout,
     * within the caller's deadline: {@link OperationDeadline}), and returns null when it says the ticket is claimed: the caller moves on
     * without a CAS that would lose. When that answer says the slot was not ready (its CAS may
     * have run before the caller's operation began: it is no evidence for the caller), failed,
     * or did not come in time, the caller claims for itself, unregistered.
     */
    private CompletableFuture<Boolean> share(ConcurrentHashMap<Long, CompletableFuture<Boolean>> inFlight, long t) {
        CompletableFuture<Boolean> mine = new CompletableFuture<>();
        CompletableFuture<Boolean> other = inFlight.putIfAbsent(t, mine);
        if (other == null) {
            return mine;
        }
        // claimed is for ever (a slot's ticket only grows): an answer from before this call is still true now
        // not interruptible (as the join it replaced): an interrupt is kept for the caller's own verbs and waits
        long until = System.nanoTime() + Math.max(OperationDeadline.remainingNanos(memory.operationTimeout().toNanos()), 0);
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return other.get(Math.max(until - System.nanoTime(), 0), TimeUnit.NANOSECONDS)
                            ? null : new CompletableFuture<>();
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (TimeoutException | ExecutionException e) {
                    return new CompletableFuture<>(); // no answer in the caller's time: its own CAS, under its deadline
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Gives the answer of this thread's claim of {@code t} to the threads waiting for it
     * ({@link #share}); nothing when given already.
     */
    private static void settle(ConcurrentHashMap<Long, CompletableFuture<Boolean>> inFlight, long t,
                               CompletableFuture<Boolean> answer, boolean claimed) {
        inFlight.remove(t, answer);
        answer.complete(claimed);
    }

    /** Reads a head or tail word, counted in {@code count}. */
    private long readHint(long ptr, LongAdder count) {
        count.increment();
        return memory.readLong(ptr);
    }

    /**
     * Moves a head or tail word from {@code t} to {@code t + 1} if it is still at
     * {@code t}. Asynchronous and best effort: the words are hints, a failed or lost
     * CAS only leaves the next reader a step more to walk.
     */
    private void helpAdvance(long ptr, long t) {
        memory.compareAndSwapAsync(ptr, t, t + 1);
    }

    private void checkTicket(long t) {
        if (t >= SlotState.MAX_TICKET - capacity) {
            throw new CollectionArgumentException("ticket", t, "below " + (SlotState.MAX_TICKET - capacity)
                    + " (queue " + name() + " has used up its tickets: use a new queue name)");
        }
    }
}
