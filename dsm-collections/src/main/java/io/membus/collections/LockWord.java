package io.membus.collections;

/**
 * The lock word of a {@link DsmLock}, in the body of its root, followed by the
 * lock's waiters word ({@link WakeUps}).
 *
 * <pre>
 *   root body:
 *   0                   8                   16
 *   +-------------------+-------------------+
 *   | lock word         | waiters word      |
 *   +-------------------+-------------------+
 *
 *   lock word:
 *   63                                              17   16  15              0
 *   +-------------------------------------------------+----+-----------------+
 *   | token (47 bits): the fencing token of the last   |held| node id of the  |
 *   | acquisition; grows by one at every acquisition   |    | last acquirer   |
 *   +-------------------------------------------------+----+-----------------+
 * </pre>
 * Free: {@code held = 0} (the token and node of the last holder stay). Acquire:
 * CAS from a free word to {@code (token + 1, held, me)}. Release: CAS from
 * {@code (token, held, me)} to {@code (token, free, me)}. Break (the holder is not
 * a live member): CAS from {@code (token, held, dead)} to
 * {@code (token + 1, held, me)}, so a broken holder's release fails and its token is
 * smaller than every later one. Every change is a CAS (never a plain write), so it
 * is safe on every transport.
 *
 * <p><b>Note:</b> constants and pure functions; thread-safe.
 */
final class LockWord {
    static final int WORD_OFFSET = 0;
    static final int WAITERS_OFFSET = 8;
    static final int BODY_LENGTH = 16;
    static final int NODE_BITS = 16;
    static final long NODE_MASK = (1L << NODE_BITS) - 1;
    static final long HELD_BIT = 1L << NODE_BITS;
    static final int TOKEN_SHIFT = NODE_BITS + 1;
    /** The largest token; an acquisition past it is refused. */
    static final long MAX_TOKEN = (1L << (64 - TOKEN_SHIFT)) - 1;

    private LockWord() {
    }

    static long token(long word) {
        return word >>> TOKEN_SHIFT;
    }

    static boolean held(long word) {
        return (word & HELD_BIT) != 0;
    }

    static int node(long word) {
        return (int) (word & NODE_MASK);
    }

    static long held(long token, int node) {
        return (token << TOKEN_SHIFT) | HELD_BIT | (node & NODE_MASK);
    }

    static long free(long token, int node) {
        return (token << TOKEN_SHIFT) | (node & NODE_MASK);
    }

    static String toString(long word) {
        return "token=" + token(word) + ", held=" + held(word) + ", node=" + node(word);
    }
}
