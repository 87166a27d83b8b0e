package io.membus.alloc;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A heap segment's header or chunk table holds a value the allocator never writes:
 * a wrong magic/version/check word, or a table entry in an impossible state. The
 * allocator refuses to use the segment rather than hand out overlapping blocks.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class HeapCorruptedException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final int nodeId;
    private final int segment;

    public HeapCorruptedException(int nodeId, int segment, String reason) {
        super(ErrorCode.INTERNAL, "heap corrupted: node=" + nodeId + ", segment=" + segment + ", reason=" + reason
                + "; stop using this segment: export a fresh (zeroed) segment and format it, or restore its file");
        this.nodeId = nodeId;
        this.segment = segment;
    }

    public int nodeId() {
        return nodeId;
    }

    public int segment() {
        return segment;
    }
}
