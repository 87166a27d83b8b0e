package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.core.RemoteMemory;
import io.membus.core.Words;

import static io.membus.collections.QueueDescriptor.FORM_FIELD;
import static io.membus.collections.QueueDescriptor.FORM_LARGE;
import static io.membus.collections.QueueDescriptor.PAYLOAD_FIELD;
import static io.membus.collections.SlotState.EMPTY;
import static io.membus.collections.SlotState.FULL;

/**
 * Where a {@link DsmQueue}'s ring lies in its root body ({@link QueueDescriptor}): the
 * addresses of the head and tail hints, the waiters words, each ticket's state word and
 * data area; formatting a new ring, reading its state words in bulk, and the large-element
 * reference of a data area. Knows nothing of the claim protocol ({@link QueueClaims}).
 *
 * <p><b>Note:</b> thread-safe: immutable (addresses and sizes fixed when the handle is
 * opened); its reads are single verbs with the verbs' ordering.
 */
final class QueueRing {
    /** State words read per verb by the scans of the whole ring. */
    static final int STATES_PER_READ = 8192;

    final RemoteMemory memory;
    final int capacity;
    final int slotBytes;
    /** This node's id, the holder named by this node's claims. */
    final int self;
    final long headPtr;
    final long tailPtr;
    final long takeWaitersPtr;
    final long putWaitersPtr;
    private final long statesPtr;
    private final long dataPtr;

    QueueRing(RemoteMemory memory, long body, int capacity, int slotBytes) {
        this.memory = memory;
        this.capacity = capacity;
        this.slotBytes = slotBytes;
        this.self = memory.localNodeId();
        this.headPtr = body + QueueDescriptor.HEAD_OFFSET;
        this.tailPtr = body + QueueDescriptor.TAIL_OFFSET;
        this.statesPtr = body + QueueDescriptor.STATES_OFFSET;
        this.dataPtr = body + QueueDescriptor.dataOffset(capacity);
        this.takeWaitersPtr = body + QueueDescriptor.TAKE_WAITERS_OFFSET;
        this.putWaitersPtr = body + QueueDescriptor.PUT_WAITERS_OFFSET;
    }

    /** Writes a new ring's header (capacity, slot size) and every slot's first state, {@code EMPTY(i)}. */
    static void format(RemoteMemory memory, long body, int capacity, int slotBytes) {
        byte[] head = new byte[QueueDescriptor.STATES_OFFSET];
        Words.putLong(head, QueueDescriptor.CAPACITY_OFFSET, capacity);
        Words.putLong(head, QueueDescriptor.SLOT_BYTES_OFFSET, slotBytes);
        memory.write(body, head);
        for (int from = 0; from < capacity; from += STATES_PER_READ) {
            int n = Math.min(STATES_PER_READ, capacity - from);
            byte[] states = new byte[n * Long.BYTES];
            for (int i = 0; i < n; i++) {
                Words.putLong(states, i * Long.BYTES, SlotState.of(from + i, EMPTY, 0));
            }
            memory.write(body + QueueDescriptor.STATES_OFFSET + (long) from * Long.BYTES, states);
        }
    }

    /**
     * Frees the blocks of the large elements still in a destroyed queue's slots (the ring
     * itself is in the root block, which the caller frees). No handle uses it any more.
     */
    static void releaseLarge(GlobalAllocator allocator, Root root) {
        RemoteMemory memory = allocator.memory();
        long body = root.bodyPtr();
        int capacity = (int) memory.readLong(body + QueueDescriptor.CAPACITY_OFFSET);
        int slotBytes = (int) memory.readLong(body + QueueDescriptor.SLOT_BYTES_OFFSET);
        if (capacity <= 0 || capacity > DsmQueue.MAX_CAPACITY || slotBytes < QueueDescriptor.MIN_SLOT_BYTES) {
            throw new IllegalStateException("capacity " + capacity + ", slotBytes " + slotBytes + " in " + root);
        }
        long data = body + QueueDescriptor.dataOffset(capacity);
        for (int from = 0; from < capacity; from += STATES_PER_READ) {
            int n = Math.min(STATES_PER_READ, capacity - from);
            byte[] states = memory.read(body + QueueDescriptor.STATES_OFFSET + (long) from * Long.BYTES, n * Long.BYTES);
            for (int i = 0; i < n; i++) {
                int phase = SlotState.phase(Words.getLong(states, i * Long.BYTES));
                if (phase == SlotState.EMPTY) {
                    continue;
                }
                byte[] head = memory.read(data + (long) (from + i) * slotBytes,
                        PAYLOAD_FIELD + QueueDescriptor.LARGE_REF_LENGTH);
                BlockRef block = largeBlock(head);
                if (block != null) {
                    try {
                        allocator.free(block);
                    } catch (io.membus.alloc.StaleBlockReferenceException e) {
                        // taken and freed by its consumer already (the slot's state lags its data)
                    }
                }
            }
        }
    }

    long statePtr(long ticket) {
        return statesPtr + (ticket % capacity) * Long.BYTES;
    }

    long dataPtr(long ticket) {
        return dataPtr + (ticket % capacity) * slotBytes;
    }

    /** State words {@code [from, from + n)} of the ring, in one read. */
    byte[] readStates(int from, int n) {
        return memory.read(statesPtr + (long) from * Long.BYTES, n * Long.BYTES);
    }

    /** The number of FULL slots (one read of the state words per {@value #STATES_PER_READ} slots). */
    int countFull() {
        int count = 0;
        for (int from = 0; from < capacity; from += STATES_PER_READ) {
            int n = Math.min(STATES_PER_READ, capacity - from);
            byte[] states = readStates(from, n);
            for (int i = 0; i < n; i++) {
                if (SlotState.phase(Words.getLong(states, i * Long.BYTES)) == FULL) {
                    count++;
                }
            }
        }
        return count;
    }

    /** The block a data area names, or null for an inline element. */
    static BlockRef largeBlock(byte[] data) {
        if (Words.getInt(data, FORM_FIELD) != FORM_LARGE) {
            return null;
        }
        return BlockRef.of(Words.getLong(data, PAYLOAD_FIELD), Words.getLong(data, PAYLOAD_FIELD + 8),
                Words.getLong(data, PAYLOAD_FIELD + 16));
    }
}
