package io.membus.collections;

import io.membus.alloc.GlobalAllocator;
import io.membus.codec.Codec;
import io.membus.core.Backoff;
import io.membus.core.RemoteMemory;
import io.membus.core.error.DsmException;
import io.membus.core.error.OutcomeUnknownException;

import java.util.AbstractQueue;
import java.util.Collection;
import java.util.Iterator;
import java.util.Objects;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;

import static io.membus.collections.QueueDescriptor.PAYLOAD_FIELD;

/**
 * A bounded {@link BlockingQueue} shared by every node: a ring of slots in remote
 * memory with one state word per slot (Vyukov's bounded MPMC queue, with the
 * claim made on the slot's state word instead of on the tail; layout in
 * {@link QueueDescriptor}, states in {@link SlotState}). No lock anywhere:
 * <ul>
 *   <li><b>offer</b>: one CAS {@code EMPTY(t) -> WRITING(t, me)} on the slot of the
 *       ticket {@code t} this node believes is the tail (a failed CAS returns the
 *       slot's state, which says whether to move on, that the ring is full, or that
 *       a dead node's slot must be recovered); then the data write and the CAS
 *       {@code WRITING -> FULL(t)}, pipelined on one connection (executed in issue
 *       order) with the tail hint's CAS and the read of the take waiters word behind
 *       them: two round trips.</li>
 *   <li><b>poll</b>: the CAS {@code FULL(t) -> READING(t, me)} pipelined with the read
 *       of the slot's data (executed after the CAS, so it reads a claimed slot); then
 *       the CAS {@code READING -> EMPTY(t + capacity)} with the head hint's CAS and the
 *       read of the put waiters word: two round trips.</li>
 *   <li>Head and tail are hints advanced by CAS by whoever sees them lag
 *       (asynchronously, off the caller's path).</li>
 * </ul>
 * Elements whose encoding fits the slot ({@code slotBytes - 8} bytes: 256 with the
 * default 264-byte slots, settable per queue with {@link QueueOptions}) are stored
 * inline, with no allocation; larger ones in an allocator block that the consumer frees
 * (an allocation, a block write and a block read more).
 *
 * <p><b>Waiting.</b> A blocked {@code put}/{@code take} (and the timed
 * {@code offer}/{@code poll}) retries after a few short pauses (20 µs doubling),
 * then sleeps until a wake-up message ({@link WakeUps}: the take and put waiters
 * words of the root; every publish wakes the takers' nodes, every take the
 * putters'), looking again at least every 50 ms, honouring its timeout and interruption
 * ({@link InterruptedException}; a large element's block is freed). An interrupt never
 * abandons a verb in flight ({@link RemoteMemory#await} keeps it for after the verb):
 * the step finishes and the interrupt is seen at the next wait, so a {@code put} that
 * throws enqueued nothing and a {@code take} that throws took nothing. The
 * non-blocking {@code poll()}/{@code peek()} wait, the same way, for an offer whose
 * producer has claimed the head slot and is still writing it (its element comes
 * before every later one), and {@code offer()} waits for a consumer that has
 * claimed the slot it needs and is still emptying it: otherwise they could report
 * an empty or full queue that is not (not linearizable). Such a wait lasts two
 * verbs, or until the stalled node is taken for dead and its slot recovered, or until
 * the holder gives back a claim whose verbs failed (below); it ends by
 * {@link #heldSlotBoundNanos()} or at an interrupt with a {@link QueueSlotBusyException}
 * (nothing done; the interrupt status kept). A timed {@code poll} that reaches its
 * deadline in that state returns null.
 *
 * <p><b>Failures</b> (a node that is not a live member of the directory, or is
 * fenced, is dead; recovery relies on the cluster fencing a downed node's verbs):
 * <ul>
 *   <li>A producer that died between claiming a slot and publishing it
 *       ({@code WRITING(t, dead)}): the next node that needs that slot (a consumer
 *       waiting for ticket {@code t}, or a producer a lap later) moves it to
 *       {@code EMPTY(t + capacity)}: ticket {@code t} carries no element. The dead
 *       producer's {@code offer} never returned, so no element that was reported
 *       enqueued is lost; the half-written element is dropped (at most once).</li>
 *   <li>A consumer that died between claiming a slot and emptying it
 *       ({@code READING(t, dead)}): its {@code take} never returned the element, so
 *       it is delivered again, once: a poll that finds the queue empty takes such
 *       elements itself (they are older than anything queued; one scan of the state
 *       words at most every 100 ms per handle), and the next node that needs the
 *       slot a lap later moves it to {@code FULL(t + capacity)} and it is taken as ticket
 *       {@code t + capacity} (later than the elements offered after it: FIFO holds
 *       for every element but a redelivered one). Its large block, if any, was not
 *       freed yet (a consumer frees it after emptying the slot; a consumer that dies
 *       between the two leaks that one block).</li>
 *   <li>A remover that died while closing a gap ({@code MOVING(x, dead)}): the element
 *       it was moving stays where it was, its gap is emptied ({@link QueueRecovery#recoverMoving}).</li>
 *   <li>A slot held by this very node without an operation of this handle in
 *       flight was left by an earlier incarnation of the node and is recovered the
 *       same way.</li>
 *   <li>A node taken for dead that is in fact still running finds its slot gone
 *       when it publishes: {@link SlotLostException} (its element was not enqueued,
 *       or not taken).</li>
 *   <li>A failed operation's {@link DsmException#mayHaveRun()} speaks for the whole
 *       operation. A failure before the claim (the root's node down, a claim CAS
 *       refused before it was sent) is rethrown as it is: {@code false}, nothing
 *       happened, retry freely; so is a {@link SlotLostException}. A verb that fails
 *       after the claim (timeout, unreachable node) makes the outcome unknown: a
 *       claimed slot is given back ({@code WRITING -> EMPTY(t + capacity)},
 *       {@code READING -> FULL(t + capacity)}) when that is still possible, and
 *       {@link OutcomeUnknownException} is thrown with the verb's failure as its cause
 *       (except an offer whose publishing CAS certainly did not run: nothing was
 *       enqueued, and that CAS's failure is rethrown). A give-back that fails itself
 *       (the slot's node unreachable, or dead until its copy is promoted) is retried in
 *       the background until it is answered ({@link QueueRecovery#giveBack}): other nodes never
 *       take over a live node's slot, so nobody else would.</li>
 * </ul>
 * Elements live in the root's node: when it is down, every operation fails with
 * its {@code NodeUnavailableException}.
 *
 * <p><b>Views.</b> {@link #size()} counts the {@code FULL} slots (one read of the
 * state words); {@link #iterator()} is weakly consistent (it walks the tickets
 * between the head and the tail it read at creation, returns the elements it finds
 * still there, never throws {@code ConcurrentModificationException}) and supports
 * {@code remove()}. Removing an element from the middle ({@code remove(o)},
 * {@code iterator.remove()}) closes the gap it leaves by moving the elements ahead
 * of it up by one ticket ({@link QueueRemoval#removeTicket}), as {@code ArrayBlockingQueue}
 * does: with no operation in flight, an offer succeeds exactly when
 * {@code size() < capacity}, and {@link #remainingCapacity()} is
 * {@code capacity - size()}. Null elements are refused with
 * {@link NullPointerException}, as every {@code BlockingQueue} does.
 *
 * <p><b>Where the code lives</b> (docs/collections.md, "Where the queue's code lives"):
 * this class holds the public methods, the waiting of the blocking forms and the
 * operation counts; {@link QueueRing} the ring's layout in the root body,
 * {@link QueueElements} the encoding of an element into a slot's data area,
 * {@link QueueClaims} the claim protocol (offer, poll, peek, stranded elements, the
 * hints), {@link QueueRecovery} the slots of dead holders and the give-back of failed
 * claims, {@link QueueRemoval} the iterator and removal from the middle, and
 * {@link QueueHeldSlotWait} a non-blocking call's wait for a held slot.
 *
 * <p><b>Note:</b> thread-safe, for any number of producers and consumers on any
 * nodes (a handle's own state: hints and the tickets in flight in atomics and concurrent
 * maps; background give-backs run on the shared timer thread and touch only that). {@code offer}, {@code poll}, {@code put}, {@code take} and their timed
 * forms are linearizable at their claim CAS; actions of a producer before it
 * offered an element happen-before the actions of the consumer after it took it
 * (the verbs' visibility rule). Bulk operations ({@code addAll}, {@code drainTo},
 * {@code clear}) are not atomic.
 */
public final class DsmQueue<E> extends AbstractQueue<E> implements BlockingQueue<E>, Rooted {
    static final String KIND_NAME = "queue";
    /** The largest capacity. */
    public static final int MAX_CAPACITY = 1 << 20;

    /**
     * Operation kinds counted in {@link #operationStats()}, all timed: offers (every form,
     * done or not), polls (every form, element or not), and the blocking calls that waited
     * (the time from their first wait to their end).
     */
    static final String[] OPERATIONS = {"offer", "poll", "wait"};
    private static final int OFFER = 0;
    private static final int POLL = 1;
    private static final int WAIT = 2;

    private final Handle handle;
    private final OperationStats stats;
    private final RemoteMemory memory;
    private final Codec<E> codec;
    private final int capacity;
    private final int slotBytes;
    private final WakeUps wakeUps;
    private final QueueRing ring;
    private final QueueElements<E> elements;
    private final QueueRecovery recovery;
    private final QueueClaims<E> claims;
    private final QueueRemoval<E> removal;
    /**
     * Tests only: run by an offer or a poll right after its claim succeeded, before it
     * publishes or empties the slot (a fault injected there).
     */
    volatile Runnable afterClaim;

    private DsmQueue(Root root, NamedRoots roots, WakeUps wakeUps, Codec<E> codec, int capacity, int slotBytes) {
        this.wakeUps = wakeUps;
        this.handle = new Handle(root, OPERATIONS);
        this.stats = handle.stats().timed(OFFER, POLL, WAIT);
        this.memory = roots.memory();
        GlobalAllocator allocator = roots.allocator();
        this.codec = codec;
        this.capacity = capacity;
        this.slotBytes = slotBytes;
        this.ring = new QueueRing(memory, root.bodyPtr(), capacity, slotBytes);
        this.elements = new QueueElements<>(allocator, codec, slotBytes, root.name());
        this.recovery = new QueueRecovery(ring, allocator, elements, wakeUps, handle);
        this.claims = new QueueClaims<>(ring, allocator, codec, elements, recovery, wakeUps, handle, () -> afterClaim);
        this.removal = new QueueRemoval<>(ring, allocator, claims, recovery, wakeUps, handle);
    }

    static String descriptor(int capacity, Codec<?> codec) {
        return KIND_NAME + "(capacity=" + capacity + ",codec=" + codec.id() + ")";
    }

    static <E> DsmQueue<E> getOrCreate(NamedRoots roots, WakeUps wakeUps, String name, Codec<E> codec, int capacity,
                                       int slotBytes) {
        Objects.requireNonNull(codec, "codec");
        if (capacity <= 0 || capacity > MAX_CAPACITY) {
            throw new CollectionArgumentException("capacity", capacity, "1.." + MAX_CAPACITY);
        }
        if (slotBytes < QueueDescriptor.MIN_SLOT_BYTES || slotBytes > QueueDescriptor.MAX_SLOT_BYTES
                || slotBytes % 8 != 0) {
            throw new CollectionArgumentException("slotBytes", slotBytes, "a multiple of 8 in "
                    + QueueDescriptor.MIN_SLOT_BYTES + ".." + QueueDescriptor.MAX_SLOT_BYTES);
        }
        RemoteMemory memory = roots.memory();
        Root root = roots.getOrCreate(name, CollectionKind.QUEUE, descriptor(capacity, codec),
                QueueDescriptor.bodyLength(capacity, slotBytes),
                r -> QueueRing.format(memory, r.bodyPtr(), capacity, slotBytes));
        int storedSlotBytes = (int) memory.readLong(root.bodyPtr() + QueueDescriptor.SLOT_BYTES_OFFSET);
        return new DsmQueue<>(root, roots, wakeUps, codec, capacity, storedSlotBytes);
    }

    /**
     * Frees the blocks of the large elements still in a destroyed queue's slots (the ring
     * itself is in the root block, which the caller frees). No handle uses it any more
     * (see {@link Lifecycle}).
     */
    static void releaseNamed(GlobalAllocator allocator, Root root) {
        QueueRing.releaseLarge(allocator, root);
    }

    @Override
    public Handle handle() {
        return handle;
    }

    /** Fails with a {@link StructureGoneException} once the queue is known to be destroyed (see {@link Lifecycle}). */
    private void live() {
        handle.check();
    }

    /**
     * Destroys this queue cluster-wide: its name is given back (when still bound to it),
     * and its ring and the blocks of the elements still in it are freed a grace later;
     * from then on every operation of every handle on it (a waiter's next look too) fails
     * with a {@link StructureGoneException} (within a quarter second on other nodes).
     * Returns whether this call destroyed it.
     *
     * @throws CollectionArgumentException when the handle was not opened through {@link DsmCollections}
     */
    public boolean destroy() {
        return Rooted.destroy(this);
    }

    /** The fixed capacity. */
    public int capacity() {
        return capacity;
    }

    /** The largest encoded element stored inline in its slot; larger ones go to an allocator block. */
    public int inlineBytes() {
        return slotBytes - PAYLOAD_FIELD;
    }

    /** The bytes of each slot's data area, as the queue was created ({@link QueueOptions#slotBytes(int)}). */
    public int slotBytes() {
        return slotBytes;
    }

    public Codec<E> codec() {
        return codec;
    }

    /** Sets the largest encoded element this handle offers ({@code setting}: where the limit comes from); returns this. */
    DsmQueue<E> limitElements(long bytes, String setting) {
        elements.limit(bytes, setting);
        return this;
    }

    /** The claims (ticket, state) this handle is still giving back in the background (for tests and diagnostics). */
    java.util.Map<Long, Long> givingBack() {
        return recovery.givingBack();
    }

    /** A non-blocking call's wait for a held slot ({@link QueueHeldSlotWait}). */
    private QueueHeldSlotWait held(String operation) {
        return new QueueHeldSlotWait(handle.root().name(), operation, memory);
    }

    // ------------------------------------------------------------------ producers

    /**
     * Inserts {@code e} if the ring has room at the tail now. When the slot is still being
     * emptied by a live consumer (which has taken its element), waits for that to finish
     * (two verbs) rather than report a full queue that is not full.
     */
    @Override
    public boolean offer(E e) {
        long start = OperationStats.start();
        QueueElements.Prepared p = elements.prepare(e);
        QueueHeldSlotWait held = held("offer");
        RuntimeException failure = null;
        try {
            int r;
            while ((r = claims.tryOffer(p, held)) == QueueClaims.BUSY) {
                held.pause();
            }
            return r == QueueClaims.OFFERED;
        } catch (RuntimeException ex) {
            failure = ex;
            stats.failed(OFFER);
            throw ex;
        } finally {
            elements.discard(p, failure); // nothing when it was published, or freed already
            stats.record(OFFER, start);
        }
    }

    @Override
    public void put(E e) throws InterruptedException {
        if (!offer(e, Long.MAX_VALUE, TimeUnit.NANOSECONDS)) {
            throw new AssertionError("an offer without deadline returned false");
        }
    }

    @Override
    public boolean offer(E e, long timeout, TimeUnit unit) throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        long start = OperationStats.start();
        long deadline = Backoff.deadlineIn(unit.toNanos(timeout));
        QueueElements.Prepared p = elements.prepare(e);
        Waiting waiting = new Waiting(wakeUps, ring.putWaitersPtr);
        RuntimeException failure = null;
        long waitedFrom = 0;
        boolean waited = false;
        try {
            while (claims.tryOffer(p, null) != QueueClaims.OFFERED) {
                if (!waited) {
                    waited = true;
                    waitedFrom = OperationStats.start();
                }
                if (!waiting.next(deadline, true)) {
                    return false;
                }
            }
            return true;
        } catch (RuntimeException ex) {
            failure = ex;
            stats.failed(OFFER);
            throw ex;
        } finally {
            waiting.done();
            elements.discard(p, failure); // nothing when it was published, or freed already
            if (waited) {
                stats.record(WAIT, waitedFrom);
            }
            stats.record(OFFER, start);
        }
    }

    // ------------------------------------------------------------------ consumers

    /**
     * The head element, or null when the queue is empty. When the head's slot is
     * claimed by a live producer still writing it, waits for that offer (two verbs):
     * its element is ahead of every later one, so returning null or a later
     * element would not be linearizable.
     */
    @Override
    @SuppressWarnings("unchecked")
    public E poll() {
        long start = OperationStats.start();
        QueueHeldSlotWait held = held("poll");
        try {
            while (true) {
                Object r = claims.tryPoll(held);
                if (r != QueueClaims.WRITING_NOW) {
                    return (E) r;
                }
                held.pause();
            }
        } catch (RuntimeException ex) {
            stats.failed(POLL);
            throw ex;
        } finally {
            stats.record(POLL, start);
        }
    }

    /**
     * How long a non-blocking call ({@code poll()}, {@code peek()}, {@code offer(e)}) waits
     * for a slot a live node holds in a transient phase before it gives up with a
     * {@link QueueSlotBusyException} ({@link QueueHeldSlotWait#boundNanos}): twice the
     * operation timeout plus {@link io.membus.core.OperationDeadline#MARGIN}.
     */
    long heldSlotBoundNanos() {
        return QueueHeldSlotWait.boundNanos(memory);
    }

    @Override
    public E take() throws InterruptedException {
        E e = poll(Long.MAX_VALUE, TimeUnit.NANOSECONDS);
        if (e == null) {
            throw new AssertionError("a poll without deadline returned null");
        }
        return e;
    }

    @Override
    public E poll(long timeout, TimeUnit unit) throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        long start = OperationStats.start();
        long deadline = Backoff.deadlineIn(unit.toNanos(timeout));
        Waiting waiting = new Waiting(wakeUps, ring.takeWaitersPtr);
        long waitedFrom = 0;
        boolean waited = false;
        try {
            while (true) {
                Object r = claims.tryPoll(null);
                if (r != null && r != QueueClaims.WRITING_NOW) {
                    @SuppressWarnings("unchecked")
                    E e = (E) r;
                    return e;
                }
                if (!waited) {
                    waited = true;
                    waitedFrom = OperationStats.start();
                }
                if (!waiting.next(deadline, true)) {
                    return null; // also when an offer at the head was still being written at the deadline
                }
            }
        } catch (RuntimeException ex) {
            stats.failed(POLL);
            throw ex;
        } finally {
            waiting.done();
            if (waited) {
                stats.record(WAIT, waitedFrom);
            }
            stats.record(POLL, start);
        }
    }

    /**
     * The head element without taking it, or null (it may be taken at once). Waits for
     * an offer in progress at the head, as {@link #poll()} does.
     */
    @Override
    public E peek() {
        return claims.peek(held("peek"));
    }

    // ------------------------------------------------------------------ views and bulk

    /** The number of FULL slots (one read of the state words per 8192 slots). */
    @Override
    public int size() {
        live();
        return ring.countFull();
    }

    @Override
    public int remainingCapacity() {
        return Math.max(0, capacity - size());
    }

    @Override
    public int drainTo(Collection<? super E> c) {
        return drainTo(c, Integer.MAX_VALUE);
    }

    @Override
    public int drainTo(Collection<? super E> c, int maxElements) {
        Objects.requireNonNull(c);
        if (c == this) {
            throw new IllegalArgumentException("cannot drain a queue into itself");
        }
        int n = 0;
        E e;
        while (n < maxElements && (e = poll()) != null) {
            c.add(e);
            n++;
        }
        return n;
    }

    /**
     * Removes the first element equal to {@code o} (oldest first), closing the gap it
     * leaves (see {@link QueueRemoval#removeTicket}); true only when this call took an element out
     * (an equal element that a consumer took meanwhile does not count: the search goes on).
     */
    @Override
    public boolean remove(Object o) {
        if (o == null) {
            return false;
        }
        QueueRemoval<E>.Itr it = removal.iterator(memory.readLong(ring.headPtr), memory.readLong(ring.tailPtr));
        while (it.hasNext()) {
            if (o.equals(it.next()) && it.removeLast()) {
                return true;
            }
        }
        return false;
    }

    /**
     * A weakly consistent iterator over the elements between the head and the tail
     * read when it is made, in ticket (FIFO) order; {@code remove()} takes the last
     * returned element out if it is still queued.
     */
    @Override
    public Iterator<E> iterator() {
        live();
        return removal.iterator(memory.readLong(ring.headPtr), memory.readLong(ring.tailPtr));
    }

    @Override
    public String toString() {
        return super.toString();
    }
}
