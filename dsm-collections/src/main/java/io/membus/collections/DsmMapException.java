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

    public DsmMapException(ErrorCode code, String reason, String message) {
        super(code, message);
        this.reason = reason;
    }

    /** A short machine-readable reason: {@code not-a-map}, {@code codec-mismatch}, {@code placement}, {@code corrupted}. */
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
