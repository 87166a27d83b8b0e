package io.membus.core.error;

/**
 * The node restarted: a connection or pointer from its earlier incarnation was
 * used. The memory of the earlier incarnation is never reached through it.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class StaleIncarnationException extends DsmException {

    /** Refused before anything was sent or executed. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
    private static final long serialVersionUID = 1L;

    private final int nodeId;
    private final long expected;
    private final long actual;

    public StaleIncarnationException(int nodeId, long expected, long actual) {
        super(ErrorCode.STALE_INCARNATION, "stale incarnation: node=" + nodeId + ", expected=" + expected
                + ", actual=" + actual + "; the node restarted: look up its segments again in the directory"
                + " (pointers into its previous memory are no longer valid unless its segments are file-backed)");
        this.nodeId = nodeId;
        this.expected = expected;
        this.actual = actual;
    }

    public int nodeId() {
        return nodeId;
    }

    public long expected() {
        return expected;
    }

    public long actual() {
        return actual;
    }
}
