package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.core.Words;
import io.membus.core.time.TimerWheel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The life cycle of the named structures of one {@link DsmCollections}: destroys them
 * ({@link NamedRoots#destroy}) and frees their blocks a <b>grace</b> later, and gives
 * each handle the {@link Life} that notices its structure was destroyed.
 *
 * <p>Why a grace, and why handles check: hot paths are raw verbs on the structure's
 * words (no block-header check per operation), so a handle that kept running on a
 * destroyed structure whose blocks were freed and handed out again would change
 * another structure's bytes. Instead, every handle re-reads its root (checked against
 * the root block's generation) at least every {@link #checkNanos()} before it issues
 * an operation, and fails with a {@link StructureGoneException} once the root is a
 * tombstone; the blocks are freed {@link #grace()} after the tombstone. An operation
 * that passed its check before the tombstone issues its verbs within the check
 * interval and they complete (or fail) within the operation deadline, so with a grace
 * above the check interval plus the verb deadline no verb of a handle lands in a freed
 * block. The grace must therefore exceed {@code membus.operation-timeout} (default
 * grace 30 s); a thread paused longer than the grace between its check and its verb
 * (or the shared timer wheel's thread that late in ending a look's trust) is the one
 * case this time bound does not cover. A map's leased cache hit issues no verb and so
 * looks only at the known verdict ({@link Life#checkDead()}): a destroy elsewhere is
 * seen by its next miss, fill or change, at the latest when its lease ends.
 *
 * <p>{@link #close()} (the facade's {@code Membus.close()}) makes every handle fail at
 * once with a {@link io.membus.core.error.DsmClosedException} naming its structure.
 *
 * <p><b>Note:</b> thread-safe: the grace is a volatile field; releases are armed on the
 * shared {@link TimerWheel} and run on one JVM-wide daemon thread ({@code membus-destroy}),
 * one at a time; a failed release is logged and its remaining blocks stay allocated.
 */
final class Lifecycle {
    private static final Logger LOG = LoggerFactory.getLogger(Lifecycle.class);
    static final Duration DEFAULT_GRACE = Duration.ofSeconds(30);
    private static final long MAX_CHECK_NANOS = 250_000_000L;

    /** Frees destroyed structures' blocks, JVM-wide, off the timer wheel's thread (frees are verbs). */
    private static final ExecutorService RELEASER = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "membus-destroy");
        t.setDaemon(true);
        return t;
    });

    private final NamedRoots roots;
    /** This node's coherent heap (null when it has none): frees destroyed named coherent objects. */
    private final io.membus.coherence.CoherentHeap heap;
    private volatile long graceNanos = DEFAULT_GRACE.toNanos();
    private final AtomicInteger pending = new AtomicInteger();
    /** The lives of the handles opened here and not known dead: {@link #close()} marks them. */
    private final java.util.Set<Life> lives = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    Lifecycle(NamedRoots roots, io.membus.coherence.CoherentHeap heap) {
        this.roots = roots;
        this.heap = heap;
    }

    Duration grace() {
        return Duration.ofNanos(graceNanos);
    }

    void grace(Duration grace) {
        this.graceNanos = grace.toNanos();
    }

    /** How long a handle trusts its last look at its root: a quarter of the grace, at most 250 ms. */
    long checkNanos() {
        return Math.min(MAX_CHECK_NANOS, graceNanos / 4);
    }

    /** Releases armed and not finished yet. */
    int pendingReleases() {
        return pending.get();
    }

    Life life(Root root) {
        Life life = new Life(root, this);
        lives.add(life);
        if (closed) {
            life.markClosed();
        }
        return life;
    }

    /**
     * This node's collections are closed: every handle's next operation fails at once with
     * a {@link io.membus.core.error.DsmClosedException} naming its structure
     * (e.g. {@code DsmMap 'orders'}). Blocks already armed for release are still freed.
     */
    void close() {
        closed = true;
        for (Life life : lives) {
            life.markClosed();
        }
    }

    /** Destroys what {@code name} is bound to; see {@link NamedRoots#destroy(String, java.util.function.Consumer)}. */
    boolean destroy(String name) {
        return roots.destroy(name, this::releaseLater);
    }

    /** Destroys the structure of {@code root} (a handle's own). */
    boolean destroy(Root root) {
        return roots.destroy(root.name(), root.block().ptr(), this::releaseLater);
    }

    private void releaseLater(Root root) {
        if (root.kind() == CollectionKind.REF) {
            // a coherent object checks its generation on every use: freed now, every handle on it fails from now on
            freeRefObject(root);
        }
        pending.incrementAndGet();
        TimerWheel.SHARED.arm(new TimerWheel.Timeout() {
            @Override
            protected void expired() {
                RELEASER.execute(() -> release(root));
            }
        }, System.nanoTime() + graceNanos);
    }

    /** Frees the structure's blocks beside its root, then the root. */
    private void release(Root root) {
        GlobalAllocator allocator = roots.allocator();
        try {
            switch (root.kind()) {
                case LONG_ARRAY, DOUBLE_ARRAY -> StripedWords.release(allocator, root);
                case MAP -> MapRoot.releaseNamed(allocator, root); // every entry, table and lease table
                case QUEUE -> DsmQueue.releaseNamed(allocator, root);
                case ATOMIC_LONG, LOCK, REF -> {
                    // the root holds every word (a REF's object was freed at the destroy)
                }
            }
            allocator.free(root.block());
        } catch (RuntimeException e) {
            LOG.warn("destroyed structure {}: freeing its blocks failed; what was not freed stays allocated: {}",
                    root, e.toString());
        } finally {
            pending.decrementAndGet();
        }
    }

    /** Frees the coherent object a REF root names (invalidating every cached copy first). */
    private void freeRefObject(Root root) {
        byte[] words = roots.memory().read(root.bodyPtr(), 16);
        long ptr = Words.getLong(words, 0);
        long generation = Words.getLong(words, 8);
        if (ptr == 0) {
            return;
        }
        try {
            if (heap == null) {
                roots.allocator().free(BlockRef.of(ptr, generation, 0));
            } else {
                heap.open(ptr, generation, io.membus.codec.Codecs.bytes()).free();
            }
        } catch (io.membus.alloc.StaleBlockReferenceException e) {
            // freed already
        }
    }

    /**
     * A handle's view of its root's life: {@link #check()} before each operation that
     * issues verbs on the structure's words, {@link #checkDead()} where no verb is issued
     * (a map's leased cache hit).
     *
     * <p>No clock read on the hot path: a good look at the root sets {@link #fresh} and
     * arms this life's entry of the shared {@link TimerWheel} to clear it one check
     * interval after the time read before the look; while fresh, {@link #check()} is one
     * volatile read. A wheel thread late under load lengthens the trust by its lateness,
     * like a paused caller thread (see {@link Lifecycle}).
     *
     * <p><b>Note:</b> thread-safe: {@code fresh} and the verdict ({@code dead}: the
     * structure was destroyed, or this node's collections were closed) are volatile; the
     * verdict is written before {@code fresh} is cleared, and a look re-reads the verdict
     * after setting {@code fresh}, so a verdict is never hidden by a concurrent look.
     * Concurrent looks may both read the root (harmless); an earlier look's timer may
     * clear {@code fresh} early (only costs a look).
     */
    static final class Life {
        private final Root root;
        private final Lifecycle lifecycle;
        private volatile boolean fresh;
        private volatile io.membus.core.error.DsmException dead;
        private final TimerWheel.Timeout stale = new TimerWheel.Timeout() {
            @Override
            protected void expired() {
                fresh = false;
            }
        };

        Life(Root root, Lifecycle lifecycle) {
            this.root = root;
            this.lifecycle = lifecycle;
        }

        /**
         * Fails with a {@link StructureGoneException} when the structure was destroyed, a
         * {@link io.membus.core.error.DsmClosedException} naming the structure when this
         * node's collections were closed; reads the root (two verbs) when the last look is
         * older than the check interval. One volatile read while the last look is fresh.
         */
        void check() {
            if (!fresh) {
                look();
            }
        }

        /** Fails as {@link #check()} when the verdict is known; never reads the root or the clock. */
        void checkDead() {
            io.membus.core.error.DsmException d = dead;
            if (d != null) {
                throw d.forCaller();
            }
        }

        private void look() {
            checkDead();
            long now = System.nanoTime(); // the time before the read: the look vouches for no longer than it should
            long magic;
            try {
                magic = Words.getLong(lifecycle.roots.allocator().read(root.block(), RootDescriptor.MAGIC_OFFSET,
                        Long.BYTES), 0);
            } catch (io.membus.alloc.StaleBlockReferenceException e) {
                throw die(NamedRoots.gone(root.name(), root.block().ptr(), "destroyed (its root block was freed)"));
            }
            if (magic != RootDescriptor.MAGIC) {
                throw die(NamedRoots.gone(root.name(), root.block().ptr(), magic == RootDescriptor.TOMBSTONE
                        ? "destroyed" : "its root was overwritten (magic=0x" + Long.toHexString(magic) + ")"));
            }
            fresh = true;
            TimerWheel.SHARED.arm(stale, now + lifecycle.checkNanos());
            if (dead != null) { // destroyed or closed while we looked: the verdict wins
                fresh = false;
                checkDead();
            }
        }

        private io.membus.core.error.DsmException die(io.membus.core.error.DsmException verdict) {
            dead = verdict;
            fresh = false;
            TimerWheel.SHARED.cancel(stale);
            lifecycle.lives.remove(this);
            return verdict;
        }

        /** Destroys this handle's structure; see {@link NamedRoots#destroy(String, long, java.util.function.Consumer)}. */
        boolean destroy() {
            boolean done = lifecycle.destroy(root);
            markGone();
            return done;
        }

        /** Looks at the root now (whatever the last look's age); returns whether the structure is gone. */
        boolean lookNow() {
            fresh = false;
            try {
                check();
                return false;
            } catch (StructureGoneException e) {
                return true;
            }
        }

        /** This node destroyed the structure: fail from now on without another look. */
        void markGone() {
            die(NamedRoots.gone(root.name(), root.block().ptr(), "destroyed"));
        }

        /** This node's collections were closed: fail from now on, naming the structure (unless destroyed first). */
        void markClosed() {
            if (dead == null) {
                die(new io.membus.core.error.DsmClosedException(what(root)));
            }
        }

        Root root() {
            return root;
        }
    }

    /** How errors name a structure: its type and name, e.g. {@code DsmMap 'orders'}. */
    static String what(Root root) {
        String type = switch (root.kind()) {
            case MAP -> "DsmMap";
            case ATOMIC_LONG -> "DsmAtomicLong";
            case LONG_ARRAY -> "DsmLongArray";
            case DOUBLE_ARRAY -> "DsmDoubleArray";
            case QUEUE -> "DsmQueue";
            case LOCK -> "DsmLock";
            case REF -> "RemoteRef";
        };
        return type + " '" + root.name() + "'";
    }
}
