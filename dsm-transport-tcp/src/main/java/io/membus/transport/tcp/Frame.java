package io.membus.transport.tcp;

import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.transport.message.HandshakeRecord;
import io.membus.core.transport.message.MessageRecord;
import io.netty.buffer.ByteBuf;

import java.nio.charset.StandardCharsets;

/**
 * The wire format of the tcp transport: offset constants, opcodes, a flyweight
 * over one received frame, and the encoders. Every integer is little-endian
 * (the byte order of {@link io.membus.core.Words}).
 *
 * <pre>
 * Every frame:
 *   0               4       5       6               8                               16
 *   +---------------+-------+-------+---------------+-------------------------------+------ ... --+
 *   | frame length  |version|opcode | flags |reservd|        correlation id         |    body     |
 *   |    int32      | uint8 | uint8 | uint8 | (zero)|            int64              |             |
 *   +---------------+-------+-------+---------------+-------------------------------+------ ... --+
 *   frame length = the bytes after the length field = 12 + body length; at most max-frame - 4.
 *
 * flags (requests): bit 0 LINKED: run this verb only if the verb before it on this connection ran
 *   without error; otherwise it is answered with ERROR NOT_RUN and has no effect. Zero elsewhere.
 *
 * Requests (initiator -> target), body offsets from 16:
 *   READ   ptr int64 | remoteKey int64 | length int32                          (20 bytes)
 *   WRITE  ptr int64 | remoteKey int64 | length int32 | data[length]          (20 + length)
 *   CAS    ptr int64 | remoteKey int64 | expected int64 | update int64         (32 bytes)
 *   FAA    ptr int64 | remoteKey int64 | delta int64                           (24 bytes)
 *
 * Responses (target -> initiator) carry the request's correlation id, in request order:
 *   OK     the result: read: data[length]; write: nothing; CAS, FAA: the old value int64
 *   ERROR  code uint8 | reasons uint8 | reserved[2] | length int32 | ptr int64 | detail int64 | message UTF-8 (rest)
 *          reasons: bit 0 FENCED: the target refused because it fenced the initiator (NODE_UNAVAILABLE);
 *          the initiator stops reconnecting. Zero otherwise.
 *
 * Messages (after the handshake; a message's correlation id is the sender's, answers carry it, in any order).
 * The body of every message frame is one dsm-core {@link MessageRecord} (16-byte header: kind uint8 | flags uint8 |
 * channel int16 | reserved int32 | correlation int64; then its body), whose kind is the opcode's and whose
 * correlation id is the frame's:
 *   MSG        record MESSAGE (1) or REQUEST (2): header | payload                            (16 + payload)
 *   MSG_REPLY  record REPLY (3): header | the handler's reply (empty for a one-way message)    (16 + reply)
 *   MSG_ERROR  record ERROR (4): header | code int32 | reserved int32 | detail int64 | text UTF-8 (32 + text)
 *   MSG_CREDIT record CREDIT (6): header | credits int32 | maxMessageSize int32 (correlation id 0; the target
 *              grants its inbox right after WELCOME: the initiator may have that many messages unanswered)  (24)
 *
 * Handshake (correlation id 0), before any verb. The body of every handshake frame is one dsm-core
 * {@link HandshakeRecord} (8-byte header: kind uint8 | version uint8 | reserved int16 | magic "MBHS"; then its
 * body), whose kind is the opcode's; the record's offsets are in that class:
 *   HELLO     record HELLO (1): node | targetNode | incarnation | targetIncarnation | nonce[32]           (64)
 *   CHALLENGE record CHALLENGE (2): node | incarnation | nonce[32] | the target's proof[32]                (88)
 *   AUTH      record AUTH (3): the initiator's proof[32]                                                 (40)
 *   WELCOME   record WELCOME (4): port = the port of this node's lane server, where blocking lanes connect
 *             (0: none; lanes then connect to this port)                                                (16)
 *   REFUSED   record REFUSAL (5): code | reasons (FENCED) | detail | text: the target's decision not to admit
 *             the initiator (AUTHENTICATION, STALE_INCARNATION with the target's incarnation as detail,
 *             NODE_UNAVAILABLE: wrong node, fenced, shutting down, too many lanes); the connection is closed
 *                                                                                             (24 + text)
 *   a handshake frame that is not valid (wrong version, length, opcode, malformed record) gets an ERROR
 *   frame with code PROTOCOL and the connection is closed.
 * </pre>
 *
 * <p><b>Note:</b> a {@code Frame} flyweight is not thread-safe: one I/O thread
 * wraps and reads it. The static encoders are stateless.
 */
public final class Frame {
    /**
     * Version of this wire format; a frame with another version is a protocol error.
     * Version 2 gave the first reserved byte its meaning as flags (LINKED), which a
     * version 1 target would have ignored: the two refuse each other's handshake.
     * Version 3 made every message frame's body a dsm-core {@link MessageRecord}.
     * Version 4 made every handshake frame's body a dsm-core {@link HandshakeRecord} (and a
     * refused handshake a REFUSED frame). Nodes of different versions refuse each other:
     * mixed-version clusters are not supported.
     */
    public static final byte VERSION = 4;

    public static final int LENGTH_FIELD_OFFSET = 0;
    public static final int VERSION_FIELD_OFFSET = 4;
    public static final int OPCODE_FIELD_OFFSET = 5;
    public static final int FLAGS_FIELD_OFFSET = 6;
    public static final int RESERVED_FIELD_OFFSET = 7;
    /** Request flag: run only if the previous verb of this connection ran without error. */
    public static final byte FLAG_LINKED = 0x01;
    public static final int CORRELATION_ID_FIELD_OFFSET = 8;
    /** Bytes of the header, the length field included; the body starts here. */
    public static final int HEADER_LENGTH = 16;
    /** Smallest value of the length field: a frame with an empty body. */
    public static final int MIN_LENGTH_FIELD = HEADER_LENGTH - 4;

    // verb request body
    public static final int PTR_FIELD_OFFSET = HEADER_LENGTH;
    public static final int REMOTE_KEY_FIELD_OFFSET = PTR_FIELD_OFFSET + 8;
    public static final int VERB_LENGTH_FIELD_OFFSET = REMOTE_KEY_FIELD_OFFSET + 8;
    public static final int WRITE_DATA_FIELD_OFFSET = VERB_LENGTH_FIELD_OFFSET + 4;
    public static final int EXPECTED_FIELD_OFFSET = REMOTE_KEY_FIELD_OFFSET + 8;
    public static final int UPDATE_FIELD_OFFSET = EXPECTED_FIELD_OFFSET + 8;
    public static final int DELTA_FIELD_OFFSET = REMOTE_KEY_FIELD_OFFSET + 8;
    public static final int READ_BODY_LENGTH = 20;
    public static final int WRITE_FIXED_BODY_LENGTH = 20;
    public static final int CAS_BODY_LENGTH = 32;
    public static final int FAA_BODY_LENGTH = 24;

    // error body
    public static final int ERROR_CODE_FIELD_OFFSET = HEADER_LENGTH;
    /** One byte of reasons ({@link #ERROR_REASON_FENCED}) beside the code. */
    public static final int ERROR_REASONS_FIELD_OFFSET = HEADER_LENGTH + 1;
    /** Reason bit of an ERROR frame: the target fenced the initiator. */
    public static final int ERROR_REASON_FENCED = 1;
    public static final int ERROR_LENGTH_FIELD_OFFSET = HEADER_LENGTH + 4;
    public static final int ERROR_PTR_FIELD_OFFSET = HEADER_LENGTH + 8;
    public static final int ERROR_DETAIL_FIELD_OFFSET = HEADER_LENGTH + 16;
    public static final int ERROR_MESSAGE_FIELD_OFFSET = HEADER_LENGTH + 24;
    /** Longest error message carried; longer ones are cut. */
    public static final int MAX_ERROR_MESSAGE = 1024;

    // handshake bodies: one HandshakeRecord from HEADER_LENGTH
    public static final int NONCE_LENGTH = HandshakeRecord.NONCE_LENGTH;
    public static final int PROOF_LENGTH = HandshakeRecord.PROOF_LENGTH;
    public static final int HELLO_NODE_FIELD_OFFSET = HEADER_LENGTH + HandshakeRecord.HELLO_NODE_OFFSET;
    public static final int HELLO_INCARNATION_FIELD_OFFSET = HEADER_LENGTH + HandshakeRecord.HELLO_INCARNATION_OFFSET;
    public static final int HELLO_TARGET_NODE_FIELD_OFFSET = HEADER_LENGTH + HandshakeRecord.HELLO_TARGET_NODE_OFFSET;
    public static final int HELLO_TARGET_INCARNATION_FIELD_OFFSET = HEADER_LENGTH
            + HandshakeRecord.HELLO_TARGET_INCARNATION_OFFSET;
    public static final int HELLO_NONCE_FIELD_OFFSET = HEADER_LENGTH + HandshakeRecord.HELLO_NONCE_OFFSET;
    public static final int HELLO_BODY_LENGTH = HandshakeRecord.HELLO_LENGTH;
    public static final int CHALLENGE_NODE_FIELD_OFFSET = HEADER_LENGTH + HandshakeRecord.CHALLENGE_NODE_OFFSET;
    public static final int CHALLENGE_INCARNATION_FIELD_OFFSET = HEADER_LENGTH
            + HandshakeRecord.CHALLENGE_INCARNATION_OFFSET;
    public static final int CHALLENGE_NONCE_FIELD_OFFSET = HEADER_LENGTH + HandshakeRecord.CHALLENGE_NONCE_OFFSET;
    public static final int CHALLENGE_PROOF_FIELD_OFFSET = HEADER_LENGTH + HandshakeRecord.CHALLENGE_PROOF_OFFSET;
    public static final int CHALLENGE_BODY_LENGTH = HandshakeRecord.CHALLENGE_LENGTH;
    public static final int AUTH_PROOF_FIELD_OFFSET = HEADER_LENGTH + HandshakeRecord.AUTH_PROOF_OFFSET;
    public static final int AUTH_BODY_LENGTH = HandshakeRecord.AUTH_LENGTH;

    // message bodies: one MessageRecord from HEADER_LENGTH
    public static final int MSG_RECORD_FIELD_OFFSET = HEADER_LENGTH;
    public static final int MSG_KIND_FIELD_OFFSET = HEADER_LENGTH + MessageRecord.KIND_OFFSET;
    public static final int MSG_CHANNEL_FIELD_OFFSET = HEADER_LENGTH + MessageRecord.CHANNEL_OFFSET;
    public static final int MSG_CORRELATION_FIELD_OFFSET = HEADER_LENGTH + MessageRecord.CORRELATION_OFFSET;
    /** The payload of MSG, the reply of MSG_REPLY. */
    public static final int MSG_PAYLOAD_FIELD_OFFSET = HEADER_LENGTH + MessageRecord.BODY_OFFSET;
    /** Bytes of a message frame's body besides its payload or reply: the record header. */
    public static final int MSG_FIXED_BODY_LENGTH = MessageRecord.HEADER_LENGTH;
    public static final int MSG_ERROR_CODE_FIELD_OFFSET = HEADER_LENGTH + MessageRecord.ERROR_CODE_OFFSET;
    public static final int MSG_ERROR_DETAIL_FIELD_OFFSET = HEADER_LENGTH + MessageRecord.ERROR_DETAIL_OFFSET;
    public static final int MSG_ERROR_TEXT_FIELD_OFFSET = HEADER_LENGTH + MessageRecord.ERROR_TEXT_OFFSET;
    public static final int CREDIT_CREDITS_FIELD_OFFSET = HEADER_LENGTH + MessageRecord.BODY_OFFSET
            + MessageRecord.CREDIT_CREDITS_BODY_OFFSET;
    public static final int CREDIT_MAX_SIZE_FIELD_OFFSET = HEADER_LENGTH + MessageRecord.BODY_OFFSET
            + MessageRecord.CREDIT_MAX_SIZE_BODY_OFFSET;
    public static final int CREDIT_BODY_LENGTH = MessageRecord.CREDIT_LENGTH;
    public static final int WELCOME_LANE_PORT_FIELD_OFFSET = HEADER_LENGTH + HandshakeRecord.WELCOME_PORT_OFFSET;
    public static final int WELCOME_BODY_LENGTH = HandshakeRecord.WELCOME_LENGTH;

    // opcodes
    public static final byte OP_READ = 1;
    public static final byte OP_WRITE = 2;
    public static final byte OP_CAS = 3;
    public static final byte OP_FAA = 4;
    public static final byte OP_MSG = 0x20;
    public static final byte OP_MSG_REPLY = (byte) 0x83;
    public static final byte OP_MSG_ERROR = (byte) 0x84;
    public static final byte OP_MSG_CREDIT = (byte) 0x85;
    public static final byte OP_HELLO = 0x10;
    public static final byte OP_CHALLENGE = 0x11;
    public static final byte OP_AUTH = 0x12;
    public static final byte OP_WELCOME = 0x13;
    /** The target's refusal of a handshake: a {@link HandshakeRecord.Refusal}; the connection closes. */
    public static final byte OP_REFUSED = 0x14;
    public static final byte OP_OK = (byte) 0x81;
    public static final byte OP_ERROR = (byte) 0x82;

    /** Default largest frame: a read or write of {@link io.membus.core.transport.SegmentTable#MAX_VERB_LENGTH} plus header. */
    public static final int DEFAULT_MAX_FRAME = io.membus.core.transport.SegmentTable.MAX_VERB_LENGTH + 64;

    private ByteBuf buffer;
    private int offset;

    /** Wraps the frame that starts at {@code offset} of {@code buffer} (its length field included). */
    public Frame wrap(ByteBuf buffer, int offset) {
        this.buffer = buffer;
        this.offset = offset;
        return this;
    }

    /** Bytes of the whole frame, the length field included. */
    public int frameLength() {
        return buffer.getIntLE(offset + LENGTH_FIELD_OFFSET) + 4;
    }

    public int bodyLength() {
        return frameLength() - HEADER_LENGTH;
    }

    public byte version() {
        return buffer.getByte(offset + VERSION_FIELD_OFFSET);
    }

    public byte opcode() {
        return buffer.getByte(offset + OPCODE_FIELD_OFFSET);
    }

    /** The request flags ({@link #FLAG_LINKED}). */
    public byte flags() {
        return buffer.getByte(offset + FLAGS_FIELD_OFFSET);
    }

    public long correlationId() {
        return buffer.getLongLE(offset + CORRELATION_ID_FIELD_OFFSET);
    }

    /** The int32 at {@code fieldOffset} (one of the {@code *_FIELD_OFFSET} constants). */
    public int intAt(int fieldOffset) {
        return buffer.getIntLE(offset + fieldOffset);
    }

    /** The int16 at {@code fieldOffset}. */
    public short shortAt(int fieldOffset) {
        return buffer.getShortLE(offset + fieldOffset);
    }

    /** The byte at {@code fieldOffset}. */
    public byte byteAt(int fieldOffset) {
        return buffer.getByte(offset + fieldOffset);
    }

    /** The int64 at {@code fieldOffset}. */
    public long longAt(int fieldOffset) {
        return buffer.getLongLE(offset + fieldOffset);
    }

    /** Copies {@code length} bytes at {@code fieldOffset} into {@code dst}. */
    public void bytesAt(int fieldOffset, byte[] dst, int dstOffset, int length) {
        buffer.getBytes(offset + fieldOffset, dst, dstOffset, length);
    }

    public byte[] bytesAt(int fieldOffset, int length) {
        byte[] b = new byte[length];
        bytesAt(fieldOffset, b, 0, length);
        return b;
    }

    /** The error message of an ERROR frame. */
    public String errorMessage() {
        return textFrom(ERROR_MESSAGE_FIELD_OFFSET);
    }

    private String textFrom(int fieldOffset) {
        int n = frameLength() - fieldOffset;
        return n <= 0 ? "" : buffer.toString(offset + fieldOffset, n, StandardCharsets.UTF_8);
    }

    /** The record kind of a message frame, unsigned. */
    public int messageKind() {
        return buffer.getUnsignedByte(offset + MSG_KIND_FIELD_OFFSET);
    }

    /** Whether a MSG frame is a request (record kind REQUEST) rather than a one-way message. */
    public boolean messageIsRequest() {
        return messageKind() == MessageRecord.KIND_REQUEST;
    }

    /** The payload of a MSG frame, or the reply of a MSG_REPLY frame. */
    public byte[] messagePayload() {
        return bytesAt(MSG_PAYLOAD_FIELD_OFFSET, bodyLength() - MSG_FIXED_BODY_LENGTH);
    }

    /** The error code of a MSG_ERROR frame. */
    public ErrorCode messageErrorCode() {
        return ErrorCode.fromWire(intAt(MSG_ERROR_CODE_FIELD_OFFSET) & 0xff);
    }

    public long messageErrorDetail() {
        return longAt(MSG_ERROR_DETAIL_FIELD_OFFSET);
    }

    /** The text of a MSG_ERROR frame. */
    public String messageErrorText() {
        return textFrom(MSG_ERROR_TEXT_FIELD_OFFSET);
    }

    /**
     * Checks the version and that the body length is what {@code opcode} requires.
     *
     * @return {@code null} when valid, else what is wrong (key=value)
     */
    public String validate() {
        if (version() != VERSION) {
            return "version=" + (version() & 0xff) + ", supported=" + VERSION; // uint8: never printed negative
        }
        int body = bodyLength();
        byte op = opcode();
        int expected = switch (op) {
            case OP_READ -> READ_BODY_LENGTH;
            case OP_WRITE -> body < WRITE_FIXED_BODY_LENGTH ? WRITE_FIXED_BODY_LENGTH
                    : WRITE_FIXED_BODY_LENGTH + intAt(VERB_LENGTH_FIELD_OFFSET);
            case OP_CAS -> CAS_BODY_LENGTH;
            case OP_FAA -> FAA_BODY_LENGTH;
            case OP_HELLO -> HELLO_BODY_LENGTH;
            case OP_CHALLENGE -> CHALLENGE_BODY_LENGTH;
            case OP_AUTH -> AUTH_BODY_LENGTH;
            case OP_WELCOME -> WELCOME_BODY_LENGTH;
            case OP_REFUSED -> Math.min(Math.max(body, HandshakeRecord.REFUSAL_TEXT_OFFSET),
                    HandshakeRecord.MAX_LENGTH);
            case OP_OK -> body;
            case OP_ERROR -> body < ERROR_MESSAGE_FIELD_OFFSET - HEADER_LENGTH
                    ? ERROR_MESSAGE_FIELD_OFFSET - HEADER_LENGTH : body;
            case OP_MSG, OP_MSG_REPLY -> Math.max(body, MSG_FIXED_BODY_LENGTH);
            case OP_MSG_ERROR -> Math.max(body, MessageRecord.ERROR_TEXT_OFFSET);
            case OP_MSG_CREDIT -> CREDIT_BODY_LENGTH;
            default -> -1;
        };
        if (expected < 0) {
            return "opcode=" + (op & 0xff) + " (unknown)";
        }
        if (body != expected) {
            return "opcode=" + opName(op) + ", bodyLength=" + body + ", expected=" + expected;
        }
        if (isMessage(op)) {
            return validateRecord(op);
        }
        int handshakeKind = handshakeKind(op);
        if (handshakeKind != 0 && byteAt(HEADER_LENGTH + HandshakeRecord.KIND_OFFSET) != handshakeKind) {
            return "opcode=" + opName(op) + ", handshake record kind="
                    + (byteAt(HEADER_LENGTH + HandshakeRecord.KIND_OFFSET) & 0xff) + " (not this opcode's)";
        }
        return null;
    }

    /** The handshake record kind a handshake opcode carries; 0 for any other opcode. */
    private static int handshakeKind(byte op) {
        return switch (op) {
            case OP_HELLO -> HandshakeRecord.KIND_HELLO;
            case OP_CHALLENGE -> HandshakeRecord.KIND_CHALLENGE;
            case OP_AUTH -> HandshakeRecord.KIND_AUTH;
            case OP_WELCOME -> HandshakeRecord.KIND_WELCOME;
            case OP_REFUSED -> HandshakeRecord.KIND_REFUSAL;
            default -> 0;
        };
    }

    /**
     * The handshake record in the body of a handshake frame (validated): decoded, its
     * version, magic and fields checked ({@link HandshakeRecord#decode}).
     *
     * @param peer who sent it, for the error
     * @throws ProtocolException when the record is malformed or of another version
     */
    public HandshakeRecord.Record handshakeRecord(String peer) {
        return HandshakeRecord.decode(bytesAt(HEADER_LENGTH, bodyLength()), peer);
    }

    private static boolean isMessage(byte op) {
        return op == OP_MSG || op == OP_MSG_REPLY || op == OP_MSG_ERROR || op == OP_MSG_CREDIT;
    }

    /** A message frame's record: the kind its opcode names, the frame's correlation id. */
    private String validateRecord(byte op) {
        int kind = messageKind();
        boolean kindOk = switch (op) {
            case OP_MSG -> kind == MessageRecord.KIND_MESSAGE || kind == MessageRecord.KIND_REQUEST;
            case OP_MSG_REPLY -> kind == MessageRecord.KIND_REPLY;
            case OP_MSG_ERROR -> kind == MessageRecord.KIND_ERROR;
            default -> kind == MessageRecord.KIND_CREDIT;
        };
        if (!kindOk) {
            return "opcode=" + opName(op) + ", record kind=" + kind + " (not this opcode's)";
        }
        long recordCorrelation = longAt(MSG_CORRELATION_FIELD_OFFSET);
        if (recordCorrelation != correlationId()) {
            return "opcode=" + opName(op) + ", record correlationId=" + recordCorrelation + ", frame correlationId="
                    + correlationId();
        }
        return null;
    }

    public static String opName(byte opcode) {
        return switch (opcode) {
            case OP_READ -> "read";
            case OP_WRITE -> "write";
            case OP_CAS -> "compareAndSwap";
            case OP_FAA -> "fetchAndAdd";
            case OP_HELLO -> "HELLO";
            case OP_CHALLENGE -> "CHALLENGE";
            case OP_AUTH -> "AUTH";
            case OP_WELCOME -> "WELCOME";
            case OP_REFUSED -> "REFUSED";
            case OP_OK -> "OK";
            case OP_MSG -> "MSG";
            case OP_MSG_REPLY -> "MSG_REPLY";
            case OP_MSG_ERROR -> "MSG_ERROR";
            case OP_MSG_CREDIT -> "MSG_CREDIT";
            case OP_ERROR -> "ERROR";
            default -> "0x" + Integer.toHexString(opcode & 0xff);
        };
    }

    // ---------------------------------------------------------------- encoders

    /** Appends a header for a frame with {@code bodyLength} bytes of body; the caller appends the body. */
    public static void writeHeader(ByteBuf out, byte opcode, long correlationId, int bodyLength) {
        out.writeIntLE(MIN_LENGTH_FIELD + bodyLength);
        out.writeByte(VERSION);
        out.writeByte(opcode);
        out.writeShortLE(0);
        out.writeLongLE(correlationId);
    }

    public static void writeRead(ByteBuf out, long correlationId, long ptr, long remoteKey, int length) {
        writeHeader(out, OP_READ, correlationId, READ_BODY_LENGTH);
        out.writeLongLE(ptr);
        out.writeLongLE(remoteKey);
        out.writeIntLE(length);
    }

    public static void writeWrite(ByteBuf out, long correlationId, long ptr, long remoteKey, byte[] src, int srcOffset,
                                  int length) {
        writeHeader(out, OP_WRITE, correlationId, WRITE_FIXED_BODY_LENGTH + length);
        out.writeLongLE(ptr);
        out.writeLongLE(remoteKey);
        out.writeIntLE(length);
        out.writeBytes(src, srcOffset, length);
    }

    public static void writeCas(ByteBuf out, long correlationId, long ptr, long remoteKey, long expected, long update) {
        writeHeader(out, OP_CAS, correlationId, CAS_BODY_LENGTH);
        out.writeLongLE(ptr);
        out.writeLongLE(remoteKey);
        out.writeLongLE(expected);
        out.writeLongLE(update);
    }

    /** A CAS request that runs only if the verb before it on its connection ran without error. */
    public static void writeLinkedCas(ByteBuf out, long correlationId, long ptr, long remoteKey, long expected,
                                      long update) {
        int start = out.writerIndex();
        writeCas(out, correlationId, ptr, remoteKey, expected, update);
        out.setByte(start + FLAGS_FIELD_OFFSET, FLAG_LINKED);
    }

    public static void writeFaa(ByteBuf out, long correlationId, long ptr, long remoteKey, long delta) {
        writeHeader(out, OP_FAA, correlationId, FAA_BODY_LENGTH);
        out.writeLongLE(ptr);
        out.writeLongLE(remoteKey);
        out.writeLongLE(delta);
    }

    public static void writeOkValue(ByteBuf out, long correlationId, long value) {
        writeHeader(out, OP_OK, correlationId, 8);
        out.writeLongLE(value);
    }

    public static void writeError(ByteBuf out, long correlationId, byte code, int length, long ptr, long detail,
                                  String message) {
        writeError(out, OP_ERROR, correlationId, code, 0, length, ptr, detail, message);
    }

    /** An ERROR frame with reason bits ({@link #ERROR_REASON_FENCED}). */
    public static void writeError(ByteBuf out, long correlationId, byte code, int reasons, int length, long ptr,
                                  long detail, String message) {
        writeError(out, OP_ERROR, correlationId, code, reasons, length, ptr, detail, message);
    }

    /** The reason bits an ERROR frame carries for {@code e}: {@link #ERROR_REASON_FENCED} for a fence. */
    public static int errorReasons(DsmException e) {
        return e instanceof NodeUnavailableException n && n.fenced() ? ERROR_REASON_FENCED : 0;
    }

    /** The reason bits of an ERROR frame. */
    public int errorReasons() {
        return buffer.getUnsignedByte(offset + ERROR_REASONS_FIELD_OFFSET);
    }

    /** A message: the sender's correlation id, the channel, whether it is a request, the payload. */
    public static void writeMessage(ByteBuf out, long correlationId, short channel, boolean request, byte[] payload) {
        writeRecordHeader(out, OP_MSG, MessageRecord.messageKind(request), channel, correlationId,
                payload.length);
        out.writeBytes(payload);
    }

    public static void writeMessageReply(ByteBuf out, long correlationId, byte[] reply) {
        writeRecordHeader(out, OP_MSG_REPLY, MessageRecord.KIND_REPLY, (short) 0, correlationId, reply.length);
        out.writeBytes(reply);
    }

    /** The failure of a message: its code, one number ({@code MessageFailures.detail}) and a text. */
    public static void writeMessageError(ByteBuf out, long correlationId, byte code, long detail, String text) {
        byte[] t = MessageRecord.errorText(text);
        writeRecordHeader(out, OP_MSG_ERROR, MessageRecord.KIND_ERROR, (short) 0, correlationId,
                MessageRecord.errorLength(t) - MessageRecord.HEADER_LENGTH);
        out.writeIntLE(code & 0xff);
        out.writeIntLE(0);
        out.writeLongLE(detail);
        out.writeBytes(t);
    }

    public static void writeCredit(ByteBuf out, int credits, int maxMessageSize) {
        writeRecordHeader(out, OP_MSG_CREDIT, MessageRecord.KIND_CREDIT, (short) 0, 0,
                MessageRecord.CREDIT_BODY_LENGTH);
        out.writeIntLE(credits);
        out.writeIntLE(maxMessageSize);
    }

    /** The frame header and the record header of a message frame whose record body has {@code recordBody} bytes. */
    private static void writeRecordHeader(ByteBuf out, byte opcode, int kind, short channel, long correlationId,
                                          int recordBody) {
        writeHeader(out, opcode, correlationId, MessageRecord.HEADER_LENGTH + recordBody);
        out.writeLongLE(MessageRecord.headerWord(kind, channel));
        out.writeLongLE(correlationId);
    }

    private static void writeError(ByteBuf out, byte opcode, long correlationId, byte code, int reasons, int length,
                                   long ptr, long detail, String message) {
        byte[] msg = message == null ? new byte[0] : message.getBytes(StandardCharsets.UTF_8);
        int n = Math.min(msg.length, MAX_ERROR_MESSAGE);
        writeHeader(out, opcode, correlationId, ERROR_MESSAGE_FIELD_OFFSET - HEADER_LENGTH + n);
        out.writeByte(code);
        out.writeByte(reasons);
        out.writeShortLE(0);
        out.writeIntLE(length);
        out.writeLongLE(ptr);
        out.writeLongLE(detail);
        out.writeBytes(msg, 0, n);
    }

    public static void writeHello(ByteBuf out, int nodeId, long incarnation, int targetNode, long targetIncarnation,
                                  byte[] nonce) {
        writeHandshake(out, OP_HELLO, new HandshakeRecord.Hello(nodeId, incarnation, targetNode, targetIncarnation,
                nonce));
    }

    public static void writeChallenge(ByteBuf out, int nodeId, long incarnation, byte[] nonce, byte[] proof) {
        writeHandshake(out, OP_CHALLENGE, new HandshakeRecord.Challenge(nodeId, incarnation, nonce, proof));
    }

    public static void writeAuth(ByteBuf out, byte[] proof) {
        writeHandshake(out, OP_AUTH, new HandshakeRecord.Auth(proof));
    }

    /** @param lanePort the port of the node's lane server, 0 for none */
    public static void writeWelcome(ByteBuf out, int lanePort) {
        writeHandshake(out, OP_WELCOME, new HandshakeRecord.Welcome(lanePort));
    }

    /** A REFUSED frame: the target does not admit the initiator, and says why. */
    public static void writeRefused(ByteBuf out, HandshakeRecord.Refusal refusal) {
        writeHandshake(out, OP_REFUSED, refusal);
    }

    /** A handshake frame: the frame header, then the record as its body. */
    private static void writeHandshake(ByteBuf out, byte opcode, HandshakeRecord.Record record) {
        byte[] body = record.encode();
        writeHeader(out, opcode, 0, body.length);
        out.writeBytes(body);
    }
}
