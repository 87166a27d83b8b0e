package io.membus.collections;

/**
 * A {@link DsmQueue} was opened with a slot size ({@link QueueOptions#slotBytes(int)})
 * other than the one it was created with. Nothing is changed: the queue stays as it is.
 * Open it with the existing slot size, or without naming one, or use another name.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public class QueueSlotSizeMismatchException extends CollectionTypeMismatchException {
    private static final long serialVersionUID = 1L;

    private final int existingSlotBytes;
    private final int requestedSlotBytes;

    public QueueSlotSizeMismatchException(String name, int existingSlotBytes, int requestedSlotBytes) {
        super(name, "queue slotBytes=" + existingSlotBytes + " (created so)",
                "queue slotBytes=" + requestedSlotBytes + " (QueueOptions.slotBytes: open it with slotBytes("
                        + existingSlotBytes + ") or without a slot size)");
        this.existingSlotBytes = existingSlotBytes;
        this.requestedSlotBytes = requestedSlotBytes;
    }

    /** The slot size the queue was created with. */
    public int existingSlotBytes() {
        return existingSlotBytes;
    }

    /** The slot size the opener asked for. */
    public int requestedSlotBytes() {
        return requestedSlotBytes;
    }
}
