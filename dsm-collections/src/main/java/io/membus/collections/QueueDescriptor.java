package io.membus.collections;

/**
 * Layout of a {@link DsmQueue}'s root body: a ring of {@code capacity} slots, each
 * with a state word (in one array, so {@code size()} is one read) and a data area
 * of {@code slotBytes} bytes.
 *
 * <pre>
 *   root body:
 *   0            8            16           24           32             40             48
 *   +------------+------------+------------+------------+--------------+--------------+-------------------------+
 *   | head hint  | tail hint  | capacity   | slotBytes  | take waiters | put waiters  | state[0..capacity-1]    |
 *   +------------+------------+------------+------------+--------------+--------------+-------------------------+
 *   | data[0] (slotBytes) | data[1] | ... | data[capacity-1]                             |
 *   +--------------------------------------------------------------------------------------+
 *
 *   state word (see SlotState):
 *   63                                   19 18   16 15              0
 *   +--------------------------------------+-------+-----------------+
 *   | ticket (45 bits)                     | phase | node id         |
 *   +--------------------------------------+-------+-----------------+
 *
 *   data area:
 *   0         4         8
 *   +---------+---------+------------------------------------------+
 *   | length  | form    | inline: the element's bytes               |
 *   +---------+---------+------------------------------------------+
 *   | length  | LARGE   | block ptr | block header | block capacity |  (element in an allocator block)
 *   +---------+---------+------------------------------------------+
 * </pre>
 * Ticket {@code t} uses slot {@code t % capacity}. Head and tail are hints: every
 * ticket below the tail has been claimed by a producer, every ticket below the head
 * by a consumer; they are advanced by CAS by whoever sees them lag.
 *
 * <p><b>Note:</b> constants only; thread-safe.
 */
final class QueueDescriptor {
    static final int HEAD_OFFSET = 0;
    static final int TAIL_OFFSET = 8;
    static final int CAPACITY_OFFSET = 16;
    static final int SLOT_BYTES_OFFSET = 24;
    /** Waiters word ({@link WakeUps}) of consumers waiting for an element. */
    static final int TAKE_WAITERS_OFFSET = 32;
    /** Waiters word of producers waiting for room. */
    static final int PUT_WAITERS_OFFSET = 40;
    static final int STATES_OFFSET = 48;

    static final int LENGTH_FIELD = 0;
    static final int FORM_FIELD = 4;
    static final int PAYLOAD_FIELD = 8;
    static final int FORM_INLINE = 0;
    static final int FORM_LARGE = 1;
    /** Data bytes before a large element's block reference (length, form) and the reference itself. */
    static final int LARGE_REF_LENGTH = 24;
    /** The smallest data area: the length and form words and a large element's reference. */
    static final int MIN_SLOT_BYTES = PAYLOAD_FIELD + LARGE_REF_LENGTH;
    /**
     * The default data area: {@value #DEFAULT_INLINE_BYTES} inline bytes plus the length and
     * form words, so elements up to 256 encoded bytes are never put in a block (no allocation,
     * two round trips per offer and per poll). With the state word a slot costs 272 bytes.
     */
    static final int DEFAULT_SLOT_BYTES = 264;
    /** Inline bytes of the default slot. */
    static final int DEFAULT_INLINE_BYTES = DEFAULT_SLOT_BYTES - PAYLOAD_FIELD;
    static final int MAX_SLOT_BYTES = 64 << 10;

    private QueueDescriptor() {
    }

    static long dataOffset(long capacity) {
        return STATES_OFFSET + capacity * Long.BYTES;
    }

    static long bodyLength(long capacity, int slotBytes) {
        return dataOffset(capacity) + capacity * slotBytes;
    }
}
