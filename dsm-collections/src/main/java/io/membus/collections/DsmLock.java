package io.membus.collections;

import io.membus.core.Backoff;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.DsmException;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A {@link Lock} shared by every node, reentrant per thread, whose every
 * acquisition carries a <em>fencing token</em> that grows (Kleppmann's fencing):
 * {@link #lockWithToken()} / {@link #token()}. A resource that remembers the
 * largest token it has seen and refuses smaller ones is safe against a holder that
 * lost the lock without knowing it.
 *
 * <p>The lock is one word in its root ({@link LockWord}: token, held bit, holder
 * node). Threads of one node first take a local {@link ReentrantLock} (the
 * <em>gate</em>: reentrancy, {@link IllegalMonitorStateException} for a non-holder's
 * {@link #unlock()}, local fairness as {@code ReentrantLock}'s non-fair mode); the
 * thread holding the gate then takes the word by CAS. A reentrant acquisition
 * touches no remote memory and keeps the token.
 *
 * <p><b>Release on failure.</b> A holder whose node is not a live member of the
 * {@link SegmentDirectory} (downed, removed) or is fenced by this node's transport
 * is broken: a waiter takes the word by CAS with the next token. A word that names
 * this very node while no thread of this node holds the gate was left by an earlier
 * incarnation of the node and is broken the same way. The broken holder's
 * {@link #unlock()} then fails with {@link LockLostException}.
 *
 * <p><b>Waiting.</b> A blocked acquisition re-reads the word after a few short
 * pauses (20 µs doubling), then sleeps until a wake-up message from the releasing
 * node ({@link WakeUps}: the waiters word beside the lock word), looking again at
 * least every 50 ms (how a dead holder is noticed); {@code tryLock(time, unit)} and
 * {@code lockInterruptibly()} honour interruption between looks; {@code tryLock(time, unit)}
 * returns by its deadline plus {@link OperationDeadline#MARGIN}: its verbs share that
 * deadline, and one cut off by it returns false, unless it was a CAS that may have taken
 * the word (then its {@link io.membus.core.error.DsmTimeoutException} is thrown: read
 * {@link #holderNode()} to know). {@code lock()} and {@code lockInterruptibly()} have no
 * deadline; a verb of theirs ends by the operation timeout.
 * {@link #lock()} is not interruptible (the interrupt status is kept).
 *
 * <p>{@link #newCondition()} is not supported ({@link UnsupportedOperationException}):
 * a condition would need waiting across nodes that this lock does not provide.
 * Use one {@code DsmLock} per name per node (what {@link DsmCollections} hands out):
 * two handles of one node would take each other for a stale incarnation.
 *
 * <p><b>Note:</b> thread-safe. Mutual exclusion across nodes holds while holders'
 * nodes stay live members; an acquisition's CAS is its linearization point, and the
 * verbs' visibility rule makes everything a holder wrote (with completed verbs)
 * before {@link #unlock()} visible to the next holder's reads after its
 * {@code lock()}. After a break, the tokens order the holders.
 */
public final class DsmLock implements Lock, Rooted {
    static final String DESCRIPTOR = "lock";

    /** Operation kinds counted in {@link #operationStats()}: acquisitions (timed: waits included) and releases. */
    static final String[] OPERATIONS = {"acquire", "release"};
    private static final int ACQUIRE = 0;
    private static final int RELEASE = 1;

    private final Handle handle;
    private final RemoteMemory memory;
    private final long ptr;
    private final int self;
    private final WakeUps wakeUps;
    private final long waitersPtr;
    private final ReentrantLock gate = new ReentrantLock();
    /** The token of the current hold; written and read by the gate's holder only. */
    private long token;

    private DsmLock(Root root, RemoteMemory memory, WakeUps wakeUps) {
        this.handle = new Handle(root, OPERATIONS);
        handle.stats().timed(ACQUIRE);
        this.memory = memory;
        this.ptr = root.bodyPtr() + LockWord.WORD_OFFSET;
        this.waitersPtr = root.bodyPtr() + LockWord.WAITERS_OFFSET;
        this.self = memory.localNodeId();
        this.wakeUps = wakeUps;
    }

    static DsmLock getOrCreate(NamedRoots roots, WakeUps wakeUps, String name) {
        Root root = roots.getOrCreate(name, CollectionKind.LOCK, DESCRIPTOR, LockWord.BODY_LENGTH,
                r -> roots.memory().write(r.bodyPtr(), new byte[LockWord.BODY_LENGTH]));
        return new DsmLock(root, roots.memory(), wakeUps);
    }

    @Override
    public Handle handle() {
        return handle;
    }

    /** The lock word's pointer, once the lock is known to be alive (see {@link Lifecycle}). */
    private long ptr() {
        handle.check();
        return ptr;
    }

    /**
     * Destroys this lock cluster-wide: its name is given back (when still bound to it) and
     * its root freed a grace later; from then on every operation of every handle on it
     * (a waiter's next look too) fails with a {@link StructureGoneException} (within a
     * quarter second on other nodes). Returns whether this call destroyed it.
     *
     * @throws CollectionArgumentException when the handle was not opened through {@link DsmCollections}
     */
    public boolean destroy() {
        return Rooted.destroy(this);
    }

    @Override
    public void lock() {
        try {
            acquire(Backoff.NO_DEADLINE, false, true);
        } catch (InterruptedException e) {
            throw new AssertionError("an uninterruptible acquisition was interrupted", e);
        }
    }

    /** {@link #lock()} and the hold's fencing token. */
    public long lockWithToken() {
        lock();
        return token;
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        acquire(Backoff.NO_DEADLINE, true, true);
    }

    /** One look: takes the lock if it is free (or held by a dead holder) now. */
    @Override
    public boolean tryLock() {
        try {
            return acquire(System.nanoTime(), false, false);
        } catch (InterruptedException e) {
            throw new AssertionError("a single try was interrupted", e);
        }
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        return acquire(Backoff.deadlineIn(unit.toNanos(time)), true, true);
    }

    /**
     * @param wait whether to wait until the deadline; else one look
     * @return whether the lock is held by the calling thread afterwards
     */
    private boolean acquire(long deadline, boolean interruptible, boolean wait) throws InterruptedException {
        long start = OperationStats.start();
        boolean acquired;
        try {
            acquired = acquireUntimed(deadline, interruptible, wait);
        } catch (RuntimeException e) { // counted and timed as a failed acquisition; a time-out (false) is not counted
            handle.stats().record(ACQUIRE, start);
            handle.stats().failed(ACQUIRE);
            throw e;
        }
        if (acquired) {
            handle.stats().record(ACQUIRE, start);
        }
        return acquired;
    }

    private boolean acquireUntimed(long deadline, boolean interruptible, boolean wait) throws InterruptedException {
        if (interruptible && Thread.interrupted()) {
            throw new InterruptedException();
        }
        if (wait && deadline != Backoff.NO_DEADLINE) {
            // the life check may read the root: under the call's deadline too, like every verb of a timed wait
            long scope = OperationDeadline.enterNanos(Math.max(0, Backoff.remaining(deadline)));
            try {
                ptr(); // a reentrant hold touches no word: it too fails once the lock is known to be destroyed
            } catch (DsmException e) {
                if (OperationDeadline.expired()) {
                    return false; // the time ran out on a read: nothing of ours ran
                }
                throw e;
            } finally {
                OperationDeadline.exit(scope);
            }
        } else {
            ptr(); // a reentrant hold touches no word: it too fails once the lock is known to be destroyed
        }
        boolean local;
        if (!wait) {
            local = gate.tryLock();
        } else if (deadline == Backoff.NO_DEADLINE) {
            if (interruptible) {
                gate.lockInterruptibly();
            } else {
                gate.lock();
            }
            local = true;
        } else {
            local = gate.tryLock(Math.max(0, Backoff.remaining(deadline)), TimeUnit.NANOSECONDS);
        }
        if (!local) {
            return false;
        }
        if (gate.getHoldCount() > 1) {
            return true;
        }
        boolean acquired = false;
        try {
            acquired = acquireWord(deadline, interruptible, wait);
            return acquired;
        } finally {
            if (!acquired) {
                gate.unlock();
            }
        }
    }

    private boolean acquireWord(long deadline, boolean interruptible, boolean wait) throws InterruptedException {
        if (!wait || deadline == Backoff.NO_DEADLINE) {
            return acquireWord(deadline, interruptible, wait, null);
        }
        // a timed wait: its verbs end by its deadline too (OperationDeadline), not each by the operation timeout
        long scope = OperationDeadline.enterNanos(Math.max(0, Backoff.remaining(deadline)));
        boolean[] casInFlight = new boolean[1];
        try {
            return acquireWord(deadline, interruptible, wait, casInFlight);
        } catch (DsmException e) {
            if (OperationDeadline.expired() && (!casInFlight[0] || !e.mayHaveRun())) {
                return false; // the time ran out with no CAS of ours that may have taken the word
            }
            throw e;
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /** @param casInFlight when not null, [0] is true while this thread's CAS on the word is in flight */
    private boolean acquireWord(long deadline, boolean interruptible, boolean wait, boolean[] casInFlight)
            throws InterruptedException {
        Waiting waiting = new Waiting(wakeUps, waitersPtr);
        try {
            long word = memory.readLong(ptr());
            while (true) {
                boolean free = !LockWord.held(word);
                if (free || !holderAlive(LockWord.node(word))) {
                    long next = LockWord.token(word) + 1;
                    if (next > LockWord.MAX_TOKEN) {
                        throw new CollectionArgumentException("token", next, "at most " + LockWord.MAX_TOKEN
                                + " acquisitions of lock " + handle.root().name() + ": use a new lock name");
                    }
                    if (casInFlight != null) {
                        casInFlight[0] = true;
                    }
                    long witness = memory.compareAndSwap(ptr(), word, LockWord.held(next, self));
                    if (casInFlight != null) {
                        casInFlight[0] = false;
                    }
                    if (witness == word) {
                        token = next;
                        return true;
                    }
                    word = witness;
                    continue;
                }
                if (!wait || !waiting.next(deadline, interruptible)) {
                    return false;
                }
                word = memory.readLong(ptr());
            }
        } finally {
            waiting.done();
        }
    }

    /**
     * Whether the node named by a held word still holds it: a live, unfenced member
     * other than this node (this node's gate is ours, so a word naming this node is
     * an earlier incarnation's).
     */
    private boolean holderAlive(int node) {
        if (node == self) {
            return false;
        }
        SegmentDirectory directory = memory.directory();
        return directory.member(node).isPresent() && !memory.isFenced(node);
    }

    /**
     * Releases one hold of the calling thread; the last one frees the word (one CAS).
     *
     * @throws IllegalMonitorStateException when the calling thread does not hold the lock
     * @throws LockLostException when the lock was broken by another node since this
     *                           hold began (the local hold is released all the same)
     */
    @Override
    public void unlock() {
        if (!gate.isHeldByCurrentThread()) {
            handle.stats().countFailed(RELEASE);
            throw new IllegalMonitorStateException("lock " + handle.root().name() + " is not held by thread "
                    + Thread.currentThread().getName());
        }
        handle.stats().count(RELEASE);
        try {
            if (gate.getHoldCount() == 1) {
                long mine = LockWord.held(token, self);
                long witness = memory.compareAndSwap(ptr(), mine, LockWord.free(token, self));
                if (witness != mine) {
                    throw new LockLostException(handle.root().name(), token, LockWord.token(witness), LockWord.node(witness),
                            LockWord.held(witness));
                }
                wakeUps.notifyAfter(waitersPtr);
            }
        } catch (RuntimeException e) {
            handle.stats().failed(RELEASE);
            throw e;
        } finally {
            gate.unlock();
        }
    }

    /**
     * The fencing token of the calling thread's hold.
     *
     * @throws IllegalMonitorStateException when the calling thread does not hold the lock
     */
    public long token() {
        if (!gate.isHeldByCurrentThread()) {
            throw new IllegalMonitorStateException("lock " + handle.root().name() + " is not held by thread "
                    + Thread.currentThread().getName());
        }
        return token;
    }

    public boolean isHeldByCurrentThread() {
        return gate.isHeldByCurrentThread();
    }

    /** Holds of the calling thread (0 when it does not hold the lock). */
    public int getHoldCount() {
        return gate.getHoldCount();
    }

    /** Whether any node holds the lock now (one read). */
    public boolean isLocked() {
        return LockWord.held(memory.readLong(ptr()));
    }

    /** The node holding the lock now, or -1 (one read). */
    public int holderNode() {
        long w = memory.readLong(ptr());
        return LockWord.held(w) ? LockWord.node(w) : -1;
    }

    /** The token of the latest acquisition by any node (one read). */
    public long lastToken() {
        return LockWord.token(memory.readLong(ptr()));
    }

    /** Not supported: see the class comment. */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("DsmLock has no conditions: lock " + handle.root().name()
                + "; wait on a DsmQueue or poll shared state instead");
    }

    @Override
    public String toString() {
        long w = memory.readLong(ptr());
        return "DsmLock{name=" + handle.root().name() + ", " + LockWord.toString(w) + "}";
    }
}
