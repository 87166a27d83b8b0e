package io.membus.core.replication;

import io.membus.core.Segment;

/**
 * The copy side of one replica group on this node: its memory, the epoch ({@link Ballot})
 * it follows, the sequence it has applied, and whether it is in sync or still joining.
 *
 * <ul>
 *   <li>An effect is applied only at the copy's own epoch: a lower one is refused
 *       {@link ReplicationCodec#STALE} (its sender was replaced: this is what fences a
 *       cut-off old primary), a higher one {@link ReplicationCodec#NOT_HELD}.</li>
 *   <li>In sync, an effect must carry {@code applied + 1} (the parts of a split effect all
 *       carry it; they are kept until the last part, which applies them all at once and
 *       advances {@code applied}: a fence never sees half a write); a smaller one is a duplicate and is
 *       skipped, a larger one is refused {@link ReplicationCodec#GAP}. Joining, sequences only
 *       grow (effects above the primary's cursor are not sent: their chunk carries them).</li>
 *   <li>The epoch is raised only by a {@link #fence} (a promotion's coordinator) or a new
 *       join, never lowered, never by an effect.</li>
 * </ul>
 *
 * <p><b>Note:</b> thread-safe: every method is synchronized on this copy (records arrive on
 * the message thread of the primary's stream, fences on the coordinator's).
 */
public final class CopyReplica {
    private final int group;
    private final Segment memory;
    private long epoch; // guarded by this
    private long applied; // guarded by this
    private boolean inSync; // guarded by this
    private int primary; // guarded by this
    private boolean dropped; // guarded by this
    /** The parts of a split effect received before its last one: applied together with it (guarded by this). */
    private final java.util.ArrayList<long[]> partOffsets = new java.util.ArrayList<>();
    private final java.util.ArrayList<byte[]> partBytes = new java.util.ArrayList<>();
    private long partSeq = -1; // guarded by this

    CopyReplica(int group, Segment memory, long epoch, long startSeq, int primary) {
        this.group = group;
        this.memory = memory;
        this.epoch = epoch;
        this.applied = startSeq;
        this.primary = primary;
    }

    public int group() {
        return group;
    }

    public Segment memory() {
        return memory;
    }

    public synchronized long epoch() {
        return epoch;
    }

    public synchronized long applied() {
        return applied;
    }

    public synchronized boolean inSync() {
        return inSync;
    }

    /** The node this copy follows (its primary, or the coordinator that fenced it last). */
    public synchronized int primary() {
        return primary;
    }

    synchronized boolean dropped() {
        return dropped;
    }

    synchronized void markDropped() {
        dropped = true;
    }

    /** Checks a record's epoch; {@link ReplicationCodec#OK} when it may be applied. */
    private byte admit(long recordEpoch) {
        if (dropped) {
            return ReplicationCodec.NOT_HELD;
        }
        if (recordEpoch < epoch) {
            return ReplicationCodec.STALE;
        }
        return recordEpoch > epoch ? ReplicationCodec.NOT_HELD : ReplicationCodec.OK;
    }

    /** Applies one (part of an) effect; {@code skip}: the planted fault, acknowledged without applying. */
    synchronized byte effect(long recordEpoch, long seq, long offset, byte[] b, int at, int length, boolean last,
                             boolean skip) {
        byte status = admit(recordEpoch);
        if (status != ReplicationCodec.OK) {
            return status;
        }
        if (inSync) {
            if (seq <= applied) {
                return ReplicationCodec.OK; // a duplicate: applied already
            }
            if (seq != applied + 1) {
                return ReplicationCodec.GAP;
            }
        } else if (seq < applied) {
            return ReplicationCodec.OK; // older than what a chunk brought: the chunk has it
        }
        // (a split effect's parts all carry its sequence; the last one applies them and advances applied)
        if (partSeq != seq) {
            clearParts();
        }
        if (!last) {
            // a part of a large write: kept until its last part, so a fence (a promotion) between two parts never
            // sees the write half applied
            partSeq = seq;
            partOffsets.add(new long[]{offset});
            partBytes.add(java.util.Arrays.copyOfRange(b, at, at + length));
            return ReplicationCodec.OK;
        }
        if (!skip) {
            for (int i = 0; i < partBytes.size(); i++) {
                byte[] part = partBytes.get(i);
                memory.write(partOffsets.get(i)[0], part, 0, part.length);
            }
            memory.write(offset, b, at, length);
        }
        clearParts();
        applied = seq;
        return ReplicationCodec.OK;
    }

    private void clearParts() {
        partSeq = -1;
        partOffsets.clear();
        partBytes.clear();
    }

    /** A chunk of a joining copy's memory, taken by the primary at {@code seq}. */
    synchronized byte chunk(long recordEpoch, long seq, long offset, byte[] b, int at, int length) {
        byte status = admit(recordEpoch);
        if (status != ReplicationCodec.OK) {
            return status;
        }
        memory.write(offset, b, at, length);
        applied = Math.max(applied, seq);
        return ReplicationCodec.OK;
    }

    /** The last chunk was sent at {@code lastSeq}: the copy is complete and in sync from here. */
    synchronized byte done(long recordEpoch, long lastSeq) {
        byte status = admit(recordEpoch);
        if (status != ReplicationCodec.OK) {
            return status;
        }
        applied = Math.max(applied, lastSeq);
        inSync = true;
        return ReplicationCodec.OK;
    }

    /**
     * A coordinator's fence: adopts {@code ballot} if it is not lower than the copy's epoch.
     *
     * @return {@link ReplicationCodec#OK} when adopted (or held already), {@link ReplicationCodec#STALE}
     *         when the copy is at a higher ballot, {@link ReplicationCodec#NOT_HELD} when it is not in sync
     */
    synchronized byte fence(long ballot, int coordinator) {
        if (dropped || !inSync) {
            return ReplicationCodec.NOT_HELD;
        }
        if (ballot < epoch) {
            return ReplicationCodec.STALE;
        }
        clearParts(); // the parts of an effect whose last part did not come: its change did not complete
        epoch = ballot;
        primary = coordinator;
        return ReplicationCodec.OK;
    }

    @Override
    public synchronized String toString() {
        return "CopyReplica{segment=" + GroupId.toString(group) + ", epoch=" + Ballot.toString(epoch) + ", applied="
                + applied + (inSync ? ", in sync" : ", joining") + ", primary=" + primary + "}";
    }
}
