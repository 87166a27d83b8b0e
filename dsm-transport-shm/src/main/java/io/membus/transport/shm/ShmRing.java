package io.membus.transport.shm;

import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.DsmConfigException;
import io.membus.core.transport.message.MessageFailures;
import io.membus.core.transport.message.MessageRecord;
import org.agrona.BitUtil;
import org.agrona.DirectBuffer;
import org.agrona.IoUtil;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.LongToIntFunction;

/**
 * One node's message inbox on {@code shm}: an Agrona {@link ManyToOneRingBuffer}
 * over a mapped file ({@code node-<id>.inbox} in the shared directory). Every
 * sender process writes its records into it with its own CPU (a claim, the bytes,
 * a commit); the owning node's receiver thread is the only reader. Replies go
 * into the sender's own ring the same way.
 *
 * <p>A ring slot holds the sender's prefix, then one dsm-core {@link MessageRecord} (message,
 * request, reply or error), which the ring only moves:
 * <pre>
 * One slot's body (Agrona's 8-byte record header, with the length and type {@link #TYPE_RECORD}, precedes it):
 *   0        4        8                16                                  32
 *   +--------+--------+----------------+------------------------------ ... --------------+
 *   |  from  |reserved| fromIncarnation|  MessageRecord: kind | flags | channel | ... |   |
 *   | int32  | int32  |     int64      |  correlation int64 | body (MessageRecord's)     |
 *   +--------+--------+----------------+------------------------------ ... --------------+
 *   from, fromIncarnation: the writer (a receiver answers into that node's ring, and drops
 *   answers of an incarnation it no longer talks to). Little-endian, as the record.
 * </pre>
 * Since the record moved to dsm-core the prefix is 16 bytes and the kind is the record's, not
 * Agrona's type: a ring is written and read only by processes of one build (no mixed versions).
 *
 * <p><b>Note:</b> thread-safe for writers (the ring is multi-producer; a lock
 * here only orders writes against {@link #close()}, so no write touches an
 * unmapped file). {@link #read} is for the one receiver thread.
 */
final class ShmRing implements AutoCloseable {
    /** Agrona's type of every slot: the kind is the record's. */
    static final int TYPE_RECORD = 1;

    static final int FROM_FIELD_OFFSET = 0;
    static final int FROM_INCARNATION_FIELD_OFFSET = 8;
    /** Bytes of the sender prefix; the {@link MessageRecord} starts here. */
    static final int RECORD_FIELD_OFFSET = 16;
    /** Bytes of a slot's body besides a message's payload: the prefix and the record header. */
    static final int OVERHEAD = RECORD_FIELD_OFFSET + MessageRecord.HEADER_LENGTH;

    private final Path file;
    private final MappedByteBuffer mapped;
    private final ManyToOneRingBuffer ring;
    private boolean closed; // guarded by this

    private ShmRing(Path file, MappedByteBuffer mapped) {
        this.file = file;
        this.mapped = mapped;
        this.ring = new ManyToOneRingBuffer(new UnsafeBuffer(mapped));
    }

    /** The ring capacity (a power of two) that carries payloads of {@code maxPayload} bytes. */
    static int capacityFor(int maxPayload) {
        // a ManyToOneRingBuffer takes records up to capacity / 8
        long need = 8L * (maxPayload + OVERHEAD + 64);
        return BitUtil.findNextPositivePowerOfTwo((int) Math.min(Math.max(need, 256 * 1024), 1 << 30));
    }

    /** Creates a zeroed ring file (replacing any earlier one: its mappers keep the old file). */
    static ShmRing create(Path file, int capacity, io.membus.core.PrivateFiles files) {
        try {
            Files.deleteIfExists(file);
            files.createFile(file); // its permissions before any message is in it
            long length = capacity + RingBufferDescriptor.TRAILER_LENGTH;
            try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
                raf.setLength(length);
                return new ShmRing(file, raf.getChannel().map(FileChannel.MapMode.READ_WRITE, 0, length));
            }
        } catch (IOException e) {
            throw new DsmConfigException("membus.transports.shm.dir", file.getParent(), "a writable directory with"
                    + " room: cannot create the shm message ring " + file + ": " + e.getMessage(), e);
        }
    }

    /** Maps a peer's ring. */
    static ShmRing open(Path file, int nodeId) {
        try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
            return new ShmRing(file, raf.getChannel().map(FileChannel.MapMode.READ_WRITE, 0, raf.length()));
        } catch (IOException | RuntimeException e) {
            throw new NodeUnavailableException(nodeId, "cannot map the message ring of node " + nodeId + ": path="
                    + file + ", error=" + e, e);
        }
    }

    Path file() {
        return file;
    }

    /** The largest payload a record of this ring carries. */
    int maxPayload() {
        return ring.maxMsgLength() - OVERHEAD - 64;
    }

    /** Writes a message or request; {@code false} when the ring has no room now (or is closed). */
    synchronized boolean writeMessage(int from, long fromIncarnation, long correlation, short channel,
                                      boolean request, byte[] payload) {
        return write(from, fromIncarnation, MessageRecord.length(payload.length),
                a -> MessageRecord.writeMessage(a, correlation, channel, request, payload));
    }

    synchronized boolean writeReply(int from, long fromIncarnation, long correlation, byte[] reply) {
        return write(from, fromIncarnation, MessageRecord.length(reply.length),
                a -> MessageRecord.writeReply(a, correlation, reply));
    }

    synchronized boolean writeError(int from, long fromIncarnation, long correlation, DsmException failure) {
        byte[] text = MessageRecord.errorText(failure);
        long detail = MessageFailures.detail(failure);
        return write(from, fromIncarnation, MessageRecord.errorLength(text),
                a -> MessageRecord.writeError(a, correlation, failure.code(), detail, text));
    }

    /** Claims a slot, writes the prefix and {@code record} (of {@code recordLength} bytes at an address), commits. */
    private boolean write(int from, long fromIncarnation, int recordLength, LongToIntFunction record) {
        if (closed) {
            return false;
        }
        int index = ring.tryClaim(TYPE_RECORD, RECORD_FIELD_OFFSET + recordLength);
        if (index < 0) {
            return false;
        }
        AtomicBuffer buffer = ring.buffer();
        buffer.putInt(index + FROM_FIELD_OFFSET, from, ByteOrder.LITTLE_ENDIAN);
        buffer.putInt(index + FROM_FIELD_OFFSET + 4, 0);
        buffer.putLong(index + FROM_INCARNATION_FIELD_OFFSET, fromIncarnation, ByteOrder.LITTLE_ENDIAN);
        record.applyAsInt(buffer.addressOffset() + index + RECORD_FIELD_OFFSET); // the ring is mapped: an address
        ring.commit(index);
        return true;
    }

    /**
     * Decodes one slot read from a ring (receiver thread): the writer's prefix, then its record
     * to {@code receiver}, copied out.
     */
    static void decode(DirectBuffer buffer, int index, int length, Reader reader) {
        reader.from = buffer.getInt(index + FROM_FIELD_OFFSET, ByteOrder.LITTLE_ENDIAN);
        reader.fromIncarnation = buffer.getLong(index + FROM_INCARNATION_FIELD_OFFSET, ByteOrder.LITTLE_ENDIAN);
        MessageRecord.decode(buffer.addressOffset() + index + RECORD_FIELD_OFFSET, length - RECORD_FIELD_OFFSET,
                reader);
    }

    /** Takes the records of a ring, with the writer of the one being decoded (receiver thread only). */
    abstract static class Reader implements MessageRecord.Receiver {
        int from;
        long fromIncarnation;
    }

    /** Reads up to {@code limit} records (receiver thread only). */
    int read(org.agrona.concurrent.MessageHandler handler, int limit) {
        return ring.read(handler, limit);
    }

    /** Whether records were claimed that are not yet read. */
    boolean pending() {
        return ring.producerPosition() != ring.consumerPosition();
    }

    /** Skips a record whose writer died between claim and commit (receiver thread only). */
    boolean unblock() {
        return ring.unblock();
    }

    /** Unmaps the file (idempotent); writes after this return {@code false}. */
    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            IoUtil.unmap(mapped);
        }
    }
}
