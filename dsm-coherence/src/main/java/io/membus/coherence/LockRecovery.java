package io.membus.coherence;

import io.membus.core.RemotePtr;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.ConcurrentHashMap;

/**
 * Recovers a coherent object's write lock left behind (see "Lock recovery" and (I4) in
 * {@code docs/coherence.md}): a lock whose owner is no live member of the directory, or
 * that this node has seen held, unchanged, for longer than the lock timeout (by its own
 * monotonic clock), is replaced by one CAS from that exact locked header to the next
 * version unlocked over the current slot, so the holder's publish CAS fails
 * ({@link LockBrokenException}) and no value is torn.
 *
 * <p><b>Note:</b> thread-safe: the sightings are a {@link ConcurrentHashMap} updated by
 * {@code compute}; the recovery itself is one remote CAS (the verbs' ordering).
 */
final class LockRecovery {
    private static final Logger LOG = LoggerFactory.getLogger(CoherentHeap.class);

    private final HeapContext ctx;
    /** Per object: the locked header this node saw, and since when ({@link System#nanoTime()}). */
    private final ConcurrentHashMap<Long, long[]> lockSightings = new ConcurrentHashMap<>();

    LockRecovery(HeapContext ctx) {
        this.ctx = ctx;
    }

    /**
     * Recovers the lock of {@code ref}, seen as header {@code h}, if its owner is no live
     * member or this node has seen {@code h} unchanged for longer than the lock timeout;
     * otherwise only records the sighting.
     */
    void maybeRecover(RemoteRef<?> ref, long h) {
        long ptr = ref.ptr();
        int owner = ObjectLayout.owner(h);
        boolean ownerGone = owner != ctx.self && ctx.memory.directory().member(owner).isEmpty();
        long now = System.nanoTime();
        long[] sighting = lockSightings.compute(ptr, (k, old) -> old != null && old[0] == h ? old : new long[] {h, now});
        boolean stale = now - sighting[1] > ctx.config.lockTimeout().toNanos();
        if (!ownerGone && !stale) {
            return;
        }
        long recovered = ObjectLayout.unlocked(ObjectLayout.slot(h), ObjectLayout.version(h) + 1);
        if (ctx.memory.compareAndSwap(ref.payload() + ObjectLayout.HEADER, h, recovered) == h) {
            lockSightings.remove(ptr);
            LOG.warn("recovered the write lock of {} held by node {} ({}): version {} stays current as version {}",
                    RemotePtr.toString(ptr), owner, ownerGone ? "no live member" : "held past the lock timeout",
                    ObjectLayout.version(h), ObjectLayout.version(recovered));
        }
    }
}
