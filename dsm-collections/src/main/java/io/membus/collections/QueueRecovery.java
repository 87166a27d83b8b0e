package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.core.RemoteMemory;
import io.membus.core.error.DsmException;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import static io.membus.collections.SlotState.EMPTY;
import static io.membus.collections.SlotState.FULL;
import static io.membus.collections.SlotState.MOVING;
import static io.membus.collections.SlotState.WRITING;

/**
 * Slots of a {@link DsmQueue} held by nobody who will finish them: which claims this
 * handle has in flight (so a slot of this node that none of them holds counts as an
 * earlier incarnation's), whether a slot's holder is dead, moving a dead holder's slot on
 * ({@code WRITING -> EMPTY}, {@code READING -> FULL} a lap later, a remover's
 * {@code MOVING} slots put back), and giving back this handle's own claim after a failed
 * verb, retried in the background until the slot's node answers. The class comment of
 * {@link DsmQueue} ("Failures") says when each applies.
 *
 * <p><b>Note:</b> thread-safe: the tickets in flight and the background give-backs are
 * concurrent maps; every slot change is one remote CAS that expects the exact state it
 * replaces, so two recoverers (or a recoverer and a late holder) cannot both win. The
 * background give-backs run on the shared timer thread and never block it.
 */
final class QueueRecovery {
    private static final Logger LOG = LoggerFactory.getLogger(DsmQueue.class);
    /** First delay of a background give-back ({@link #retryGiveBack}); it doubles up to {@link #GIVE_BACK_MAX_NANOS}. */
    static final long GIVE_BACK_FIRST_NANOS = 20_000_000L;
    static final long GIVE_BACK_MAX_NANOS = 1_000_000_000L;

    private final QueueRing ring;
    private final RemoteMemory memory;
    private final GlobalAllocator allocator;
    private final QueueElements<?> elements;
    private final WakeUps wakeUps;
    private final Handle handle;
    /**
     * Tickets whose slot an operation of this handle holds (WRITING or READING) or is
     * about to claim, with how many threads do (two threads may try one ticket at once).
     */
    private final ConcurrentHashMap<Long, Integer> inFlight = new ConcurrentHashMap<>();
    /** Claims whose give-back failed and is retried in the background: ticket to the claim's state word. */
    private final ConcurrentHashMap<Long, Long> givingBack = new ConcurrentHashMap<>();

    QueueRecovery(QueueRing ring, GlobalAllocator allocator, QueueElements<?> elements, WakeUps wakeUps,
                  Handle handle) {
        this.ring = ring;
        this.memory = ring.memory;
        this.allocator = allocator;
        this.elements = elements;
        this.wakeUps = wakeUps;
        this.handle = handle;
    }

    private String name() {
        return handle.root().name();
    }

    /** An operation of this handle holds, or is about to claim, ticket {@code t}'s slot. */
    void enter(long t) {
        inFlight.merge(t, 1, Integer::sum);
    }

    void leave(long t) {
        inFlight.computeIfPresent(t, (k, n) -> n == 1 ? null : n - 1);
    }

    /** Whether the node holding a WRITING/READING state is dead (see the class comment of {@link DsmQueue}). */
    boolean holderDead(long state) {
        int node = SlotState.node(state);
        if (node == ring.self) {
            return !inFlight.containsKey(SlotState.ticket(state));
        }
        return memory.directory().member(node).isEmpty() || memory.isFenced(node);
    }

    /** Wakes the nodes waiting to take and to put: a slot moved on. */
    void wakeAll() {
        wakeUps.notifyAfter(ring.takeWaitersPtr);
        wakeUps.notifyAfter(ring.putWaitersPtr);
    }

    /**
     * Moves a dead holder's slot on (one CAS; losing it to another recoverer is fine):
     * {@code WRITING(t) -> EMPTY(t + capacity)} (no element), {@code READING(t) -> FULL(t + capacity)}
     * (delivered again).
     */
    void recover(long state) {
        long st = SlotState.ticket(state);
        if (SlotState.phase(state) == MOVING) {
            recoverMoving(state);
            return;
        }
        long next = SlotState.phase(state) == WRITING ? SlotState.of(st + ring.capacity, EMPTY, 0)
                : SlotState.of(st + ring.capacity, FULL, 0);
        if (memory.compareAndSwap(ring.statePtr(st), state, next) == state) {
            wakeAll();
        }
    }

    /** After a failure: recovers ticket {@code x} if this handle's MOVING claim is still on it. */
    void recoverOwn(long x, RuntimeException failure) {
        try {
            long w = memory.readLong(ring.statePtr(x));
            if (w == SlotState.of(x, MOVING, ring.self)) {
                recoverMoving(w);
            }
        } catch (RuntimeException e) {
            failure.addSuppressed(e);
        }
    }

    /**
     * Recovers {@code MOVING(x, dead)}. A dead remover holds at most two slots: its gap,
     * and while a step is under way the element ahead of it ({@code x}, its gap at
     * {@code x + 1}). An element whose move was not published stays where it was
     * ({@code FULL(x)}); a gap becomes {@code EMPTY(x + capacity)} — after the element
     * ahead of it, if that one is being moved into it, was put back.
     */
    void recoverMoving(long state) {
        long x = SlotState.ticket(state);
        int node = SlotState.node(state);
        long after = SlotState.of(x + 1, MOVING, node);
        if (memory.readLong(ring.statePtr(x + 1)) == after) {
            memory.compareAndSwap(ring.statePtr(x), state, SlotState.of(x, FULL, 0)); // a source: stays
        } else {
            if (x > 0) {
                long before = SlotState.of(x - 1, MOVING, node);
                if (memory.readLong(ring.statePtr(x - 1)) == before) {
                    memory.compareAndSwap(ring.statePtr(x - 1), before, SlotState.of(x - 1, FULL, 0));
                }
            }
            memory.compareAndSwap(ring.statePtr(x), state, SlotState.of(x + ring.capacity, EMPTY, 0)); // a gap
        }
        wakeAll();
    }

    /**
     * After a failed verb: moves a slot this node still holds on, so nobody waits for it.
     * A prepared element's block is freed when the slot was given back (the element was
     * never published); otherwise the publish may have run and the ring may hold the
     * block: it is settled and left alone.
     */
    void giveBack(long t, long mine, long next, QueueElements.Prepared p, RuntimeException failure) {
        boolean givenBack = false;
        boolean answered = false;
        try {
            givenBack = memory.compareAndSwap(ring.statePtr(t), mine, next) == mine;
            answered = true;
        } catch (RuntimeException e) {
            failure.addSuppressed(e);
        }
        BlockRef block = null;
        if (p != null) {
            if (givenBack) {
                elements.discard(p, failure);
            } else {
                if (!answered && !p.settled) {
                    block = p.block; // freed by the retry if it gives the slot back: the element was never published
                }
                p.settled = true;
            }
        }
        if (!answered) {
            // the slot may still be held by this node with no operation of it: nobody else may take it over
            // while this node lives, so keep giving it back until the slot's node answers (after a promotion,
            // its copy does)
            retryGiveBack(t, mine, next, block, GIVE_BACK_FIRST_NANOS);
        }
    }

    /** The claims (ticket, state) this handle is still giving back in the background (for tests and diagnostics). */
    Map<Long, Long> givingBack() {
        return Map.copyOf(givingBack);
    }

    /**
     * Gives slot {@code t} back ({@code mine -> next}) in the background after
     * {@code delayNanos}, again and again (the delay doubling up to one second) until the
     * CAS is answered: a claim of this node whose publication and give-back both failed
     * (the slot's node was unreachable, or died and its copy was promoted) would otherwise
     * stay {@code WRITING/READING(t, this node)}; other nodes take a slot over only from a
     * dead holder, so while this node lives and has no operation on it, every consumer
     * (or producer) that needs the slot would wait for it. The CAS expects exactly this
     * handle's claim: when the publication ran after all (or another node recovered the
     * slot), it changes nothing. Stops when the handle's memory is closed or the queue is
     * destroyed. Runs on the shared timer thread and never blocks it (the verb is
     * asynchronous; a large element's block is freed on the common pool).
     */
    private void retryGiveBack(long t, long mine, long next, BlockRef block, long delayNanos) {
        givingBack.put(t, mine);
        io.membus.core.time.Deadlines.schedule(() -> {
            CompletableFuture<Long> cas;
            try {
                handle.checkDead();
                cas = memory.compareAndSwapAsync(ring.statePtr(t), mine, next);
            } catch (RuntimeException e) {
                givingBackFailed(t, mine, next, block, delayNanos, e);
                return;
            }
            cas.whenComplete((w, e) -> {
                if (e != null) {
                    givingBackFailed(t, mine, next, block, delayNanos, e);
                    return;
                }
                givingBack.remove(t, mine);
                if (w == mine) {
                    wakeAll();
                    if (block != null) {
                        java.util.concurrent.ForkJoinPool.commonPool().execute(() -> {
                            try {
                                allocator.free(block);
                            } catch (RuntimeException x) {
                                LOG.debug("queue {}: freeing the block of an element given back failed: {}",
                                        name(), x.toString());
                            }
                        });
                    }
                    LOG.info("queue {}: gave back slot of ticket {} ({}) whose verbs had failed",
                            name(), t, SlotState.toString(mine));
                }
            });
        }, delayNanos);
    }

    private void givingBackFailed(long t, long mine, long next, BlockRef block, long delayNanos, Throwable e) {
        Throwable c = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
        if (c instanceof io.membus.core.error.DsmClosedException || c instanceof StructureGoneException) {
            givingBack.remove(t, mine);
            return; // nobody can use the slot through this handle any more
        }
        LOG.debug("queue {}: giving back slot of ticket {} failed, retrying: {}", name(), t, c.toString());
        retryGiveBack(t, mine, next, block, Math.min(GIVE_BACK_MAX_NANOS, delayNanos * 2));
    }

    /**
     * After a claim CAS whose outcome is unknown (it failed, or a verb issued with it
     * did): gives the slot back in case the claim ran, so that no slot stays held by a
     * live node that no operation holds — other nodes would wait for it until this node
     * is taken for dead. A no-op (no verb) when the claim certainly did not run; harmless
     * when it did not (the CAS expects this handle's claim).
     *
     * @param cas the claim's future, or null when the claim was the synchronous call that failed
     */
    void unclaim(long t, long expected, long mine, long next, CompletableFuture<Long> cas, RuntimeException failure) {
        Throwable claimFailure = failure;
        if (cas != null) {
            if (cas.isDone() && !cas.isCompletedExceptionally()) {
                if (cas.join() != expected) {
                    return; // it ran and claimed nothing
                }
                claimFailure = null; // it ran and claimed: give the slot back
            } else if (cas.isCompletedExceptionally()) {
                claimFailure = cas.handle((v, x) -> x).join();
                if (claimFailure instanceof CompletionException && claimFailure.getCause() != null) {
                    claimFailure = claimFailure.getCause();
                }
            } else {
                claimFailure = null; // sent and unresolved: it may run
            }
        }
        if (claimFailure instanceof DsmException d && !d.mayHaveRun()) {
            return; // the claim certainly did not run
        }
        giveBack(t, mine, next, null, failure);
    }
}
