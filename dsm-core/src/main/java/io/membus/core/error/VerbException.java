package io.membus.core.error;

import io.membus.core.RemotePtr;

/**
 * A verb refused by its target before it touched any byte: the pointer, length or
 * remote key did not pass the target's checks. Carries the pointer, the length
 * and one category-specific fact ({@link #detail()}), which is exactly what a
 * transport puts on the wire, so the initiator rebuilds the same exception with
 * {@link #decode}.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public abstract class VerbException extends DsmException {

    /** The target checks every verb before any byte is touched: a refused verb did nothing. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }

    private static final long serialVersionUID = 1L;

    private final long ptr;
    private final int length;
    private final long detail;

    protected VerbException(ErrorCode code, long ptr, int length, long detail, String message) {
        super(code, message);
        this.ptr = ptr;
        this.length = length;
        this.detail = detail;
    }

    /** The remote pointer the verb named. */
    public long ptr() {
        return ptr;
    }

    public int nodeId() {
        return RemotePtr.nodeId(ptr);
    }

    public int segmentIndex() {
        return RemotePtr.segmentIndex(ptr);
    }

    public long offset() {
        return RemotePtr.offset(ptr);
    }

    /** Bytes the verb would have touched. */
    public int length() {
        return length;
    }

    /** The category-specific fact, as carried on the wire. */
    public long detail() {
        return detail;
    }

    /** Rebuilds a verb failure from its wire form; {@code null} if {@code code} is not a verb failure. */
    public static VerbException decode(ErrorCode code, long ptr, int length, long detail) {
        return switch (code) {
            case OUT_OF_BOUNDS -> new OutOfBoundsException(ptr, length, detail);
            case WRONG_REMOTE_KEY -> new WrongRemoteKeyException(ptr, length);
            case ACCESS_DENIED -> new AccessDeniedException(ptr, length, (int) (detail >>> 8) & 0xff, (int) detail & 0xff);
            case MISALIGNED_ATOMIC -> new MisalignedAtomicException(ptr);
            case UNKNOWN_SEGMENT -> new UnknownSegmentException(ptr, length);
            case INVALID_POINTER -> new InvalidPointerException(ptr, length, (int) detail);
            case BAD_LENGTH -> new BadLengthException(ptr, length, detail);
            default -> null;
        };
    }
}
