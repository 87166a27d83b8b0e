package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.codec.Codec;
import io.membus.core.Words;
import io.membus.core.error.ValueTooLargeException;

import java.util.Objects;

import static io.membus.collections.QueueDescriptor.FORM_FIELD;
import static io.membus.collections.QueueDescriptor.FORM_INLINE;
import static io.membus.collections.QueueDescriptor.FORM_LARGE;
import static io.membus.collections.QueueDescriptor.LENGTH_FIELD;
import static io.membus.collections.QueueDescriptor.PAYLOAD_FIELD;

/**
 * A {@link DsmQueue}'s elements on their way into a slot: encoding, the size limit, the
 * data area's bytes ({@link QueueDescriptor}: inline, or a reference to an allocator block
 * written first), and the one-time freeing of that block when the offer gives up.
 *
 * <p><b>Note:</b> thread-safe: the limit is set once before the handle is published
 * (volatile fields); each {@link Prepared} belongs to one offer on one thread.
 */
final class QueueElements<E> {
    /**
     * An element ready for a slot: the data area's bytes and, for a large element, its
     * block. The block is settled once: freed ({@link #discard}), or handed to the ring
     * (published, or a publish whose outcome is unknown: the ring may hold it); an offer
     * frees it at most once, and only while it is unsettled.
     *
     * <p><b>Note:</b> not thread-safe: one offer's, used by its thread only.
     */
    static final class Prepared {
        final byte[] data;
        final BlockRef block;
        /** The block was freed or handed to the ring: never free it (again). */
        boolean settled;

        Prepared(byte[] data, BlockRef block) {
            this.data = data;
            this.block = block;
        }
    }

    private final GlobalAllocator allocator;
    private final Codec<E> codec;
    private final int slotBytes;
    private final String queueName;
    /** Largest encoded element accepted, and the setting it came from; set before the handle is published. */
    private volatile long maxElementBytes = DsmCollections.DEFAULT_MAX_VALUE_SIZE;
    private volatile String limitSetting = DsmCollections.MAX_VALUE_SIZE_SETTING;

    QueueElements(GlobalAllocator allocator, Codec<E> codec, int slotBytes, String queueName) {
        this.allocator = allocator;
        this.codec = codec;
        this.slotBytes = slotBytes;
        this.queueName = queueName;
    }

    /** Sets the largest encoded element this handle offers ({@code setting}: where the limit comes from). */
    void limit(long bytes, String setting) {
        this.limitSetting = setting;
        this.maxElementBytes = bytes;
    }

    /**
     * Encodes {@code e} into a data area: inline when it fits the slot, else written to a
     * block of its own first (freed again when that write fails).
     */
    Prepared prepare(E e) {
        Objects.requireNonNull(e, "DsmQueue does not accept null elements");
        byte[] bytes = codec.encode(e);
        if (bytes.length > maxElementBytes) { // before anything is claimed
            throw new ValueTooLargeException("queue \"" + queueName + "\" element",
                    bytes.length, maxElementBytes, limitSetting);
        }
        if (bytes.length <= slotBytes - PAYLOAD_FIELD) {
            byte[] data = new byte[PAYLOAD_FIELD + bytes.length];
            Words.putInt(data, LENGTH_FIELD, bytes.length);
            Words.putInt(data, FORM_FIELD, FORM_INLINE);
            System.arraycopy(bytes, 0, data, PAYLOAD_FIELD, bytes.length);
            return new Prepared(data, null);
        }
        BlockRef block = allocator.allocate(bytes.length);
        try {
            allocator.write(block, 0, bytes);
        } catch (RuntimeException ex) {
            discard(new Prepared(null, block), ex);
            throw ex;
        }
        byte[] data = new byte[PAYLOAD_FIELD + QueueDescriptor.LARGE_REF_LENGTH];
        Words.putInt(data, LENGTH_FIELD, bytes.length);
        Words.putInt(data, FORM_FIELD, FORM_LARGE);
        Words.putLong(data, PAYLOAD_FIELD, block.ptr());
        Words.putLong(data, PAYLOAD_FIELD + 8, block.header());
        Words.putLong(data, PAYLOAD_FIELD + 16, block.capacity());
        return new Prepared(data, block);
    }

    /**
     * Frees a prepared element's block (an offer that gave up), unless it is settled: at
     * most once. A failure to free is added to {@code failure} (the first error stays the
     * one thrown), or thrown when there is none.
     */
    void discard(Prepared p, RuntimeException failure) {
        if (p.block != null && !p.settled) {
            p.settled = true;
            try {
                allocator.free(p.block);
            } catch (RuntimeException e) {
                if (failure == null) {
                    throw e;
                }
                failure.addSuppressed(e);
            }
        }
    }
}
