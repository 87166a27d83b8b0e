package io.membus.coherence;

import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A write did not happen: while this node held the object's write lock, another
 * node presumed the lock abandoned (this node looked dead or hung for longer than the
 * lock timeout) and recovered it, so this node's publish was refused. The object
 * holds the value it had before (or a later one); nothing torn. Retry the write.
 *
 * <p><b>Note:</b> immutable once thrown; thread-safe.
 */
public final class LockBrokenException extends DsmException {
    private static final long serialVersionUID = 1L;

    public LockBrokenException(long ptr, long expectedHeader, long actualHeader) {
        super(ErrorCode.LOCK_BROKEN, "write lock broken: object=" + RemotePtr.toString(ptr) + ", version="
                + ObjectLayout.version(expectedHeader) + ", now=" + ObjectLayout.version(actualHeader)
                + "; another node recovered the lock (this node was presumed dead or hung past the lock timeout):"
                + " the write did not happen, retry it");
    }
}
