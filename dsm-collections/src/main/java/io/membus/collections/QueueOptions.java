package io.membus.collections;

/**
 * How a {@link DsmQueue} is opened: its capacity (every opener names it; a queue
 * opened with another capacity than it was created with is a
 * {@link CollectionTypeMismatchException}) and, optionally, the bytes of each slot's
 * data area.
 *
 * <pre>{@code
 * membus.queue("jobs", Job.class, QueueOptions.capacity(1024));                 // slots of 264 bytes
 * membus.queue("frames", codec, QueueOptions.capacity(256).slotBytes(4104));    // 4 KiB elements inline
 * }</pre>
 *
 * <p><b>Slot size.</b> An element whose encoding fits the slot's inline area
 * ({@code slotBytes - 8} bytes) is written into the slot itself: an offer and a poll
 * are two round trips each and allocate nothing. A larger element goes to an allocator
 * block (an allocation per offer, a free per poll, a few more round trips). The default,
 * {@value QueueDescriptor#DEFAULT_SLOT_BYTES} bytes, keeps elements up to 256 encoded
 * bytes inline; each slot costs its data area plus an 8-byte state word, so a queue
 * costs {@code capacity * (slotBytes + 8)} bytes (272 KiB for 1,024 default slots).
 * The slot size is written into the queue when it is created: a later opener that
 * names another one gets a {@link QueueSlotSizeMismatchException} naming both, and an
 * opener that names none uses the stored one.
 *
 * <p><b>Note:</b> immutable value; thread-safe.
 */
public final class QueueOptions {
    /** Elements up to this many encoded bytes are inline with the default slot size. */
    public static final int DEFAULT_INLINE_BYTES = QueueDescriptor.DEFAULT_INLINE_BYTES;
    /** The default data area per slot, in bytes. */
    public static final int DEFAULT_SLOT_BYTES = QueueDescriptor.DEFAULT_SLOT_BYTES;
    /** The smallest data area: the length and form words and a large element's block reference. */
    public static final int MIN_SLOT_BYTES = QueueDescriptor.MIN_SLOT_BYTES;
    /** The largest data area. */
    public static final int MAX_SLOT_BYTES = QueueDescriptor.MAX_SLOT_BYTES;

    private final int capacity;
    /** 0: not named by the opener (the default when it creates the queue, the stored one otherwise). */
    private final int slotBytes;

    private QueueOptions(int capacity, int slotBytes) {
        this.capacity = capacity;
        this.slotBytes = slotBytes;
    }

    /**
     * A queue of {@code capacity} elements, default slot size.
     *
     * @throws CollectionArgumentException when {@code capacity} is not in 1 .. {@value DsmQueue#MAX_CAPACITY}
     */
    public static QueueOptions capacity(int capacity) {
        if (capacity <= 0 || capacity > DsmQueue.MAX_CAPACITY) {
            throw new CollectionArgumentException("capacity", capacity, "1 .. " + DsmQueue.MAX_CAPACITY
                    + " elements (a queue's ring is allocated whole when it is created)");
        }
        return new QueueOptions(capacity, 0);
    }

    /**
     * The same options with slots of {@code bytes} data bytes: elements up to
     * {@code bytes - 8} encoded bytes are stored inline.
     *
     * @throws CollectionArgumentException when {@code bytes} is not a multiple of 8 in
     *                            {@value #MIN_SLOT_BYTES} .. {@value #MAX_SLOT_BYTES}
     */
    public QueueOptions slotBytes(int bytes) {
        if (bytes < MIN_SLOT_BYTES || bytes > MAX_SLOT_BYTES || bytes % 8 != 0) {
            throw new CollectionArgumentException("slotBytes", bytes, "a multiple of 8 in " + MIN_SLOT_BYTES + " .. "
                    + MAX_SLOT_BYTES + " (elements up to slotBytes - 8 encoded bytes are stored inline; "
                    + DEFAULT_SLOT_BYTES + " by default)");
        }
        return new QueueOptions(capacity, bytes);
    }

    /**
     * The same options with slots sized so that elements up to {@code bytes} encoded
     * bytes are stored inline ({@link #slotBytes(int)} of {@code bytes + 8}, rounded up
     * to a multiple of 8).
     *
     * @throws CollectionArgumentException when the slot size that makes is out of range
     */
    public QueueOptions inlineBytes(int bytes) {
        if (bytes < 0 || bytes > MAX_SLOT_BYTES - QueueDescriptor.PAYLOAD_FIELD) {
            throw new CollectionArgumentException("inlineBytes", bytes, "0 .. " + (MAX_SLOT_BYTES - QueueDescriptor.PAYLOAD_FIELD));
        }
        int slot = Math.max(MIN_SLOT_BYTES, (bytes + QueueDescriptor.PAYLOAD_FIELD + 7) & ~7);
        return slotBytes(slot);
    }

    public int capacity() {
        return capacity;
    }

    /** The slot size named, or 0 when none was (see the class comment). */
    public int slotBytes() {
        return slotBytes;
    }

    @Override
    public String toString() {
        return "QueueOptions[capacity=" + capacity + ", slotBytes=" + (slotBytes == 0 ? "default" : slotBytes) + "]";
    }
}
