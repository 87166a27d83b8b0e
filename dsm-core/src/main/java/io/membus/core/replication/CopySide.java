package io.membus.core.replication;

import io.membus.core.Segment;
import io.membus.core.error.DsmException;
import io.membus.core.fault.FaultInjector;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The copy side of the forwarding engine: what this node does with the STREAM and FENCE
 * messages of the primaries it copies (docs/replication.md §17.1): records applied once by
 * record number, a gap answered for a resend, JOIN (a new copy's memory, hosted and claimed),
 * EFFECT and CHUNK into the copy, DONE (in sync: the claim published before the ack), DROP;
 * a FENCE raises the copy's ballot. Every answer is an ACK or a STATE.
 *
 * <p><b>Note:</b> thread-safe. A STREAM message runs under its sender's {@link Inbound}
 * monitor (one stream at a time per primary, in order; the copy's own monitor orders its
 * bytes); it may run on the node's message executor or inline on an I/O thread. The copies
 * are in {@link ReplicatorState}'s concurrent map.
 */
final class CopySide extends ReplicatorJob {
    /** The engine's lines keep one logger name, {@code Replicator}, whichever of its jobs says them. */
    private static final Logger LOG = LoggerFactory.getLogger(Replicator.class);
    private final Map<Integer, Inbound> inbound = new ConcurrentHashMap<>();

    /** The copy side's state of the stream from one primary node (guarded by itself). */
    private static final class Inbound {
        long streamId;
        long applied;
    }

    CopySide(ReplicatorState state) {
        super(state);
    }

    byte[] fenced(int from, byte[] payload) {
        ReplicationCodec.Reader r = new ReplicationCodec.Reader(payload, 1, "node " + from);
        int group = r.i32();
        long ballot = r.i64();
        CopyReplica c = state.copies.get(group);
        if (c == null) {
            ReplicaGroup g = state.primaries.get(group);
            return ReplicationCodec.state(g != null && g.epoch() > ballot ? ReplicationCodec.STALE
                    : ReplicationCodec.NOT_HELD, g != null ? g.epoch() : 0, g != null ? g.lastSeq() : 0);
        }
        byte status = c.fence(ballot, from);
        if (status == ReplicationCodec.OK) {
            state.claims.put(group, state.copyClaim(c));
            state.schedulePublish();
        }
        return ReplicationCodec.state(status, c.epoch(), c.applied());
    }

    byte[] stream(int from, byte[] payload) {
        ReplicationCounts.copyHandled();
        Inbound in = inbound.computeIfAbsent(from, n -> new Inbound());
        synchronized (in) {
            ReplicationCodec.Reader r = new ReplicationCodec.Reader(payload, 1, "node " + from);
            long streamId = r.i64();
            long first = r.i64();
            int count = r.i32();
            if (in.streamId != streamId) {
                in.streamId = streamId; // a new stream of that primary (a new service, or a promotion)
                in.applied = 0;
            }
            if (first > in.applied + 1) {
                return ack(streamId, in.applied, true, Map.of());
            }
            Map<Integer, long[]> results = new LinkedHashMap<>();
            FaultInjector.StreamRule rule = state.transport.faults().streamRule(from);
            for (int i = 0; i < count; i++) {
                long no = first + i;
                int kind = r.u8();
                int group = r.i32();
                long epoch = r.i64();
                boolean fresh = no > in.applied;
                byte status;
                switch (kind) {
                    case ReplicationCodec.EFFECT -> {
                        long seq = r.i64();
                        long offset = r.i64();
                        int length = r.i32();
                        boolean last = r.u8() != 0;
                        int at = r.skip(length);
                        status = fresh ? effect(group, epoch, seq, offset, r.array(), at, length, last,
                                rule != null && rule.skips(seq)) : ReplicationCodec.OK;
                    }
                    case ReplicationCodec.CHUNK -> {
                        long seq = r.i64();
                        long offset = r.i64();
                        int length = r.i32();
                        r.u8();
                        int at = r.skip(length);
                        status = fresh ? chunk(group, epoch, seq, offset, r.array(), at, length) : ReplicationCodec.OK;
                    }
                    case ReplicationCodec.JOIN -> {
                        long startSeq = r.i64();
                        long size = r.i64();
                        int flags = r.i32();
                        long key = r.i64();
                        status = fresh ? join(from, group, epoch, startSeq, size, flags, key) : ReplicationCodec.OK;
                    }
                    case ReplicationCodec.DONE -> {
                        long lastSeq = r.i64();
                        status = fresh ? done(group, epoch, lastSeq) : ReplicationCodec.OK;
                    }
                    case ReplicationCodec.DROP -> status = fresh ? drop(group, epoch) : ReplicationCodec.OK;
                    default -> throw new io.membus.core.error.ProtocolException("node " + from,
                            "unknown replication record kind " + kind);
                }
                if (fresh) {
                    in.applied = no;
                }
                results.put(group, result(group, status));
            }
            return ack(streamId, in.applied, false, results);
        }
    }

    /** (status, epoch, applied, inSync) of {@code group} here after a record. */
    private long[] result(int group, byte status) {
        CopyReplica c = state.copies.get(group);
        if (c != null) {
            return new long[]{status, c.epoch(), c.applied(), c.inSync() ? 1 : 0};
        }
        ReplicaGroup g = state.primaries.get(group);
        return new long[]{status, g != null ? g.epoch() : 0, g != null ? g.lastSeq() : 0, 0};
    }

    private static byte[] ack(long streamId, long applied, boolean gap, Map<Integer, long[]> results) {
        ReplicationCodec.Writer w = new ReplicationCodec.Writer(1 + 8 + 8 + 1 + 4 + results.size() * (4 + 1 + 8 + 8 + 1));
        w.u8(ReplicationCodec.ACK).i64(streamId).i64(applied).u8(gap ? 1 : 0).i32(results.size());
        results.forEach((group, v) -> w.i32(group).u8((int) v[0]).i64(v[1]).i64(v[2]).u8((int) v[3]));
        return w.array();
    }

    /** The status of a record for a group this node does not hold as a copy. */
    private byte notACopy(int group, long epoch) {
        ReplicaGroup g = state.primaries.get(group);
        return g != null && g.epoch() > epoch ? ReplicationCodec.STALE : ReplicationCodec.NOT_HELD;
    }

    private byte effect(int group, long epoch, long seq, long offset, byte[] b, int at, int length, boolean last,
                        boolean skip) {
        CopyReplica c = state.copies.get(group);
        if (c == null) {
            return notACopy(group, epoch);
        }
        if (skip && last) {
            LOG.warn("replication: planted fault: node {} acknowledges sequence {} of segment {} without applying it",
                    state.self, seq, GroupId.toString(group));
        }
        return c.effect(epoch, seq, offset, b, at, length, last, skip);
    }

    private byte chunk(int group, long epoch, long seq, long offset, byte[] b, int at, int length) {
        CopyReplica c = state.copies.get(group);
        return c == null ? notACopy(group, epoch) : c.chunk(epoch, seq, offset, b, at, length);
    }

    private byte join(int from, int group, long epoch, long startSeq, long size, int flags, long key) {
        // a leaving node still accepts a JOIN that was on its way before its LEAVING reached the primary: refused, it
        // made the primary log every chunk of the join as an ERROR (CleanLogTest); the copy is dropped when the
        // primary takes it out of its group, or at close()
        if (state.service.closed()) {
            return ReplicationCodec.NOT_HELD;
        }
        ReplicaGroup g = state.primaries.get(group);
        if (g != null && g.serving()) {
            return g.epoch() > epoch ? ReplicationCodec.STALE : ReplicationCodec.NOT_HELD;
        }
        CopyReplica old = state.copies.get(group);
        if (old != null && old.epoch() > epoch) {
            return ReplicationCodec.STALE;
        }
        if (old != null) {
            state.dropCopy(old);
        }
        Segment m = Segment.allocate(GroupId.node(group), 0, GroupId.index(group), size, flags, (address, bytes) -> key);
        CopyReplica c = new CopyReplica(group, m, epoch, startSeq, from);
        Hosted h = new Hosted(group, m);
        h.copy(c);
        state.copies.put(group, c);
        if (state.service.closed()) { // close() ran meanwhile and may not have seen this copy: free it here
            state.dropCopy(c);
            return ReplicationCodec.NOT_HELD;
        }
        state.transport.table().host(h);
        state.claims.put(group, state.copyClaim(c));
        state.schedulePublish();
        LOG.info("replication: node {} receives a copy of segment {} from node {} ({} bytes, epoch {})", state.self,
                GroupId.toString(group), from, size, Ballot.toString(epoch));
        return ReplicationCodec.OK;
    }

    private byte done(int group, long epoch, long lastSeq) {
        CopyReplica c = state.copies.get(group);
        if (c == null) {
            return notACopy(group, epoch);
        }
        byte status = c.done(epoch, lastSeq);
        if (status == ReplicationCodec.OK) {
            state.claims.put(group, state.copyClaim(c));
            // published before the DONE is acknowledged: once the primary lists this node in sync, the directory
            // knows it as a COPY holder, so a promotion can count on it (a JOINING holder is never promoted)
            try {
                state.publishNow();
            } catch (DsmException e) {
                LOG.warn("replication: node {} could not publish its copy of segment {}: {}", state.self,
                        GroupId.toString(group), e.getMessage());
                state.schedulePublish();
            }
        }
        return status;
    }

    private byte drop(int group, long epoch) {
        CopyReplica c = state.copies.get(group);
        if (c == null) {
            return ReplicationCodec.OK;
        }
        if (epoch < c.epoch()) {
            return ReplicationCodec.STALE;
        }
        state.dropCopy(c);
        return ReplicationCodec.OK;
    }

    /** The position of every incoming stream, for {@link Replicator#describe()}. */
    void describe(StringBuilder b) {
        inbound.forEach((n, in) -> {
            synchronized (in) {
                b.append("\n  inbound from ").append(n).append(": applied=").append(in.applied);
            }
        });
    }
}
