package io.membus.transport.shm;

import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.DsmConfigException;
import org.agrona.BitUtil;
import org.agrona.DirectBuffer;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * One node's message inbox on {@code shm}: an Agrona {@link ManyToOneRingBuffer}
 * over a mapped file ({@code node-<id>.inbox} in the shared directory). Every
 * sender process writes its records into it with its own CPU (a claim, the bytes,
 * a commit); the owning node's receiver thread is the only reader. Replies go
 * into the sender's own ring the same way.
 *
 * <pre>
 * One record's body (Agrona's 8-byte record header, with the length and the type, precedes it):
 *   0        4        6        8                16               24
 *   +--------+--------+--------+----------------+----------------+------ ... --+
 *   |  from  |channel |reserved| fromIncarnation|  correlation   |   payload    |
 *   | int32  | int16  | int16  |     int64      |     int64      |              |
 *   +--------+--------+--------+----------------+----------------+------ ... --+
 *   type MESSAGE (one-way) and REQUEST: payload = the message; REPLY: payload = the reply;
 *   ERROR: payload = code int32 | reserved int32 | detail int64 | text UTF-8 (at most 1024 bytes)
 *   Integers in the machine's byte order: every process mapping the file runs on this host.
 * </pre>
 *
 * <p><b>Note:</b> thread-safe for writers (the ring is multi-producer; a lock
 * here only orders writes against {@link #close()}, so no write touches an
 * unmapped file). {@link #read} is for the one receiver thread.
 */
final class ShmRing implements AutoCloseable {
    static final int TYPE_MESSAGE = 1;
    static final int TYPE_REQUEST = 2;
    static final int TYPE_REPLY = 3;
    static final int TYPE_ERROR = 4;

    static final int FROM_FIELD_OFFSET = 0;
    static final int CHANNEL_FIELD_OFFSET = 4;
    static final int FROM_INCARNATION_FIELD_OFFSET = 8;
    static final int CORRELATION_FIELD_OFFSET = 16;
    static final int HEADER_LENGTH = 24;
    static final int ERROR_CODE_FIELD_OFFSET = HEADER_LENGTH;
    static final int ERROR_DETAIL_FIELD_OFFSET = HEADER_LENGTH + 8;
    static final int ERROR_TEXT_FIELD_OFFSET = HEADER_LENGTH + 16;
    static final int MAX_ERROR_TEXT = 1024;

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
        long need = 8L * (maxPayload + HEADER_LENGTH + 64);
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
        return ring.maxMsgLength() - HEADER_LENGTH - 64;
    }

    /** Writes a message or request; {@code false} when the ring has no room now (or is closed). */
    synchronized boolean writeMessage(int from, long fromIncarnation, long correlation, short channel,
                                      boolean request, byte[] payload) {
        return write(request ? TYPE_REQUEST : TYPE_MESSAGE, from, fromIncarnation, correlation, channel, payload,
                null, 0, 0);
    }

    synchronized boolean writeReply(int from, long fromIncarnation, long correlation, byte[] reply) {
        return write(TYPE_REPLY, from, fromIncarnation, correlation, (short) 0, reply, null, 0, 0);
    }

    synchronized boolean writeError(int from, long fromIncarnation, long correlation, ErrorCode code, long detail,
                                    String text) {
        byte[] t = text == null ? new byte[0] : text.getBytes(StandardCharsets.UTF_8);
        return write(TYPE_ERROR, from, fromIncarnation, correlation, (short) 0, t, code, detail,
                Math.min(t.length, MAX_ERROR_TEXT));
    }

    private boolean write(int type, int from, long fromIncarnation, long correlation, short channel, byte[] payload,
                          ErrorCode code, long detail, int textLength) {
        if (closed) {
            return false;
        }
        int body = code == null ? payload.length : 16 + textLength;
        int index = ring.tryClaim(type, HEADER_LENGTH + body);
        if (index < 0) {
            return false;
        }
        var buffer = ring.buffer();
        buffer.putInt(index + FROM_FIELD_OFFSET, from);
        buffer.putShort(index + CHANNEL_FIELD_OFFSET, channel);
        buffer.putShort(index + CHANNEL_FIELD_OFFSET + 2, (short) 0);
        buffer.putLong(index + FROM_INCARNATION_FIELD_OFFSET, fromIncarnation);
        buffer.putLong(index + CORRELATION_FIELD_OFFSET, correlation);
        if (code == null) {
            buffer.putBytes(index + HEADER_LENGTH, payload);
        } else {
            buffer.putInt(index + ERROR_CODE_FIELD_OFFSET, code.wire());
            buffer.putInt(index + ERROR_CODE_FIELD_OFFSET + 4, 0);
            buffer.putLong(index + ERROR_DETAIL_FIELD_OFFSET, detail);
            buffer.putBytes(index + ERROR_TEXT_FIELD_OFFSET, payload, 0, textLength);
        }
        ring.commit(index);
        return true;
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

    static String text(DirectBuffer buffer, int index, int length) {
        int n = length - ERROR_TEXT_FIELD_OFFSET;
        return n <= 0 ? "" : buffer.getStringWithoutLengthUtf8(index + ERROR_TEXT_FIELD_OFFSET, n);
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
