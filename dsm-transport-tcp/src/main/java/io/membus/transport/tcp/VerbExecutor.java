package io.membus.transport.tcp;

import io.membus.core.Access;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeFencedException;
import io.membus.core.error.VerbException;
import io.membus.core.replication.AckGate;
import io.membus.core.transport.SegmentTable;
import io.netty.buffer.ByteBuf;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The soft NIC's execution of one connection's verbs on this node's segment table:
 * checks (fencing, the table's checks), the memory operation, and the answer (OK with
 * its result, or ERROR with the typed failure) written to a buffer. Keeps the rule of
 * the LINKED flag: a verb linked to one that failed, or was dropped by a fault rule, is
 * not run and is answered NOT_RUN. Used by both ways a target serves a connection: the
 * Netty channel ({@link ServerHandler}) and the blocking lane server ({@link LaneServer}).
 *
 * <p>Replicated segments: after a verb ran, the executor asks the table for the verb's
 * {@link AckGate} ({@link SegmentTable#gate}); {@code null} (not replicated) answers as
 * before, and that look-up is all an unreplicated verb pays. Otherwise it reads the
 * gate's {@link AckGate#need() need} after the verb ran; when that is acknowledged
 * already the answer may leave at once, else {@link #waiting()} returns what the caller
 * must wait for before the answer it just wrote may leave (the answer is written into
 * the buffer all the same; the caller holds it back). The LINKED rule stays decided by
 * execution: a verb that ran succeeded for the verb linked to it, whatever its gate
 * reports later.
 *
 * <p><b>Note:</b> not thread-safe: one per connection, used by the thread that serves it.
 * A {@link Waiting} it returns is immutable and may be handed to any thread.
 */
final class VerbExecutor {
    private static final Logger LOG = LoggerFactory.getLogger(VerbExecutor.class);
    private static final int SCRATCH_KEEP = 64 * 1024;

    private final TcpTransport transport;
    private final SegmentTable table;
    /** The transport's test hook for gates, or null: {@link SegmentTable#gate} (read once, at creation). */
    private final GateLookup gates;
    /** What the last verb's answer waits for, or null when it may leave now. */
    private Waiting waiting;
    /** Copy buffer of reads and writes; allocated at the first verb, so a peer that never authenticates costs none. */
    private byte[] scratch = new byte[0];
    /** Whether the last verb failed or was dropped: a LINKED verb after it is not run. */
    private boolean lastVerbFailed;

    VerbExecutor(TcpTransport transport) {
        this.transport = transport;
        this.table = transport.table();
        this.gates = transport.gateLookup;
    }

    /**
     * Where the executor finds a verb's {@link AckGate}: {@link SegmentTable#gate} unless a
     * test plugs another in ({@code TcpTransport.gateLookup}).
     *
     * <p><b>Note:</b> implementations must be thread-safe and must not block: they are
     * called on I/O threads and lane threads after every verb.
     */
    @FunctionalInterface
    interface GateLookup {
        /** The gate of the replica group {@code ptr} belongs to, or {@code null} when it is not replicated. */
        AckGate gate(long ptr);
    }

    /**
     * An answer written but not yet allowed to leave: it may leave once {@code gate}
     * acknowledged {@code need}; if the gate fails first, an ERROR frame with that failure
     * replaces it ({@link #writeFailure}).
     *
     * <p><b>Note:</b> immutable; thread-safe.
     */
    record Waiting(AckGate gate, long need, long correlationId, byte opcode, int length, long ptr) {
        /** Writes the ERROR frame that answers the verb instead, with the gate's typed failure. */
        void writeFailure(ByteBuf o, DsmException failure) {
            VerbExecutor.writeFailure(o, correlationId, length, ptr, failure);
        }
    }

    /**
     * What the answer written by the last {@link #execute} waits for: null when it may
     * leave now (the verb failed, its segment is not replicated, or its need was
     * acknowledged already).
     */
    Waiting waiting() {
        return waiting;
    }

    /** A fault rule dropped the connection's next verb: it never ran, so a verb linked to it must not run either. */
    void dropped() {
        lastVerbFailed = true;
    }

    /** Runs the verb request in {@code frame} (validated, opcode READ..FAA) from {@code initiatorNode}; answers into {@code o}. */
    void execute(Frame frame, int initiatorNode, ByteBuf o) {
        long corr = frame.correlationId();
        long ptr = frame.longAt(Frame.PTR_FIELD_OFFSET);
        long key = frame.longAt(Frame.REMOTE_KEY_FIELD_OFFSET);
        byte op = frame.opcode();
        int length = switch (op) {
            case Frame.OP_READ, Frame.OP_WRITE -> frame.intAt(Frame.VERB_LENGTH_FIELD_OFFSET);
            default -> 8;
        };
        waiting = null;
        if (lastVerbFailed && (frame.flags() & Frame.FLAG_LINKED) != 0) {
            Frame.writeError(o, corr, ErrorCode.NOT_RUN.wire(), length, ptr, 0, Frame.opName(op)
                    + " not run on node " + transport.nodeId() + ": it was linked to the verb before it, which failed");
            return; // lastVerbFailed stays: a chain stops at its first failure
        }
        lastVerbFailed = true; // until the verb below succeeds
        try {
            if (transport.isFenced(initiatorNode)) {
                throw NodeFencedException.unknownOutcome(transport.nodeId(), "node " + transport.nodeId() + " fenced node "
                        + initiatorNode + ": " + transport.fenceReason(initiatorNode));
            }
            switch (op) {
                case Frame.OP_READ -> {
                    Segment s = transport.table().check(ptr, key, length, Access.READ, false);
                    byte[] dst = scratch(length);
                    s.read(RemotePtr.offset(ptr), dst, 0, length);
                    Frame.writeHeader(o, Frame.OP_OK, corr, length);
                    o.writeBytes(dst, 0, length);
                }
                case Frame.OP_WRITE -> {
                    transport.table().check(ptr, key, length, Access.WRITE, false); // before the copy: allocates nothing
                    byte[] src = scratch(length);
                    frame.bytesAt(Frame.WRITE_DATA_FIELD_OFFSET, src, 0, length);
                    // through the table: a replicated segment's change is sequenced and forwarded by its group
                    // (the answer's wait for the copies is the caller's: SegmentTable.gate)
                    transport.table().writeNoWait(ptr, key, src, 0, length);
                    Frame.writeHeader(o, Frame.OP_OK, corr, 0);
                }
                case Frame.OP_CAS -> Frame.writeOkValue(o, corr, transport.table().compareAndSwapNoWait(ptr, key,
                        frame.longAt(Frame.EXPECTED_FIELD_OFFSET), frame.longAt(Frame.UPDATE_FIELD_OFFSET)));
                default -> Frame.writeOkValue(o, corr, transport.table().fetchAndAddNoWait(ptr, key,
                        frame.longAt(Frame.DELTA_FIELD_OFFSET)));
            }
            lastVerbFailed = false;
        } catch (DsmException e) {
            writeFailure(o, corr, length, ptr, e);
            return;
        } catch (RuntimeException e) {
            LOG.warn("verb {} from node {} failed unexpectedly", Frame.opName(op), initiatorNode, e);
            Frame.writeError(o, corr, ErrorCode.INTERNAL.wire(), length, ptr, 0, "verb failed on node "
                    + transport.nodeId() + ": " + e);
            return;
        }
        // the verb ran: a replicated segment's answer leaves only once its copies have what it changed or saw.
        // Outside the try: its OK is written, so a failure here must not add an ERROR behind it (a gate that
        // throws is a bug of the engine; it ends the connection)
        AckGate g = gates == null ? table.gate(ptr) : gates.gate(ptr);
        if (g != null) {
            long need = g.need(); // after the verb ran (AckGate's contract)
            if (!g.acked(need)) {
                waiting = new Waiting(g, need, corr, op, length, ptr);
            }
        }
    }

    /** An ERROR frame answering verb {@code corr} with the typed failure {@code e}. */
    static void writeFailure(ByteBuf o, long corr, int length, long ptr, DsmException e) {
        if (e instanceof VerbException v) {
            Frame.writeError(o, corr, v.code().wire(), v.length(), v.ptr(), v.detail(), null);
        } else {
            Frame.writeError(o, corr, e.code().wire(), Frame.errorReasons(e), length, ptr, 0, e.getMessage());
        }
    }

    private byte[] scratch(int length) {
        if (length <= scratch.length) {
            return scratch;
        }
        byte[] b = new byte[Math.max(length, 4096)];
        if (b.length <= SCRATCH_KEEP) {
            scratch = b;
        }
        return b;
    }
}
