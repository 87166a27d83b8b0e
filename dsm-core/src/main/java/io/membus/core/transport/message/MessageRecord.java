package io.membus.core.transport.message;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import net.openhft.chronicle.core.UnsafeMemory;

import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * Layout of one message record: what the message layer ({@link Outbox}, {@link Inbox},
 * {@link Responder}) hands a transport to carry, as bytes. Every transport that carries
 * messages as bytes only moves records, in its own framing around them: shm puts its
 * sender prefix (node and incarnation) before one in a ring slot, rdma posts one as a
 * SEND, tcp puts one in the body of a message frame. ({@code local} hands the fields
 * over in memory and has no bytes.)
 *
 * <pre>
 *   0      1      2        4               8                               16
 *   +------+------+--------+---------------+-------------------------------+------ ... --+
 *   | kind |flags |channel |  reserved (0) |          correlation          |    body      |
 *   |  u8  |  u8  | int16  |     int32     |             int64             |              |
 *   +------+------+--------+---------------+-------------------------------+------ ... --+
 *
 *   MESSAGE (1), REQUEST (2)  body = payload                        (sender -> receiver)
 *   REPLY (3)                 body = the handler's reply (empty for a one-way message)
 *   ERROR (4)                 body = code int32 | reserved int32 (0) | detail int64 | text UTF-8 (at most 1024 bytes)
 *                                    code: ErrorCode.wire(); detail, text: MessageFailures.detail/text
 *   CREDIT (6)                body = credits int32 | maxMessageSize int32   (receiver -> sender, correlation 0)
 *   kind 5 is left to a transport's own opening record (rdma's HELLO); flags are zero.
 *   channel and correlation are zero in answers and grants; a record's length is the transport's to carry.
 * </pre>
 *
 * All words little-endian, as everywhere in Membus ({@link io.membus.core.Words}). tcp puts
 * one record in the body of each message frame ({@link #headerWord} writes it into a buffer
 * of tcp's own); its frame header repeats the correlation id and names the kind by opcode.
 *
 * <p>The address methods read and write off-heap memory at a raw address the caller
 * owns and has sized ({@link #HEADER_LENGTH} plus the body); nothing is checked here.
 *
 * <p><b>Note:</b> stateless; thread-safe. The writes are plain: the transport publishes a
 * record (a ring commit, a posted SEND) after writing it, and reads one only after it was
 * published to it (a ring read, a receive completion).
 */
public final class MessageRecord {
    public static final int KIND_MESSAGE = 1;
    public static final int KIND_REQUEST = 2;
    public static final int KIND_REPLY = 3;
    public static final int KIND_ERROR = 4;
    /** Left to a transport's own first record on a connection (rdma's HELLO); never one of this class. */
    public static final int KIND_TRANSPORT_OPENING = 5;
    public static final int KIND_CREDIT = 6;

    public static final int KIND_OFFSET = 0;
    public static final int FLAGS_OFFSET = 1;
    public static final int CHANNEL_OFFSET = 2;
    public static final int RESERVED_OFFSET = 4;
    public static final int CORRELATION_OFFSET = 8;
    /** Bytes of the header; the body starts here. */
    public static final int HEADER_LENGTH = 16;
    public static final int BODY_OFFSET = HEADER_LENGTH;

    public static final int ERROR_CODE_OFFSET = BODY_OFFSET;
    public static final int ERROR_DETAIL_OFFSET = BODY_OFFSET + 8;
    public static final int ERROR_TEXT_OFFSET = BODY_OFFSET + 16;
    /** Longest error text carried (UTF-8 bytes); longer ones are cut. */
    public static final int MAX_ERROR_TEXT = 1024;
    /** Bytes of the longest ERROR record. */
    public static final int MAX_ERROR_LENGTH = ERROR_TEXT_OFFSET + MAX_ERROR_TEXT;

    /** Offsets in the CREDIT body (from {@link #BODY_OFFSET}); tcp's MSG_CREDIT body is the same. */
    public static final int CREDIT_CREDITS_BODY_OFFSET = 0;
    public static final int CREDIT_MAX_SIZE_BODY_OFFSET = 4;
    public static final int CREDIT_BODY_LENGTH = 8;
    public static final int CREDIT_LENGTH = HEADER_LENGTH + CREDIT_BODY_LENGTH;

    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;
    private static final boolean NATIVE_LE = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;
    private static final long BYTE_ARRAY_OFFSET = UnsafeMemory.UNSAFE.arrayBaseOffset(byte[].class);
    private static final byte[] EMPTY = new byte[0];

    private MessageRecord() {
    }

    /**
     * What a decoded record is handed to ({@link #decode}): called on the decoding thread,
     * inside {@code decode}, once per record; the arrays it gets are its own.
     */
    public interface Receiver {
        /** A MESSAGE or REQUEST record. */
        void message(long correlation, short channel, boolean request, byte[] payload);

        void reply(long correlation, byte[] reply);

        /** An ERROR record in its wire form; {@link Outbox#failed(long, ErrorCode, long, String)} takes it. */
        void error(long correlation, ErrorCode code, long detail, String text);

        void credit(int credits, int maxMessageSize);

        /**
         * A record of a kind this class does not decode (a transport's own, {@link #KIND_TRANSPORT_OPENING}),
         * or one shorter than its kind's fixed part: {@code problem} says which ({@code null}: a transport kind
         * of a valid length, its body at {@link #BODY_OFFSET}).
         */
        void other(int kind, long address, int length, String problem);
    }

    /** The kind of a message: {@link #KIND_REQUEST} or {@link #KIND_MESSAGE}. */
    public static int messageKind(boolean request) {
        return request ? KIND_REQUEST : KIND_MESSAGE;
    }

    /** Bytes of the record of a message or reply with {@code payloadLength} bytes. */
    public static int length(int payloadLength) {
        return HEADER_LENGTH + payloadLength;
    }

    /** The text an ERROR record carries for {@code failure}: UTF-8, cut at {@link #MAX_ERROR_TEXT} bytes. */
    public static byte[] errorText(DsmException failure) {
        return errorText(MessageFailures.text(failure));
    }

    /** {@code text} in UTF-8, cut at {@link #MAX_ERROR_TEXT} bytes ({@code null}: empty). */
    public static byte[] errorText(String text) {
        if (text == null) {
            return EMPTY;
        }
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        return b.length <= MAX_ERROR_TEXT ? b : java.util.Arrays.copyOf(b, MAX_ERROR_TEXT);
    }

    /** Bytes of the ERROR record carrying {@code text} (as {@link #errorText} made it). */
    public static int errorLength(byte[] text) {
        return ERROR_TEXT_OFFSET + text.length;
    }

    /**
     * The header's first eight bytes (kind, flags, channel, reserved) as one int64 to write
     * little-endian, for a transport that writes records into a buffer of its own (tcp's
     * frames); the correlation id is the second eight.
     */
    public static long headerWord(int kind, short channel) {
        return (kind & 0xffL) | (channel & 0xffffL) << 16;
    }

    // ---------------------------------------------------------------- encoders (at an address)

    /** Writes a header; the caller writes the body. */
    public static void writeHeader(long address, int kind, short channel, long correlation) {
        MEMORY.writeLong(address + KIND_OFFSET, le(headerWord(kind, channel)));
        MEMORY.writeLong(address + CORRELATION_OFFSET, le(correlation));
    }

    /** Writes the int32 {@code value} at {@code offset} of the record (a body field of a transport's own kind). */
    public static void writeInt(long address, int offset, int value) {
        MEMORY.writeInt(address + offset, le(value));
    }

    /** Writes a MESSAGE or REQUEST record; returns its length. */
    public static int writeMessage(long address, long correlation, short channel, boolean request, byte[] payload) {
        writeHeader(address, messageKind(request), channel, correlation);
        copyIn(payload, address + BODY_OFFSET, payload.length);
        return length(payload.length);
    }

    /** Writes a REPLY record; returns its length. */
    public static int writeReply(long address, long correlation, byte[] reply) {
        writeHeader(address, KIND_REPLY, (short) 0, correlation);
        copyIn(reply, address + BODY_OFFSET, reply.length);
        return length(reply.length);
    }

    /**
     * Writes an ERROR record; returns its length.
     *
     * @param text as {@link #errorText} made it (at most {@link #MAX_ERROR_TEXT} bytes)
     */
    public static int writeError(long address, long correlation, ErrorCode code, long detail, byte[] text) {
        writeHeader(address, KIND_ERROR, (short) 0, correlation);
        MEMORY.writeInt(address + ERROR_CODE_OFFSET, le(code.wire() & 0xff));
        MEMORY.writeInt(address + ERROR_CODE_OFFSET + 4, 0);
        MEMORY.writeLong(address + ERROR_DETAIL_OFFSET, le(detail));
        copyIn(text, address + ERROR_TEXT_OFFSET, text.length);
        return errorLength(text);
    }

    /** Writes a CREDIT record; returns its length. */
    public static int writeCredit(long address, int credits, int maxMessageSize) {
        writeHeader(address, KIND_CREDIT, (short) 0, 0);
        MEMORY.writeInt(address + BODY_OFFSET + CREDIT_CREDITS_BODY_OFFSET, le(credits));
        MEMORY.writeInt(address + BODY_OFFSET + CREDIT_MAX_SIZE_BODY_OFFSET, le(maxMessageSize));
        return CREDIT_LENGTH;
    }

    // ---------------------------------------------------------------- decoders (at an address)

    /** The kind, unsigned. */
    public static int kind(long address) {
        return MEMORY.readByte(address + KIND_OFFSET) & 0xff;
    }

    public static short channel(long address) {
        return le(MEMORY.readShort(address + CHANNEL_OFFSET));
    }

    public static long correlation(long address) {
        return le(MEMORY.readLong(address + CORRELATION_OFFSET));
    }

    /** The int32 at {@code offset} of the record (a body field of a transport's own kind, say). */
    public static int intAt(long address, int offset) {
        return le(MEMORY.readInt(address + offset));
    }

    /** Copies the body of a record of {@code length} bytes out. */
    public static byte[] body(long address, int length) {
        return copyOut(address + BODY_OFFSET, length - BODY_OFFSET);
    }

    /**
     * Decodes the record of {@code length} bytes at {@code address} and hands it to
     * {@code receiver}: its payload, reply or text copied out, so the memory may be reused
     * as soon as this returns.
     */
    public static void decode(long address, int length, Receiver receiver) {
        int kind = length >= HEADER_LENGTH ? kind(address) : 0;
        int fixed = switch (kind) {
            case KIND_ERROR -> ERROR_TEXT_OFFSET;
            case KIND_CREDIT -> CREDIT_LENGTH;
            default -> HEADER_LENGTH;
        };
        if (length < fixed) {
            receiver.other(kind, address, length, "a record of " + length + " bytes is shorter than its kind's "
                    + fixed + ": kind=" + kind);
            return;
        }
        long correlation = correlation(address);
        switch (kind) {
            case KIND_MESSAGE, KIND_REQUEST -> receiver.message(correlation, channel(address), kind == KIND_REQUEST,
                    body(address, length));
            case KIND_REPLY -> receiver.reply(correlation, body(address, length));
            case KIND_ERROR -> receiver.error(correlation, ErrorCode.fromWire(intAt(address, ERROR_CODE_OFFSET)),
                    le(MEMORY.readLong(address + ERROR_DETAIL_OFFSET)), new String(copyOut(address + ERROR_TEXT_OFFSET,
                            length - ERROR_TEXT_OFFSET), StandardCharsets.UTF_8));
            case KIND_CREDIT -> receiver.credit(intAt(address, BODY_OFFSET + CREDIT_CREDITS_BODY_OFFSET),
                    intAt(address, BODY_OFFSET + CREDIT_MAX_SIZE_BODY_OFFSET));
            default -> receiver.other(kind, address, length, null);
        }
    }

    // ---------------------------------------------------------------- bytes

    private static void copyIn(byte[] src, long address, int length) {
        if (length > 0) {
            MEMORY.copyMemory(src, 0, address, length);
        }
    }

    private static byte[] copyOut(long address, int length) {
        if (length <= 0) {
            return EMPTY;
        }
        byte[] b = new byte[length];
        MEMORY.copyMemory(address, b, BYTE_ARRAY_OFFSET, length);
        return b;
    }

    private static short le(short v) {
        return NATIVE_LE ? v : Short.reverseBytes(v);
    }

    private static int le(int v) {
        return NATIVE_LE ? v : Integer.reverseBytes(v);
    }

    private static long le(long v) {
        return NATIVE_LE ? v : Long.reverseBytes(v);
    }
}
