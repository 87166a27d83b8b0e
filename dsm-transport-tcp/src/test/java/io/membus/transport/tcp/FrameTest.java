package io.membus.transport.tcp;

import io.membus.core.auth.PeerAuth;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.ProtocolException;
import io.membus.core.transport.message.HandshakeRecord;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The wire layout: every field at its documented offset, and the exact validation messages. */
class FrameTest {
    private final ByteBuf buf = Unpooled.buffer();
    private final Frame frame = new Frame();

    @AfterEach
    void release() {
        buf.release();
    }

    @Test
    void verbsSitAtTheirOffsetsInLittleEndian() {
        Frame.writeCas(buf, 0x1122334455667788L, 0x0102030405060708L, -2L, 7L, 9L);
        frame.wrap(buf, 0);
        assertEquals(Frame.HEADER_LENGTH + Frame.CAS_BODY_LENGTH, buf.readableBytes());
        assertEquals(Frame.HEADER_LENGTH + Frame.CAS_BODY_LENGTH, frame.frameLength());
        assertEquals(Frame.MIN_LENGTH_FIELD + Frame.CAS_BODY_LENGTH, buf.getIntLE(Frame.LENGTH_FIELD_OFFSET));
        assertEquals(Frame.VERSION, buf.getByte(Frame.VERSION_FIELD_OFFSET));
        assertEquals(Frame.OP_CAS, frame.opcode());
        assertEquals(0, frame.flags(), "not linked");
        assertEquals(0, buf.getByte(Frame.RESERVED_FIELD_OFFSET));
        assertEquals((byte) 0x88, buf.getByte(Frame.CORRELATION_ID_FIELD_OFFSET), "little-endian");
        assertEquals(0x1122334455667788L, frame.correlationId());
        assertEquals(0x0102030405060708L, frame.longAt(Frame.PTR_FIELD_OFFSET));
        assertEquals(-2L, frame.longAt(Frame.REMOTE_KEY_FIELD_OFFSET));
        assertEquals(7L, frame.longAt(Frame.EXPECTED_FIELD_OFFSET));
        assertEquals(9L, frame.longAt(Frame.UPDATE_FIELD_OFFSET));
        assertNull(frame.validate());

        buf.clear();
        byte[] data = {1, 2, 3, 4, 5};
        Frame.writeWrite(buf, 3, 10, 11, data, 1, 3);
        frame.wrap(buf, 0);
        assertEquals(Frame.HEADER_LENGTH + Frame.WRITE_FIXED_BODY_LENGTH + 3, frame.frameLength());
        assertEquals(3, frame.intAt(Frame.VERB_LENGTH_FIELD_OFFSET));
        assertArrayEquals(new byte[]{2, 3, 4}, frame.bytesAt(Frame.WRITE_DATA_FIELD_OFFSET, 3));
        assertNull(frame.validate());
    }

    @Test
    void messageFramesSitAtTheirDocumentedOffsets() {
        // literal offsets, as docs/tcp-transport.md states them, not the constants
        // the frame header, then one dsm-core MessageRecord (kind u8 | flags u8 | channel int16 | reserved int32 |
        // correlation int64 | body) from 16
        Frame.writeMessage(buf, 0x0102030405060708L, (short) 0xfffe, true, new byte[]{9, 8, 7});
        frame.wrap(buf, 0);
        assertNull(frame.validate());
        assertEquals(16 + 16 + 3, buf.readableBytes());
        assertEquals(4, buf.getByte(4), "version 4");
        assertEquals(0x20, buf.getByte(5));
        assertEquals(0x0102030405060708L, buf.getLongLE(8));
        assertEquals(2, buf.getByte(16), "record kind REQUEST at 16");
        assertEquals(0, buf.getByte(17), "record flags zero");
        assertEquals((short) 0xfffe, buf.getShortLE(18), "channel int16 at 18");
        assertEquals(0, buf.getIntLE(20));
        assertEquals(0x0102030405060708L, buf.getLongLE(24), "the record's correlation id, the frame's");
        assertEquals(9, buf.getByte(32), "payload from 32");
        assertTrue(frame.messageIsRequest());
        assertArrayEquals(new byte[]{9, 8, 7}, frame.messagePayload());

        buf.clear();
        Frame.writeMessage(buf, 1, (short) 3, false, new byte[0]);
        frame.wrap(buf, 0);
        assertNull(frame.validate());
        assertEquals(1, buf.getByte(16), "a one-way message is record kind MESSAGE");
        assertFalse(frame.messageIsRequest());

        buf.clear();
        Frame.writeCredit(buf, 64, 65536);
        frame.wrap(buf, 0);
        assertNull(frame.validate());
        assertEquals((byte) 0x85, buf.getByte(5));
        assertEquals(0L, buf.getLongLE(8), "a credit grant has correlation id 0");
        assertEquals(6, buf.getByte(16), "record kind CREDIT");
        assertEquals(64, buf.getIntLE(32));
        assertEquals(65536, buf.getIntLE(36));

        buf.clear();
        Frame.writeMessageReply(buf, 77, new byte[]{4, 5});
        frame.wrap(buf, 0);
        assertNull(frame.validate());
        assertEquals((byte) 0x83, buf.getByte(5));
        assertEquals(3, buf.getByte(16), "record kind REPLY");
        assertEquals(77L, buf.getLongLE(24));
        assertEquals(4, buf.getByte(32));

        buf.clear();
        Frame.writeMessageError(buf, 78, (byte) 19, 42L, "unknown channel");
        frame.wrap(buf, 0);
        assertNull(frame.validate());
        assertEquals((byte) 0x84, buf.getByte(5));
        assertEquals(4, buf.getByte(16), "record kind ERROR");
        assertEquals(19, buf.getIntLE(32), "code int32 at 32");
        assertEquals(42L, buf.getLongLE(40), "detail at 40");
        assertEquals("unknown channel", frame.messageErrorText());
        assertEquals(42L, frame.messageErrorDetail());

        buf.clear();
        Frame.writeHeader(buf, Frame.OP_MSG, 1, 3);
        buf.writeZero(3);
        frame.wrap(buf, 0);
        assertEquals("opcode=MSG, bodyLength=3, expected=16", frame.validate());
        buf.clear();
        Frame.writeHeader(buf, Frame.OP_MSG_CREDIT, 0, 4);
        buf.writeZero(4);
        frame.wrap(buf, 0);
        assertEquals("opcode=MSG_CREDIT, bodyLength=4, expected=24", frame.validate());
        // a record whose kind is not the opcode's, or whose correlation id is not the frame's
        buf.clear();
        Frame.writeMessageReply(buf, 5, new byte[0]);
        buf.setByte(5, Frame.OP_MSG);
        assertEquals("opcode=MSG, record kind=3 (not this opcode's)", frame.wrap(buf, 0).validate());
        buf.clear();
        Frame.writeMessage(buf, 5, (short) 1, true, new byte[0]);
        buf.setLongLE(24, 6);
        assertEquals("opcode=MSG, record correlationId=6, frame correlationId=5", frame.wrap(buf, 0).validate());
    }

    @Test
    void errorsCarryCodePointerLengthDetailAndMessage() {
        Frame.writeError(buf, 5, (byte) 2, 8, 0xabcL, 65536L, "wrong remote key: ptr=…");
        frame.wrap(buf, 0);
        assertNull(frame.validate());
        assertEquals(Frame.OP_ERROR, frame.opcode());
        assertEquals(2, buf.getByte(Frame.ERROR_CODE_FIELD_OFFSET));
        assertEquals(8, frame.intAt(Frame.ERROR_LENGTH_FIELD_OFFSET));
        assertEquals(0xabcL, frame.longAt(Frame.ERROR_PTR_FIELD_OFFSET));
        assertEquals(65536L, frame.longAt(Frame.ERROR_DETAIL_FIELD_OFFSET));
        assertEquals("wrong remote key: ptr=…", frame.errorMessage());
    }

    @Test
    void validationNamesWhatIsWrong() {
        Frame.writeFaa(buf, 1, 2, 3, 4);
        buf.setByte(Frame.VERSION_FIELD_OFFSET, 9);
        assertEquals("version=9, supported=" + Frame.VERSION, frame.wrap(buf, 0).validate());

        buf.clear();
        Frame.writeHeader(buf, Frame.OP_FAA, 1, 23);
        buf.writeZero(23);
        assertEquals("opcode=fetchAndAdd, bodyLength=23, expected=24", frame.wrap(buf, 0).validate());

        buf.clear();
        Frame.writeHeader(buf, (byte) 0x42, 1, 0);
        assertEquals("opcode=66 (unknown)", frame.wrap(buf, 0).validate());

        // uint8 fields print unsigned (they printed opcode=-47 and version=-16)
        buf.clear();
        Frame.writeHeader(buf, (byte) 0xd1, 1, 0);
        assertEquals("opcode=209 (unknown)", frame.wrap(buf, 0).validate());
        buf.setByte(Frame.VERSION_FIELD_OFFSET, 0xf0);
        assertEquals("version=240, supported=" + Frame.VERSION, frame.wrap(buf, 0).validate());

        buf.clear();
        Frame.writeWrite(buf, 1, 2, 3, new byte[16], 0, 16);
        buf.setIntLE(Frame.VERB_LENGTH_FIELD_OFFSET, 17); // claims one byte more than it carries
        assertEquals("opcode=write, bodyLength=36, expected=37", frame.wrap(buf, 0).validate());
    }

    @Test
    void handshakeFramesHaveFixedBodies() {
        byte[] nonce = PeerAuth.nonce();
        Frame.writeHello(buf, 2, 77, 1, 88, nonce);
        frame.wrap(buf, 0);
        assertNull(frame.validate());
        assertEquals(2, frame.intAt(Frame.HELLO_NODE_FIELD_OFFSET));
        assertEquals(77, frame.longAt(Frame.HELLO_INCARNATION_FIELD_OFFSET));
        assertEquals(1, frame.intAt(Frame.HELLO_TARGET_NODE_FIELD_OFFSET));
        assertEquals(88, frame.longAt(Frame.HELLO_TARGET_INCARNATION_FIELD_OFFSET));
        assertArrayEquals(nonce, frame.bytesAt(Frame.HELLO_NONCE_FIELD_OFFSET, Frame.NONCE_LENGTH));
        assertEquals(Frame.HEADER_LENGTH + Frame.HELLO_BODY_LENGTH, frame.frameLength());
    }

    @Test
    void handshakeBodiesAreDsmCoreHandshakeRecordsOfTheOpcodesKind() {
        Frame.writeWelcome(buf, 4242);
        frame.wrap(buf, 0);
        assertNull(frame.validate());
        assertEquals(Frame.HEADER_LENGTH + 16, frame.frameLength(), "a WELCOME record of 16 bytes");
        assertEquals(new HandshakeRecord.Welcome(4242), frame.handshakeRecord("peer"));
        assertEquals(HandshakeRecord.KIND_WELCOME, buf.getByte(Frame.HEADER_LENGTH), "the record from 16");
        buf.setByte(Frame.HEADER_LENGTH, HandshakeRecord.KIND_AUTH);
        assertEquals("opcode=WELCOME, handshake record kind=3 (not this opcode's)", frame.wrap(buf, 0).validate());
        buf.setByte(Frame.HEADER_LENGTH, HandshakeRecord.KIND_WELCOME);
        buf.setByte(Frame.HEADER_LENGTH + HandshakeRecord.VERSION_OFFSET, 2);
        ProtocolException e = assertThrows(ProtocolException.class, () -> frame.wrap(buf, 0).handshakeRecord("peer"));
        assertTrue(e.getMessage().contains("version=2, supported=1: mixed-version clusters are not supported"),
                e.getMessage());

        buf.clear();
        Frame.writeRefused(buf, new HandshakeRecord.Refusal(ErrorCode.STALE_INCARNATION, 0, 9, "old"));
        frame.wrap(buf, 0);
        assertNull(frame.validate());
        assertEquals(Frame.OP_REFUSED, frame.opcode());
        assertEquals("REFUSED", Frame.opName(frame.opcode()));
        assertEquals(new HandshakeRecord.Refusal(ErrorCode.STALE_INCARNATION, 0, 9, "old"), frame.handshakeRecord("p"));

        buf.clear();
        Frame.writeHeader(buf, Frame.OP_REFUSED, 0, 10);
        buf.writeZero(10);
        assertEquals("opcode=REFUSED, bodyLength=10, expected=24", frame.wrap(buf, 0).validate());
    }

    @Test
    void proofsDependOnRoleSecretIdentitiesAndNonces() {
        PeerAuth h = new PeerAuth(RawPeer.secret(Nodes.SECRET), "tcp");
        byte[] c = PeerAuth.nonce();
        byte[] s = PeerAuth.nonce();
        byte[] proof = h.proof(PeerAuth.Role.INITIATOR, 2, 5, 1, 6, c, s);
        assertEquals(32, proof.length);
        assertArrayEquals(proof, h.proof(PeerAuth.Role.INITIATOR, 2, 5, 1, 6, c, s), "deterministic");
        assertFalseMatch(proof, h.proof(PeerAuth.Role.TARGET, 2, 5, 1, 6, c, s));
        assertFalseMatch(proof, h.proof(PeerAuth.Role.INITIATOR, 2, 4, 1, 6, c, s));
        assertFalseMatch(proof, h.proof(PeerAuth.Role.INITIATOR, 2, 5, 1, 7, c, s));
        assertFalseMatch(proof, h.proof(PeerAuth.Role.INITIATOR, 2, 5, 1, 6, s, c));
        assertFalseMatch(proof, new PeerAuth(RawPeer.secret("another-secret-of-16+"), "tcp").proof(PeerAuth.Role.INITIATOR,
                2, 5, 1, 6, c, s));
    }

    private static void assertFalseMatch(byte[] a, byte[] b) {
        org.junit.jupiter.api.Assertions.assertFalse(PeerAuth.matches(a, b));
    }
}
