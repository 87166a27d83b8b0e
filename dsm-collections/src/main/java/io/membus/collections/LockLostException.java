package io.membus.collections;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * An {@link DsmLock#unlock()} found the lock no longer held with this holder's
 * token: another node broke it (this node was taken for dead, e.g. downed or
 * partitioned away) and acquired it with a larger token. Whatever this holder did
 * after the break may have overlapped the next holder; writes fenced with the
 * token (refused below the latest token) are the protection. The local hold is
 * released.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public class LockLostException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String name;
    private final long token;
    private final long currentToken;
    private final int currentNode;

    public LockLostException(String name, long token, long currentToken, int currentNode, boolean held) {
        super(ErrorCode.NODE_UNAVAILABLE, "lock lost: name=" + name + ", token=" + token + ", currentToken="
                + currentToken + ", currentNode=" + currentNode + ", currentlyHeld=" + held
                + ": the lock was broken while this node was taken for dead; fence writes with the token");
        this.name = name;
        this.token = token;
        this.currentToken = currentToken;
        this.currentNode = currentNode;
    }

    public String name() {
        return name;
    }

    /** The token this holder had. */
    public long token() {
        return token;
    }

    /** The token found in the lock word. */
    public long currentToken() {
        return currentToken;
    }

    /** The node found in the lock word. */
    public int currentNode() {
        return currentNode;
    }
}
