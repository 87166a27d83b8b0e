package io.membus.alloc;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

/**
 * A placement names no heap the allocator can use: the node is not a live member,
 * has no heap segments, or none of its heap segments is formatted.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class PlacementException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String placement;
    private final int nodeId;

    public PlacementException(String placement, int nodeId, String reason) {
        super(ErrorCode.CONFIG, "placement not possible: placement=" + placement + ", node=" + nodeId + ", reason=" + reason
                + "; choose a live node that exports formatted heap segments (GlobalAllocator.formatLocalSegments on that node)");
        this.placement = placement;
        this.nodeId = nodeId;
    }

    public String placement() {
        return placement;
    }

    public int nodeId() {
        return nodeId;
    }
}
