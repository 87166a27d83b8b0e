package io.membus.coherence;

import io.membus.core.Backoff;
import io.membus.core.RemotePtr;
import io.membus.core.Words;
import io.membus.core.error.DsmTimeoutException;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Invalidations, both sides (step 4 of "Writes" and (I3) in {@code docs/coherence.md}):
 * as a writer holding an object's lock, it makes sure no node serves a copy older than
 * the version about to be published — it asks every sharer over the
 * {@link CoherentHeap#INVALIDATE_CHANNEL} to drop its copy and waits for the acks, or,
 * when one does not answer, waits until the lease plus ε has passed — then clears exactly
 * the sharer bits it handled; as a sharer, its handler drops this node's copy (and moves
 * the stripe's epoch) before it answers.
 *
 * <p><b>Note:</b> thread-safe: it keeps no state of its own; the handler runs on the
 * node's message executor, and everything it did (the copy dropped, the epoch moved)
 * happens-before the writer's ack future completes (the {@link io.membus.core.message.Messaging}
 * contract).
 */
final class Invalidator {
    /** How often a writer that waits out a lease looks at its clock again. */
    private static final Backoff.Policy LEASE_POLL = Backoff.Policy.every(200_000);

    private final HeapContext ctx;
    private final CopyCache cache;

    Invalidator(HeapContext ctx, CopyCache cache) {
        this.ctx = ctx;
        this.cache = cache;
    }

    /** Registers the handler of the invalidation channel (a heap with messages). */
    void register() {
        ctx.messaging.register(CoherentHeap.INVALIDATE_CHANNEL, "coherence-invalidate", (from, payload) -> {
            cache.invalidate(Words.getLong(payload, 0));
            return new byte[0];
        });
    }

    void unregister() {
        ctx.messaging.unregister(CoherentHeap.INVALIDATE_CHANNEL);
    }

    /**
     * Makes sure no node serves a cached copy older than the version about to be
     * published: ask every sharer to drop it, and when one does not answer, wait until
     * the lease plus ε has passed. Acks are awaited only until then (at most the
     * deadline): a partitioned sharer costs a writer the rest of the lease, not the
     * whole operation timeout.
     *
     * <p>An interrupt does not end the wait: the caller holds the object's write lock and
     * must publish or release it, which it may do only once no sharer can serve the old
     * version. The wait is bounded (by the lease plus ε and the deadline) and goes on; the
     * interrupt is returned, and the caller re-asserts the thread's flag once the lock is
     * published or released.
     *
     * @return whether the thread was interrupted while it waited (its flag is then clear)
     */
    boolean invalidateSharers(RemoteRef<?> ref, long leaseWord, long sharers, long deadline) {
        long ptr = ref.ptr();
        cache.invalidate(ptr);
        if (sharers == 0 || ctx.clock.nowMicros() > leaseWord + ctx.epsMicros) {
            if (sharers != 0) {
                clearSharers(ref, sharers);
            }
            return false; // nobody can still serve a cached copy
        }
        boolean interrupted = false;
        boolean acked = ctx.messaging != null;
        if (acked) {
            byte[] payload = new byte[8];
            Words.putLong(payload, 0, ptr);
            List<CompletableFuture<byte[]>> asks = new ArrayList<>();
            for (int n = 1; n <= ObjectLayout.MAX_SHARER_NODE; n++) {
                if ((sharers & ObjectLayout.sharerBit(n)) != 0 && n != ctx.self) {
                    asks.add(ctx.messaging.requestAsync(n, CoherentHeap.INVALIDATE_CHANNEL, payload));
                }
            }
            // no ack is worth waiting for past the lease plus ε: by then no sharer may serve its copy anyway
            long leaseOver = System.nanoTime()
                    + Math.max(0, leaseWord + ctx.epsMicros - ctx.clock.nowMicros() + 1) * 1000;
            long waitUntil = Math.min(deadline, leaseOver);
            for (CompletableFuture<byte[]> ask : asks) {
                while (true) {
                    try {
                        long left = Math.max(1, waitUntil - System.nanoTime());
                        ask.get(left, TimeUnit.NANOSECONDS);
                        break;
                    } catch (InterruptedException e) {
                        interrupted = true; // keep waiting (bounded): see above
                    } catch (Exception e) {
                        acked = false; // a sharer that did not answer: its lease must run out
                        break;
                    }
                }
            }
        }
        if (!acked) {
            interrupted |= waitOutLease(leaseWord, deadline, ptr);
        }
        clearSharers(ref, sharers);
        return interrupted;
    }

    /**
     * Removes the sharer bits this writer handled (invalidated, or whose lease it waited
     * out), by CAS, keeping every bit set since it read them: a reader that joined after
     * this writer's read of the sharers may have validated against the version before
     * this write's lock was taken by a later writer, and must stay known to that writer.
     * (Erasing such a bit let a later writer skip a live sharer: caught by the
     * linearizability stress test.)
     */
    private void clearSharers(RemoteRef<?> ref, long handled) {
        long seen = handled;
        for (int i = 0; i < 16; i++) {
            long w = ctx.memory.compareAndSwap(ref.payload() + ObjectLayout.SHARERS, seen, seen & ~handled);
            if (w == seen || (w & handled) == 0) {
                return;
            }
            seen = w;
        }
    }

    /** Waits until the lease plus ε has passed; returns whether the thread was interrupted (flag cleared). */
    private boolean waitOutLease(long leaseWord, long deadline, long ptr) {
        Backoff poll = new Backoff(LEASE_POLL, deadline);
        while (ctx.clock.nowMicros() <= leaseWord + ctx.epsMicros) {
            if (!poll.pauseUninterruptibly()) {
                poll.restoreInterrupt();
                // before the write was published (its lock is released by the caller): it did not run
                throw DsmTimeoutException.notSent("write (waiting out the lease of " + RemotePtr.toString(ptr) + ")",
                        RemotePtr.nodeId(ptr), ctx.config.timeout());
            }
        }
        return poll.tookInterrupt();
    }
}
