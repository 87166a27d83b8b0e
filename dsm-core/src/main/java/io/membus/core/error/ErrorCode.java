package io.membus.core.error;

/**
 * The category of every {@link DsmException}, with a stable one-byte code so that
 * transports can carry a failure across the wire and rebuild the same typed
 * exception on the initiator.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public enum ErrorCode {
    /** A verb touched bytes outside its segment. */
    OUT_OF_BOUNDS(1),
    /** A verb named a remote key that is not the segment's. */
    WRONG_REMOTE_KEY(2),
    /** The segment's access flags do not allow the verb. */
    ACCESS_DENIED(3),
    /** An atomic verb's target is not 8-byte aligned. */
    MISALIGNED_ATOMIC(4),
    /** The pointer names a segment the node does not export. */
    UNKNOWN_SEGMENT(5),
    /** The pointer is null, or names another node than the connection's. */
    INVALID_POINTER(6),
    /** The node restarted: the pointer or connection belongs to an earlier incarnation. */
    STALE_INCARNATION(7),
    /** The node is down, fenced, unreachable, or its connection was lost. */
    NODE_UNAVAILABLE(8),
    /** An operation passed its deadline. */
    TIMEOUT(9),
    /** A peer sent bytes that are not a valid frame. */
    PROTOCOL(10),
    /** A peer failed authentication. */
    AUTHENTICATION(11),
    /** A configuration value is missing or not allowed. */
    CONFIG(12),
    /** A transport cannot run on this machine (missing library or device). */
    TRANSPORT_UNAVAILABLE(13),
    /** A reference to a block that has been freed since. */
    USE_AFTER_FREE(14),
    /** No remote memory is left for an allocation. */
    OUT_OF_REMOTE_MEMORY(15),
    /** A verb's length is negative or larger than a transport can carry. */
    BAD_LENGTH(16),
    /** A value could not be encoded or decoded (unregistered class, corrupt bytes, wrong codec). */
    CODEC(17),
    /** A blocking call was made on a transport thread, where waiting would deadlock. */
    WRONG_THREAD(18),
    /** A named structure exists with another type than the one asked for, or the name is not a structure's. */
    WRONG_TYPE(19),
    /** A message named a channel no handler is registered for on its receiver. */
    UNKNOWN_CHANNEL(20),
    /** A message (or its reply) is larger than the receiver's maximum message size. */
    MESSAGE_TOO_LARGE(21),
    /** A message handler threw; the receiver logged it and answered with this failure. */
    HANDLER_FAILED(22),
    /** A coherent object's write lock was broken (its owner was presumed dead) before the write published. */
    LOCK_BROKEN(23),
    /**
     * A linked verb was not run because the verb before it on its connection failed
     * (a write-then-compare-and-swap pair: the swap runs only after its write succeeded).
     */
    NOT_RUN(24),
    /**
     * The object was closed by its owner on this node (a {@code Membus}, a node, its
     * transport, a heap, a collection handle): it cannot be used again; create a new one.
     */
    CLOSED(25),
    /**
     * A verb reached a node that does not serve its replica group at the current epoch
     * (a copy, or an old primary that was replaced). It did not run; the initiator
     * re-routes it to the group's primary.
     */
    NOT_PRIMARY(26),
    /** Every holder of a replica group died: its memory is gone (see docs/replication.md). */
    SEGMENT_LOST(27),
    /** A failure that has no category of its own; the message says what happened. */
    INTERNAL(127);

    private static final ErrorCode[] BY_WIRE = new ErrorCode[128];

    static {
        for (ErrorCode code : values()) {
            BY_WIRE[code.wire] = code;
        }
    }

    private final byte wire;

    ErrorCode(int wire) {
        this.wire = (byte) wire;
    }

    /** The stable one-byte code of this category. */
    public byte wire() {
        return wire;
    }

    /** The category with the given wire code, or {@link #INTERNAL} for an unknown code. */
    public static ErrorCode fromWire(int wire) {
        if (wire < 0 || wire >= BY_WIRE.length || BY_WIRE[wire] == null) {
            return INTERNAL;
        }
        return BY_WIRE[wire];
    }
}
