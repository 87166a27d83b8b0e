package io.membus.collections;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A {@link DsmMap} cannot do what was asked: its root is not a map's (or was
 * written by another layout version), it was opened with codecs other than the ones
 * it was created with, or an entry landed where a slot word cannot name it. The
 * message says which, as {@code key=value} facts, and what to do.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public class DsmMapException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String reason;

    /** False when the change was refused before it touched anything (safe to retry). */
    private final boolean mayHaveRun;

    public DsmMapException(ErrorCode code, String reason, String message) {
        this(code, reason, message, true);
    }

    private DsmMapException(ErrorCode code, String reason, String message, boolean mayHaveRun) {
        super(code, message);
        this.reason = reason;
        this.mayHaveRun = mayHaveRun;
    }

    @Override
    public boolean mayHaveRun() {
        return mayHaveRun;
    }

    /**
     * A change refused before it started because this node holds {@code bound} retired entry
     * blocks of the map not yet freed, and none came due before the operation's deadline
     * (reason {@code reclaim-bound}; a timeout that did not run: safe to retry).
     */
    static DsmMapException reclaimBound(int held, int bound, String why) {
        return new DsmMapException(ErrorCode.TIMEOUT, "reclaim-bound", "map change not started: held=" + held
                + ", bound=" + bound + " (entry blocks this node retired and has not freed yet); " + why
                + "; retry (the freeing falls behind the changes, or a node holding the blocks is slow)", false);
    }

    /** A short machine-readable reason: {@code not-a-map}, {@code codec-mismatch}, {@code placement}, {@code corrupted}, {@code reclaim-bound}. */
    public String reason() {
        return reason;
    }

    static DsmMapException notAMap(String root, String detail) {
        return new DsmMapException(ErrorCode.INVALID_POINTER, "not-a-map", "not a map root: root=" + root + ", " + detail
                + "; open a map with the pointer DsmMap.rootPtr() returned (or the name it was bound to)");
    }

    static DsmMapException codecMismatch(String root, String which, String expected, String given) {
        return new DsmMapException(ErrorCode.CODEC, "codec-mismatch", "codec mismatch: root=" + root + ", codec=" + which
                + ", createdWith=" + expected + ", openedWith=" + given
                + "; open the map with the codec it was created with (same id on every node)");
    }

    static DsmMapException placement(String block, String detail) {
        return new DsmMapException(ErrorCode.CONFIG, "placement", "entry block not addressable by a slot word: block="
                + block + ", " + detail + "; map entries must live on nodes 1..4095, heap segments 0..7, offsets below 64 GiB:"
                + " give the nodes smaller ids or export heaps at lower segment indexes");
    }

    static DsmMapException corrupted(String where, String detail) {
        return new DsmMapException(ErrorCode.INTERNAL, "corrupted", "map corrupted: at=" + where + ", " + detail
                + "; the map's remote memory holds words its protocol never writes: recreate the map");
    }
}
