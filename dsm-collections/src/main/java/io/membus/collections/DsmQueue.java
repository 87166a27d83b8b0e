package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.UseAfterFreeException;
import io.membus.codec.Codec;
import io.membus.core.Backoff;
import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.error.DsmException;
import io.membus.core.error.OutcomeUnknownException;

import java.util.AbstractQueue;
import java.util.Arrays;
import java.util.Collection;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.Objects;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import static io.membus.collections.QueueDescriptor.FORM_FIELD;
import static io.membus.collections.QueueDescriptor.FORM_INLINE;
import static io.membus.collections.QueueDescriptor.FORM_LARGE;
import static io.membus.collections.QueueDescriptor.LENGTH_FIELD;
import static io.membus.collections.QueueDescriptor.PAYLOAD_FIELD;
import static io.membus.collections.SlotState.EMPTY;
import static io.membus.collections.SlotState.FULL;
import static io.membus.collections.SlotState.MOVING;
import static io.membus.collections.SlotState.READING;
import static io.membus.collections.SlotState.WRITING;

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
 *       it was moving stays where it was, its gap is emptied ({@link #recoverMoving}).</li>
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
 *       the background until it is answered ({@link #retryGiveBack}): other nodes never
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
 * of it up by one ticket ({@link #removeTicket}), as {@code ArrayBlockingQueue}
 * does: with no operation in flight, an offer succeeds exactly when
 * {@code size() < capacity}, and {@link #remainingCapacity()} is
 * {@code capacity - size()}. Null elements are refused with
 * {@link NullPointerException}, as every {@code BlockingQueue} does.
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
    private static final Logger LOG = LoggerFactory.getLogger(DsmQueue.class);
    static final String KIND_NAME = "queue";
    /** The largest capacity. */
    public static final int MAX_CAPACITY = 1 << 20;
    private static final int STATES_PER_READ = 8192;

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
    private final GlobalAllocator allocator;
    private final Codec<E> codec;
    private final int capacity;
    private final int slotBytes;
    private final int self;
    private final long headPtr;
    private final long tailPtr;
    private final long statesPtr;
    private final long dataPtr;
    private final long takeWaitersPtr;
    private final long putWaitersPtr;
    private final WakeUps wakeUps;
    /** How often a handle may look for elements stranded by dead consumers. */
    static final long STRANDED_SCAN_NANOS = 100_000_000L;
    private final AtomicLong lastStrandedScan = new AtomicLong(System.nanoTime() - STRANDED_SCAN_NANOS);
    private final AtomicLong headHint = new AtomicLong();
    private final AtomicLong tailHint = new AtomicLong();
    /**
     * Tickets whose slot an operation of this handle holds (WRITING or READING) or is
     * about to claim, with how many threads do (two threads may try one ticket at once).
     */
    private final ConcurrentHashMap<Long, Integer> inFlight = new ConcurrentHashMap<>();
    /**
     * Tests only: run by an offer or a poll right after its claim succeeded, before it
     * publishes or empties the slot (a fault injected there).
     */
    volatile Runnable afterClaim;
    /** One removal from the middle at a time per handle (see {@link #removeTicket}). */
    private final Object removals = new Object();

    private DsmQueue(Root root, NamedRoots roots, WakeUps wakeUps, Codec<E> codec, int capacity, int slotBytes) {
        this.wakeUps = wakeUps;
        this.handle = new Handle(root, OPERATIONS);
        this.stats = handle.stats().timed(OFFER, POLL, WAIT);
        this.memory = roots.memory();
        this.allocator = roots.allocator();
        this.codec = codec;
        this.capacity = capacity;
        this.slotBytes = slotBytes;
        this.self = memory.localNodeId();
        long body = root.bodyPtr();
        this.headPtr = body + QueueDescriptor.HEAD_OFFSET;
        this.tailPtr = body + QueueDescriptor.TAIL_OFFSET;
        this.statesPtr = body + QueueDescriptor.STATES_OFFSET;
        this.dataPtr = body + QueueDescriptor.dataOffset(capacity);
        this.takeWaitersPtr = body + QueueDescriptor.TAKE_WAITERS_OFFSET;
        this.putWaitersPtr = body + QueueDescriptor.PUT_WAITERS_OFFSET;
        headHint.set(memory.readLong(headPtr));
        tailHint.set(memory.readLong(tailPtr));
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
                QueueDescriptor.bodyLength(capacity, slotBytes), r -> {
                    byte[] head = new byte[QueueDescriptor.STATES_OFFSET];
                    Words.putLong(head, QueueDescriptor.CAPACITY_OFFSET, capacity);
                    Words.putLong(head, QueueDescriptor.SLOT_BYTES_OFFSET, slotBytes);
                    memory.write(r.bodyPtr(), head);
                    for (int from = 0; from < capacity; from += STATES_PER_READ) {
                        int n = Math.min(STATES_PER_READ, capacity - from);
                        byte[] states = new byte[n * Long.BYTES];
                        for (int i = 0; i < n; i++) {
                            Words.putLong(states, i * Long.BYTES, SlotState.of(from + i, EMPTY, 0));
                        }
                        memory.write(r.bodyPtr() + QueueDescriptor.STATES_OFFSET + (long) from * Long.BYTES, states);
                    }
                });
        int storedSlotBytes = (int) memory.readLong(root.bodyPtr() + QueueDescriptor.SLOT_BYTES_OFFSET);
        return new DsmQueue<>(root, roots, wakeUps, codec, capacity, storedSlotBytes);
    }

    /**
     * Frees the blocks of the large elements still in a destroyed queue's slots (the ring
     * itself is in the root block, which the caller frees). No handle uses it any more
     * (see {@link Lifecycle}).
     */
    static void releaseNamed(io.membus.alloc.GlobalAllocator allocator, Root root) {
        RemoteMemory memory = allocator.memory();
        long body = root.bodyPtr();
        int capacity = (int) memory.readLong(body + QueueDescriptor.CAPACITY_OFFSET);
        int slotBytes = (int) memory.readLong(body + QueueDescriptor.SLOT_BYTES_OFFSET);
        if (capacity <= 0 || capacity > MAX_CAPACITY || slotBytes < QueueDescriptor.MIN_SLOT_BYTES) {
            throw new IllegalStateException("capacity " + capacity + ", slotBytes " + slotBytes + " in " + root);
        }
        long data = body + QueueDescriptor.dataOffset(capacity);
        for (int from = 0; from < capacity; from += STATES_PER_READ) {
            int n = Math.min(STATES_PER_READ, capacity - from);
            byte[] states = memory.read(body + QueueDescriptor.STATES_OFFSET + (long) from * Long.BYTES, n * Long.BYTES);
            for (int i = 0; i < n; i++) {
                int phase = SlotState.phase(Words.getLong(states, i * Long.BYTES));
                if (phase == SlotState.EMPTY) {
                    continue;
                }
                byte[] head = memory.read(data + (long) (from + i) * slotBytes,
                        PAYLOAD_FIELD + QueueDescriptor.LARGE_REF_LENGTH);
                if (Words.getInt(head, FORM_FIELD) == FORM_LARGE) {
                    BlockRef block = BlockRef.of(Words.getLong(head, PAYLOAD_FIELD), Words.getLong(head, PAYLOAD_FIELD + 8),
                            Words.getLong(head, PAYLOAD_FIELD + 16));
                    try {
                        allocator.free(block);
                    } catch (io.membus.alloc.StaleBlockReferenceException e) {
                        // taken and freed by its consumer already (the slot's state lags its data)
                    }
                }
            }
        }
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

    private long statePtr(long ticket) {
        return statesPtr + (ticket % capacity) * Long.BYTES;
    }

    private long dataPtr(long ticket) {
        return dataPtr + (ticket % capacity) * slotBytes;
    }

    // ------------------------------------------------------------------ producers

    /**
     * An element ready for a slot: the data area's bytes and, for a large element, its
     * block. The block is settled once: freed ({@link #discard}), or handed to the ring
     * (published, or a publish whose outcome is unknown: the ring may hold it); an offer
     * frees it at most once, and only while it is unsettled.
     *
     * <p><b>Note:</b> not thread-safe: one offer's, used by its thread only.
     */
    private static final class Prepared {
        final byte[] data;
        final BlockRef block;
        /** The block was freed or handed to the ring: never free it (again). */
        boolean settled;

        Prepared(byte[] data, BlockRef block) {
            this.data = data;
            this.block = block;
        }
    }

    /** Largest encoded element accepted, and the setting it came from; set before the handle is published. */
    private volatile long maxElementBytes = DsmCollections.DEFAULT_MAX_VALUE_SIZE;
    private volatile String limitSetting = DsmCollections.MAX_VALUE_SIZE_SETTING;

    /** Sets the largest encoded element this handle offers ({@code setting}: where the limit comes from); returns this. */
    DsmQueue<E> limitElements(long bytes, String setting) {
        this.limitSetting = setting;
        this.maxElementBytes = bytes;
        return this;
    }

    private Prepared prepare(E e) {
        Objects.requireNonNull(e, "DsmQueue does not accept null elements");
        byte[] bytes = codec.encode(e);
        if (bytes.length > maxElementBytes) { // before anything is claimed
            throw new io.membus.core.error.ValueTooLargeException("queue \"" + handle.root().name() + "\" element",
                    bytes.length, maxElementBytes, limitSetting);
        }
        if (bytes.length <= slotBytes - PAYLOAD_FIELD) {
            byte[] data = new byte[PAYLOAD_FIELD + bytes.length];
            Words.putInt(data, LENGTH_FIELD, bytes.length);
            Words.putInt(data, FORM_FIELD, FORM_INLINE);
            System.arraycopy(bytes, 0, data, PAYLOAD_FIELD, bytes.length);
            return new Prepared(data, null);
        }
        BlockRef block = allocator.allocate(bytes.length);
        try {
            allocator.write(block, 0, bytes);
        } catch (RuntimeException ex) {
            discard(new Prepared(null, block), ex);
            throw ex;
        }
        byte[] data = new byte[PAYLOAD_FIELD + QueueDescriptor.LARGE_REF_LENGTH];
        Words.putInt(data, LENGTH_FIELD, bytes.length);
        Words.putInt(data, FORM_FIELD, FORM_LARGE);
        Words.putLong(data, PAYLOAD_FIELD, block.ptr());
        Words.putLong(data, PAYLOAD_FIELD + 8, block.header());
        Words.putLong(data, PAYLOAD_FIELD + 16, block.capacity());
        return new Prepared(data, block);
    }

    /**
     * Frees a prepared element's block (an offer that gave up), unless it is settled: at
     * most once. A failure to free is added to {@code failure} (the first error stays the
     * one thrown), or thrown when there is none.
     */
    private void discard(Prepared p, RuntimeException failure) {
        if (p.block != null && !p.settled) {
            p.settled = true;
            try {
                allocator.free(p.block);
            } catch (RuntimeException e) {
                if (failure == null) {
                    throw e;
                }
                failure.addSuppressed(e);
            }
        }
    }

    private static final int OFFERED = 0;
    private static final int FULL_NOW = 1;
    /** The slot is being emptied by a live consumer: room in a moment. */
    private static final int BUSY = 2;

    /**
     * One pass: puts {@code p} in the slot of the tail's ticket: OFFERED, FULL_NOW or BUSY
     * (the slot's state noted in {@code held}, when given).
     */
    private int tryOffer(Prepared p, HeldSlotWait held) {
        live();
        long t = tailHint.get();
        while (true) {
            checkTicket(t);
            long empty = SlotState.of(t, EMPTY, 0);
            long mine = SlotState.of(t, WRITING, self);
            enter(t);
            long w;
            try {
                w = memory.compareAndSwap(statePtr(t), empty, mine);
            } catch (RuntimeException e) {
                unclaim(t, empty, mine, SlotState.of(t + capacity, EMPTY, 0), null, e);
                leave(t);
                throw e;
            }
            if (w == empty) {
                Runnable hook = afterClaim;
                if (hook != null) {
                    hook.run();
                }
                helpAdvance(tailPtr, t);
                tailHint.accumulateAndGet(t + 1, Math::max);
                publish(t, mine, p);
                return OFFERED;
            }
            leave(t);
            long st = SlotState.ticket(w);
            int phase = SlotState.phase(w);
            if (st >= t) {
                // ticket t is claimed (or long done): move on, from the tail word when the hint is a lap behind
                helpAdvance(tailPtr, t);
                t = st >= t + capacity ? Math.max(t + 1, memory.readLong(tailPtr)) : t + 1;
                tailHint.accumulateAndGet(t, Math::max);
                continue;
            }
            // the slot still serves an earlier lap
            if ((phase == WRITING || phase == READING || phase == MOVING) && holderDead(w)) {
                recover(w);
                continue;
            }
            if (phase == EMPTY) {
                // a hint ahead of the ring (not reachable by the invariants): re-read the tail word
                tailHint.set(memory.readLong(tailPtr));
            }
            // a consumer that claimed the element a lap earlier has taken it (linearized): wait for its room
            if (phase == READING || phase == MOVING) {
                if (held != null) {
                    held.saw(t, w);
                }
                return BUSY;
            }
            return FULL_NOW;
        }
    }

    /** Writes the data and publishes FULL(t), pipelined; gives the ticket up when that fails. */
    private void publish(long t, long mine, Prepared p) {
        CompletableFuture<Long> cas = null;
        try {
            CompletableFuture<Void> write = memory.writeAsync(dataPtr(t), p.data);
            cas = memory.compareAndSwapAsync(statePtr(t), mine, SlotState.of(t, FULL, 0));
            // the takers' waiters word, read after the publishing CAS (one connection: issue order) in the same
            // round trip; a publish that fails only wakes them for nothing
            wakeUps.notifyAfter(takeWaitersPtr);
            memory.await(write);
            long w = memory.await(cas);
            if (w != mine) {
                SlotLostException lost = new SlotLostException(handle.root().name(), t, "producer",
                        SlotState.toString(w));
                discard(p, lost);
                throw lost;
            }
            p.settled = true; // the ring holds it now
        } catch (SlotLostException e) {
            throw e;
        } catch (RuntimeException e) {
            giveBack(t, mine, SlotState.of(t + capacity, EMPTY, 0), p, e);
            throw publishFailure(cas, e);
        } finally {
            leave(t);
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
        return new OutcomeUnknownException("offer", "queue " + handle.root().name() + " ticket", failure);
    }

    /**
     * After a failed verb: moves a slot this node still holds on, so nobody waits for it.
     * A prepared element's block is freed when the slot was given back (the element was
     * never published); otherwise the publish may have run and the ring may hold the
     * block: it is settled and left alone.
     */
    private void giveBack(long t, long mine, long next, Prepared p, RuntimeException failure) {
        boolean givenBack = false;
        boolean answered = false;
        try {
            givenBack = memory.compareAndSwap(statePtr(t), mine, next) == mine;
            answered = true;
        } catch (RuntimeException e) {
            failure.addSuppressed(e);
        }
        BlockRef block = null;
        if (p != null) {
            if (givenBack) {
                discard(p, failure);
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

    /** First delay of a background give-back ({@link #retryGiveBack}); it doubles up to {@link #GIVE_BACK_MAX_NANOS}. */
    static final long GIVE_BACK_FIRST_NANOS = 20_000_000L;
    static final long GIVE_BACK_MAX_NANOS = 1_000_000_000L;
    /** Claims whose give-back failed and is retried in the background: ticket to the claim's state word. */
    private final ConcurrentHashMap<Long, Long> givingBack = new ConcurrentHashMap<>();

    /** The claims (ticket, state) this handle is still giving back in the background (for tests and diagnostics). */
    java.util.Map<Long, Long> givingBack() {
        return java.util.Map.copyOf(givingBack);
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
        io.membus.core.transport.Deadlines.schedule(() -> {
            CompletableFuture<Long> cas;
            try {
                handle.checkDead();
                cas = memory.compareAndSwapAsync(statePtr(t), mine, next);
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
                    wakeUps.notifyAfter(takeWaitersPtr);
                    wakeUps.notifyAfter(putWaitersPtr);
                    if (block != null) {
                        java.util.concurrent.ForkJoinPool.commonPool().execute(() -> {
                            try {
                                allocator.free(block);
                            } catch (RuntimeException x) {
                                LOG.debug("queue {}: freeing the block of an element given back failed: {}",
                                        handle.root().name(), x.toString());
                            }
                        });
                    }
                    LOG.info("queue {}: gave back slot of ticket {} ({}) whose verbs had failed",
                            handle.root().name(), t, SlotState.toString(mine));
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
        LOG.debug("queue {}: giving back slot of ticket {} failed, retrying: {}", handle.root().name(), t, c.toString());
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
    private void unclaim(long t, long expected, long mine, long next, CompletableFuture<Long> cas,
                         RuntimeException failure) {
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

    /**
     * Inserts {@code e} if the ring has room at the tail now. When the slot is still being
     * emptied by a live consumer (which has taken its element), waits for that to finish
     * (two verbs) rather than report a full queue that is not full.
     */
    @Override
    public boolean offer(E e) {
        long start = OperationStats.start();
        Prepared p = prepare(e);
        HeldSlotWait held = new HeldSlotWait("offer");
        RuntimeException failure = null;
        try {
            int r;
            while ((r = tryOffer(p, held)) == BUSY) {
                held.pause();
            }
            return r == OFFERED;
        } catch (RuntimeException ex) {
            failure = ex;
            stats.failed(OFFER);
            throw ex;
        } finally {
            discard(p, failure); // nothing when it was published, or freed already
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
        Prepared p = prepare(e);
        Waiting waiting = new Waiting(wakeUps, putWaitersPtr);
        RuntimeException failure = null;
        long waitedFrom = 0;
        boolean waited = false;
        try {
            while (tryOffer(p, null) != OFFERED) {
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
            discard(p, failure); // nothing when it was published, or freed already
            if (waited) {
                stats.record(WAIT, waitedFrom);
            }
            stats.record(OFFER, start);
        }
    }

    // ------------------------------------------------------------------ consumers

    /** What {@link #tryPoll} returns when the head's offer is still being written by a live producer. */
    private static final Object WRITING_NOW = new Object();

    /**
     * One pass: the element at the head; null when there is none now; {@link #WRITING_NOW}
     * (the head slot's state noted in {@code held}, when given).
     */
    private Object tryPoll(HeldSlotWait held) {
        live();
        long t = headHint.get();
        while (true) {
            long full = SlotState.of(t, FULL, 0);
            long mine = SlotState.of(t, READING, self);
            enter(t);
            CompletableFuture<Long> cas;
            CompletableFuture<byte[]> data;
            long w;
            cas = null;
            try {
                cas = memory.compareAndSwapAsync(statePtr(t), full, mine);
                data = memory.readAsync(dataPtr(t), slotBytes);
                w = memory.await(cas);
            } catch (RuntimeException e) {
                unclaim(t, full, mine, SlotState.of(t + capacity, FULL, 0), cas, e);
                leave(t);
                throw e;
            }
            if (w == full) {
                Runnable hook = afterClaim;
                if (hook != null) {
                    hook.run();
                }
                helpAdvance(headPtr, t);
                headHint.accumulateAndGet(t + 1, Math::max);
                return consume(t, mine, data);
            }
            leave(t);
            long st = SlotState.ticket(w);
            int phase = SlotState.phase(w);
            if (st == t && phase == EMPTY) {
                return takeStranded();
            }
            if (st == t && (phase == WRITING || phase == MOVING)) {
                if (holderDead(w)) {
                    recover(w);
                    continue;
                }
                // its offer has claimed the head, or a remover is moving the head element up
                // by one ticket (or emptying the hole it left): it comes first, in a moment
                if (held != null) {
                    held.saw(t, w);
                }
                return WRITING_NOW;
            }
            if (st >= t) {
                helpAdvance(headPtr, t);
                t = st >= t + capacity ? Math.max(t + 1, memory.readLong(headPtr)) : t + 1;
                headHint.accumulateAndGet(t, Math::max);
                continue;
            }
            if ((phase == READING || phase == MOVING) && holderDead(w)) {
                recover(w); // redelivered as ticket t
                continue;
            }
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
        for (int from = 0; from < capacity; from += STATES_PER_READ) {
            int n = Math.min(STATES_PER_READ, capacity - from);
            byte[] states = memory.read(statesPtr + (long) from * Long.BYTES, n * Long.BYTES);
            for (int i = 0; i < n; i++) {
                long w = Words.getLong(states, i * Long.BYTES);
                if (SlotState.phase(w) != READING || !holderDead(w)) {
                    continue;
                }
                long x = SlotState.ticket(w);
                long mine = SlotState.of(x, READING, self);
                enter(x);
                CompletableFuture<Long> cas;
                CompletableFuture<byte[]> data;
                cas = null;
                try {
                    cas = memory.compareAndSwapAsync(statePtr(x), w, mine);
                    data = memory.readAsync(dataPtr(x), slotBytes);
                    if (memory.await(cas) != w) {
                        leave(x);
                        continue;
                    }
                } catch (RuntimeException e) {
                    unclaim(x, w, mine, SlotState.of(x + capacity, FULL, 0), cas, e);
                    leave(x);
                    throw e;
                }
                return consume(x, mine, data);
            }
        }
        return null;
    }

    /** Reads the claimed slot's element, empties the slot, frees a large element's block. */
    private E consume(long t, long mine, CompletableFuture<byte[]> dataRead) {
        byte[] bytes;
        BlockRef block = null;
        try {
            byte[] data = memory.await(dataRead);
            int length = Words.getInt(data, LENGTH_FIELD);
            if (Words.getInt(data, FORM_FIELD) == FORM_LARGE) {
                block = BlockRef.of(Words.getLong(data, PAYLOAD_FIELD), Words.getLong(data, PAYLOAD_FIELD + 8),
                        Words.getLong(data, PAYLOAD_FIELD + 16));
                bytes = allocator.read(block, 0, length);
            } else {
                bytes = Arrays.copyOfRange(data, PAYLOAD_FIELD, PAYLOAD_FIELD + length);
            }
            CompletableFuture<Long> empty = memory.compareAndSwapAsync(statePtr(t), mine,
                    SlotState.of(t + capacity, EMPTY, 0));
            wakeUps.notifyAfter(putWaitersPtr); // read after the emptying CAS, in its round trip (as publish does)
            long w = memory.await(empty);
            if (w != mine) {
                throw new SlotLostException(handle.root().name(), t, "consumer", SlotState.toString(w));
            }
        } catch (SlotLostException e) {
            leave(t);
            throw e;
        } catch (RuntimeException e) {
            // put it back for another consumer (as the recovery of a dead consumer would)
            giveBack(t, mine, SlotState.of(t + capacity, FULL, 0), null, e);
            leave(t);
            // the claim ran: the element may be taken (the emptying CAS may have run) or moved a lap on
            throw new OutcomeUnknownException("poll", "queue " + handle.root().name() + " ticket " + t, e);
        }
        leave(t);
        if (block != null) {
            allocator.free(block);
        }
        return codec.decode(bytes);
    }

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
        HeldSlotWait held = new HeldSlotWait("poll");
        try {
            while (true) {
                Object r = tryPoll(held);
                if (r != WRITING_NOW) {
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
     * {@link QueueSlotBusyException}: twice the operation timeout plus
     * {@link io.membus.core.OperationDeadline#MARGIN}. A live holder's publishing verbs
     * and its give-back each end by the operation timeout, so a slot still held past this
     * is a claim whose give-back failed, which its holder retries in the background
     * ({@link #retryGiveBack}) until the slot's node answers.
     */
    long heldSlotBoundNanos() {
        return 2 * memory.operationTimeout().toNanos() + io.membus.core.OperationDeadline.MARGIN.toNanos();
    }

    /**
     * One non-blocking call's wait for a slot a live node holds: short pauses, ended by
     * {@link #heldSlotBoundNanos()} from the first pause or by an interrupt, either one
     * with a {@link QueueSlotBusyException} (nothing done; an interrupt's status is kept).
     *
     * <p><b>Note:</b> not thread-safe: one per call, on its thread.
     */
    private final class HeldSlotWait {
        private final String operation;
        private Backoff backoff;
        private long since;
        private long ticket;
        private long state;

        HeldSlotWait(String operation) {
            this.operation = operation;
        }

        /** The held slot the call found (before {@link #pause()}). */
        void saw(long t, long w) {
            ticket = t;
            state = w;
        }

        void pause() {
            if (backoff == null) {
                since = System.nanoTime();
                backoff = new Backoff(Backoff.POLL, since + heldSlotBoundNanos());
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
            return new QueueSlotBusyException(handle.root().name(), operation, ticket, SlotState.toString(state),
                    SlotState.node(state), System.nanoTime() - since, interrupted);
        }
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
        Waiting waiting = new Waiting(wakeUps, takeWaitersPtr);
        long waitedFrom = 0;
        boolean waited = false;
        try {
            while (true) {
                Object r = tryPoll(null);
                if (r != null && r != WRITING_NOW) {
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
        live();
        long t = headHint.get();
        return peekFrom(t, new HeldSlotWait("peek"));
    }

    private E peekFrom(long t, HeldSlotWait held) {
        while (true) {
            CompletableFuture<byte[]> stateRead = memory.readAsync(statePtr(t), Long.BYTES);
            CompletableFuture<byte[]> dataRead = memory.readAsync(dataPtr(t), slotBytes);
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
                if (holderDead(w)) {
                    recover(w);
                } else {
                    held.saw(t, w);
                    held.pause();
                }
                continue;
            }
            if (st >= t) {
                t = st >= t + capacity ? Math.max(t + 1, memory.readLong(headPtr)) : t + 1;
                headHint.accumulateAndGet(t, Math::max);
                continue;
            }
            if ((phase == READING || phase == MOVING) && holderDead(w)) {
                recover(w);
                continue;
            }
            return null;
        }
    }

    /**
     * Decodes the element of FULL slot {@code t} from {@code data} read after state
     * {@code w}, if the slot still holds it (state read again after the data); else null.
     */
    private E readElement(long t, long w, byte[] data) {
        int length = Words.getInt(data, LENGTH_FIELD);
        byte[] bytes;
        if (Words.getInt(data, FORM_FIELD) == FORM_LARGE) {
            BlockRef block = BlockRef.of(Words.getLong(data, PAYLOAD_FIELD), Words.getLong(data, PAYLOAD_FIELD + 8),
                    Words.getLong(data, PAYLOAD_FIELD + 16));
            try {
                bytes = allocator.read(block, 0, length);
            } catch (UseAfterFreeException e) {
                return null; // taken and freed since the state was read
            }
        } else {
            if (length < 0 || length > slotBytes - PAYLOAD_FIELD) {
                return null; // torn: the slot changed under the read; the state check below would fail
            }
            bytes = Arrays.copyOfRange(data, PAYLOAD_FIELD, PAYLOAD_FIELD + length);
        }
        if (memory.readLong(statePtr(t)) != w) {
            return null;
        }
        return codec.decode(bytes);
    }

    // ------------------------------------------------------------------ recovery, hints

    private void enter(long t) {
        inFlight.merge(t, 1, Integer::sum);
    }

    private void leave(long t) {
        inFlight.computeIfPresent(t, (k, n) -> n == 1 ? null : n - 1);
    }

    /** Whether the node holding a WRITING/READING state is dead (see the class comment). */
    private boolean holderDead(long state) {
        int node = SlotState.node(state);
        if (node == self) {
            return !inFlight.containsKey(SlotState.ticket(state));
        }
        return memory.directory().member(node).isEmpty() || memory.transport().isFenced(node);
    }

    /**
     * Moves a dead holder's slot on (one CAS; losing it to another recoverer is fine):
     * {@code WRITING(t) -> EMPTY(t + capacity)} (no element), {@code READING(t) -> FULL(t + capacity)}
     * (delivered again).
     */
    private void recover(long state) {
        long st = SlotState.ticket(state);
        if (SlotState.phase(state) == MOVING) {
            recoverMoving(state);
            return;
        }
        long next = SlotState.phase(state) == WRITING ? SlotState.of(st + capacity, EMPTY, 0)
                : SlotState.of(st + capacity, FULL, 0);
        if (memory.compareAndSwap(statePtr(st), state, next) == state) {
            wakeUps.notifyAfter(takeWaitersPtr);
            wakeUps.notifyAfter(putWaitersPtr);
        }
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
                    + " (queue " + handle.root().name() + " has used up its tickets: use a new queue name)");
        }
    }

    // ------------------------------------------------------------------ views and bulk

    /** The number of FULL slots (one read of the state words per 8192 slots). */
    @Override
    public int size() {
        live();
        int count = 0;
        for (int from = 0; from < capacity; from += STATES_PER_READ) {
            int n = Math.min(STATES_PER_READ, capacity - from);
            byte[] states = memory.read(statesPtr + (long) from * Long.BYTES, n * Long.BYTES);
            for (int i = 0; i < n; i++) {
                if (SlotState.phase(Words.getLong(states, i * Long.BYTES)) == FULL) {
                    count++;
                }
            }
        }
        return count;
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
     * leaves (see {@link #removeTicket}); true only when this call took an element out
     * (an equal element that a consumer took meanwhile does not count: the search goes on).
     */
    @Override
    public boolean remove(Object o) {
        if (o == null) {
            return false;
        }
        Itr it = new Itr(memory.readLong(headPtr), memory.readLong(tailPtr));
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
        return new Itr(memory.readLong(headPtr), memory.readLong(tailPtr));
    }

    private final class Itr implements Iterator<E> {
        private long cursor;
        private final long end;
        private E next;
        private long nextTicket = -1;
        private long nextState;
        private long lastTicket = -1;
        private long lastState;

        Itr(long head, long tail) {
            this.cursor = Math.max(head, tail - capacity);
            this.end = tail;
            advance();
        }

        private void advance() {
            next = null;
            while (cursor < end && next == null) {
                long t = cursor++;
                CompletableFuture<byte[]> stateRead = memory.readAsync(statePtr(t), Long.BYTES);
                CompletableFuture<byte[]> dataRead = memory.readAsync(dataPtr(t), slotBytes);
                long w = Words.getLong(memory.await(stateRead), 0);
                byte[] data = memory.await(dataRead);
                if (w == SlotState.of(t, FULL, 0)) {
                    next = readElement(t, w, data);
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
     * {@code MOVING} slots must be told apart: {@link #recoverMoving}). Costs two round
     * trips per element moved: {@code remove(o)} is linear, as in {@code ArrayBlockingQueue}.
     */
    private boolean removeTicket(long t, long full) {
        synchronized (removals) {
            long gap = SlotState.of(t, MOVING, self);
            enter(t);
            CompletableFuture<Long> cas;
            CompletableFuture<byte[]> data;
            cas = null;
            try {
                cas = memory.compareAndSwapAsync(statePtr(t), full, gap);
                data = memory.readAsync(dataPtr(t), slotBytes);
                if (memory.await(cas) != full) {
                    leave(t);
                    return false;
                }
            } catch (RuntimeException e) {
                unclaim(t, full, gap, full, cas, e); // a MOVING slot is waited for where it is: back in place
                leave(t);
                throw e;
            }
            // linearized: the element is out. Its large block is freed once the gap is closed.
            BlockRef block = null;
            try {
                block = largeBlock(memory.await(data));
                closeGap(t);
            } finally {
                wakeUps.notifyAfter(takeWaitersPtr);
                wakeUps.notifyAfter(putWaitersPtr);
            }
            if (block != null) {
                allocator.free(block);
            }
            return true;
        }
    }

    /** The block a data area names, or null for an inline element. */
    private static BlockRef largeBlock(byte[] data) {
        if (Words.getInt(data, FORM_FIELD) != FORM_LARGE) {
            return null;
        }
        return BlockRef.of(Words.getLong(data, PAYLOAD_FIELD), Words.getLong(data, PAYLOAD_FIELD + 8),
                Words.getLong(data, PAYLOAD_FIELD + 16));
    }

    /**
     * Moves the elements ahead of gap {@code g} (held MOVING by this handle) up, then
     * empties the gap. When a verb fails, the slots this handle holds are left to
     * {@link #recoverMoving} at once (best effort; a slot of this node that no operation
     * holds counts as dead, so this node's next operation that meets it recovers it too).
     */
    private void closeGap(long g) {
        long ahead = -1;
        try {
            while (g > 0) {
                long x = g - 1;
                long full = SlotState.of(x, FULL, 0);
                enter(x);
                ahead = x;
                CompletableFuture<Long> cas = memory.compareAndSwapAsync(statePtr(x), full,
                        SlotState.of(x, MOVING, self));
                CompletableFuture<byte[]> data = memory.readAsync(dataPtr(x), slotBytes);
                if (memory.await(cas) != full) {
                    ahead = -1;
                    leave(x);
                    break; // taken, being taken, or no element: the gap is at the head
                }
                byte[] bytes = memory.await(data);
                long mine = SlotState.of(g, MOVING, self);
                CompletableFuture<Void> write = memory.writeAsync(dataPtr(g), bytes);
                CompletableFuture<Long> publish = memory.compareAndSwapAsync(statePtr(g), mine,
                        SlotState.of(g, FULL, 0));
                memory.await(write);
                long p = memory.await(publish);
                if (p != mine) {
                    leave(g);
                    throw new SlotLostException(handle.root().name(), g, "remover", SlotState.toString(p));
                }
                leave(g);
                wakeUps.notifyAfter(takeWaitersPtr);
                g = x;
                ahead = -1;
            }
            long mine = SlotState.of(g, MOVING, self);
            long w = memory.compareAndSwap(statePtr(g), mine, SlotState.of(g + capacity, EMPTY, 0));
            leave(g);
            if (w != mine) {
                throw new SlotLostException(handle.root().name(), g, "remover", SlotState.toString(w));
            }
        } catch (SlotLostException e) {
            if (ahead >= 0) {
                leave(ahead);
                recoverOwn(ahead, e);
            }
            throw e;
        } catch (RuntimeException e) {
            leave(g);
            if (ahead >= 0) {
                leave(ahead);
                recoverOwn(ahead, e);
            }
            recoverOwn(g, e);
            // the element asked for was taken out (linearized at the claim); closing its gap failed
            throw new OutcomeUnknownException("remove", "queue " + handle.root().name() + " ticket " + g, e);
        }
    }

    /** After a failure: recovers ticket {@code x} if this handle's MOVING claim is still on it. */
    private void recoverOwn(long x, RuntimeException failure) {
        try {
            long w = memory.readLong(statePtr(x));
            if (w == SlotState.of(x, MOVING, self)) {
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
    private void recoverMoving(long state) {
        long x = SlotState.ticket(state);
        int node = SlotState.node(state);
        long after = SlotState.of(x + 1, MOVING, node);
        if (memory.readLong(statePtr(x + 1)) == after) {
            memory.compareAndSwap(statePtr(x), state, SlotState.of(x, FULL, 0)); // a source: stays
        } else {
            if (x > 0) {
                long before = SlotState.of(x - 1, MOVING, node);
                if (memory.readLong(statePtr(x - 1)) == before) {
                    memory.compareAndSwap(statePtr(x - 1), before, SlotState.of(x - 1, FULL, 0));
                }
            }
            memory.compareAndSwap(statePtr(x), state, SlotState.of(x + capacity, EMPTY, 0)); // a gap
        }
        wakeUps.notifyAfter(takeWaitersPtr);
        wakeUps.notifyAfter(putWaitersPtr);
    }

    @Override
    public String toString() {
        return super.toString();
    }
}
