package io.membus.core.transport.message;

import io.membus.core.error.ErrorCode;
import io.membus.core.error.ProtocolException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The handshake record's bytes at the literal offsets its class comment and the transport
 * docs state (not the constants), every kind decoded to what was encoded, and every
 * malformed record refused with a {@link ProtocolException} naming the peer and the field.
 */
class HandshakeRecordTest {
    private static final String PEER = "10.0.0.7:4000";

    private static byte[] filled(int n, int first) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (first + i);
        }
        return b;
    }

    private static long le(byte[] b, int at, int bytes) {
        long v = 0;
        for (int i = bytes - 1; i >= 0; i--) {
            v = v << 8 | (b[at + i] & 0xff);
        }
        return v;
    }

    private static void header(byte[] b, int kind) {
        assertEquals(kind, b[0] & 0xff, "kind u8 at 0");
        assertEquals(1, b[1] & 0xff, "version u8 at 1");
        assertEquals(0, le(b, 2, 2), "reserved int16 at 2");
        assertEquals("MBHS", new String(b, 4, 4, StandardCharsets.US_ASCII), "magic at 4");
    }

    @Test
    void aHelloSitsAtItsDocumentedOffsetsAndDecodesToWhatWasWritten() {
        byte[] nonce = filled(32, 100);
        byte[] b = new HandshakeRecord.Hello(3, 0x0102030405060708L, 65535, 77, nonce).encode();
        assertEquals(64, b.length);
        header(b, 1);
        assertEquals(3, le(b, 8, 4), "node int32 at 8");
        assertEquals(65535, le(b, 12, 4), "target node int32 at 12");
        assertEquals(0x0102030405060708L, le(b, 16, 8), "incarnation int64 at 16");
        assertEquals(0x08, b[16], "little-endian");
        assertEquals(77, le(b, 24, 8), "target incarnation int64 at 24");
        assertArrayEquals(nonce, Arrays.copyOfRange(b, 32, 64), "nonce at 32");

        HandshakeRecord.Hello h = assertInstanceOf(HandshakeRecord.Hello.class, HandshakeRecord.decode(b, PEER));
        assertEquals(3, h.node());
        assertEquals(0x0102030405060708L, h.incarnation());
        assertEquals(65535, h.targetNode());
        assertEquals(77, h.targetIncarnation());
        assertArrayEquals(nonce, h.nonce());
    }

    @Test
    void challengeAuthWelcomeAndRefusalRoundTrip() {
        byte[] nonce = filled(32, 1);
        byte[] proof = filled(32, 50);
        byte[] b = new HandshakeRecord.Challenge(9, -5, nonce, proof).encode();
        assertEquals(88, b.length);
        header(b, 2);
        assertEquals(9, le(b, 8, 4), "node at 8");
        assertEquals(0, le(b, 12, 4), "reserved at 12");
        assertEquals(-5, le(b, 16, 8), "incarnation at 16");
        assertArrayEquals(nonce, Arrays.copyOfRange(b, 24, 56), "nonce at 24");
        assertArrayEquals(proof, Arrays.copyOfRange(b, 56, 88), "proof at 56");
        HandshakeRecord.Challenge c = (HandshakeRecord.Challenge) HandshakeRecord.decode(b, PEER);
        assertEquals(9, c.node());
        assertEquals(-5, c.incarnation());
        assertArrayEquals(nonce, c.nonce());
        assertArrayEquals(proof, c.proof());

        b = new HandshakeRecord.Auth(proof).encode();
        assertEquals(40, b.length);
        header(b, 3);
        assertArrayEquals(proof, Arrays.copyOfRange(b, 8, 40), "proof at 8");
        assertArrayEquals(proof, ((HandshakeRecord.Auth) HandshakeRecord.decode(b, PEER)).proof());

        b = new HandshakeRecord.Welcome(40123).encode();
        assertEquals(16, b.length);
        header(b, 4);
        assertEquals(40123, le(b, 8, 4), "port at 8");
        assertEquals(new HandshakeRecord.Welcome(40123), HandshakeRecord.decode(b, PEER));

        b = new HandshakeRecord.Refusal(ErrorCode.STALE_INCARNATION, 0, 42, "this is incarnation 42").encode();
        header(b, 5);
        assertEquals(ErrorCode.STALE_INCARNATION.wire(), b[8], "code u8 at 8");
        assertEquals(0, b[9], "reasons u8 at 9");
        assertEquals(42, le(b, 16, 8), "detail int64 at 16");
        assertEquals("this is incarnation 42", new String(b, 24, b.length - 24, StandardCharsets.UTF_8), "text at 24");
        assertEquals(new HandshakeRecord.Refusal(ErrorCode.STALE_INCARNATION, 0, 42, "this is incarnation 42"),
                HandshakeRecord.decode(b, PEER));

        HandshakeRecord.Refusal fenced = (HandshakeRecord.Refusal) HandshakeRecord.decode(new HandshakeRecord.Refusal(
                ErrorCode.NODE_UNAVAILABLE, HandshakeRecord.REASON_FENCED, 0, null).encode(), PEER);
        assertTrue(fenced.fenced());
        assertEquals("", fenced.text(), "no text: empty");
        assertEquals(1, new HandshakeRecord.Refusal(ErrorCode.NODE_UNAVAILABLE, 1, 0, "").encode()[9], "FENCED bit 0");
        assertFalse(new HandshakeRecord.Refusal(ErrorCode.AUTHENTICATION, 0, 0, "x").fenced());
    }

    @Test
    void aRefusalTextIsCutAtItsLimit() {
        byte[] b = new HandshakeRecord.Refusal(ErrorCode.NODE_UNAVAILABLE, 0, 0, "x".repeat(5000)).encode();
        assertEquals(24 + 1024, b.length);
        assertEquals(HandshakeRecord.MAX_LENGTH, b.length);
        assertEquals(1024, ((HandshakeRecord.Refusal) HandshakeRecord.decode(b, PEER)).text().length());
    }

    @Test
    void expectNamesTheKindItGotAndTheOneItWanted() {
        byte[] welcome = new HandshakeRecord.Welcome(0).encode();
        refused(() -> HandshakeRecord.expect(welcome, PEER, HandshakeRecord.KIND_CHALLENGE, true),
                "handshake record WELCOME where CHALLENGE or REFUSAL was expected");
        byte[] refusal = new HandshakeRecord.Refusal(ErrorCode.AUTHENTICATION, 0, 0, "no").encode();
        assertEquals(HandshakeRecord.KIND_REFUSAL,
                HandshakeRecord.expect(refusal, PEER, HandshakeRecord.KIND_WELCOME, true).kind());
        refused(() -> HandshakeRecord.expect(refusal, PEER, HandshakeRecord.KIND_AUTH, false),
                "handshake record REFUSAL where AUTH was expected");
    }

    @Test
    void everyMalformedRecordIsAProtocolErrorNamingWhatWasWrong() {
        byte[] hello = new HandshakeRecord.Hello(1, 2, 3, 4, new byte[32]).encode();

        refused(() -> HandshakeRecord.decode(new byte[7], PEER),
                "a record of 7 bytes is shorter than the 8-byte header");

        byte[] magic = hello.clone();
        magic[4] = 'X';
        refused(() -> HandshakeRecord.decode(magic, PEER), "not a Membus handshake");

        byte[] version = hello.clone();
        version[1] = 2;
        refused(() -> HandshakeRecord.decode(version, PEER),
                "handshake record version=2, supported=1: mixed-version clusters are not supported");

        byte[] reserved = hello.clone();
        reserved[3] = 1;
        refused(() -> HandshakeRecord.decode(reserved, PEER), "HELLO reserved byte 3=0x1, must be 0");

        byte[] kind = hello.clone();
        kind[0] = 9;
        refused(() -> HandshakeRecord.decode(kind, PEER), "kind=9 (unknown");

        refused(() -> HandshakeRecord.decode(Arrays.copyOf(hello, 63), PEER), "HELLO of 63 bytes, expected 64");
        refused(() -> HandshakeRecord.decode(Arrays.copyOf(hello, 65), PEER), "HELLO of 65 bytes, expected 64");

        byte[] challenge = new HandshakeRecord.Challenge(1, 2, new byte[32], new byte[32]).encode();
        challenge[13] = 7;
        refused(() -> HandshakeRecord.decode(challenge, PEER), "CHALLENGE reserved byte 13=0x7, must be 0");

        byte[] welcome = new HandshakeRecord.Welcome(1).encode();
        welcome[15] = 1;
        refused(() -> HandshakeRecord.decode(welcome, PEER), "WELCOME reserved byte 15=0x1, must be 0");
        byte[] port = new HandshakeRecord.Welcome(1).encode();
        port[10] = 1; // 65537
        refused(() -> HandshakeRecord.decode(port, PEER), "WELCOME port=65537, allowed=0..65535");

        byte[] refusal = new HandshakeRecord.Refusal(ErrorCode.NODE_UNAVAILABLE, 0, 0, "no").encode();
        refused(() -> HandshakeRecord.decode(Arrays.copyOf(refusal, 23), PEER),
                "REFUSAL of 23 bytes, expected 24..1048");
        refused(() -> HandshakeRecord.decode(new byte[1049], 0, 1049, PEER), "magic=0x0");
        byte[] longRefusal = Arrays.copyOf(refusal, 1049);
        refused(() -> HandshakeRecord.decode(longRefusal, PEER), "REFUSAL of 1049 bytes, expected 24..1048");
        byte[] reasons = refusal.clone();
        reasons[9] = 2;
        refused(() -> HandshakeRecord.decode(reasons, PEER), "REFUSAL reasons=0x2, known=0x1");
        byte[] refusalReserved = refusal.clone();
        refusalReserved[12] = 1;
        refused(() -> HandshakeRecord.decode(refusalReserved, PEER), "REFUSAL reserved byte 12=0x1, must be 0");

        // a record inside a larger buffer: only its own bytes count
        byte[] framed = new byte[5 + hello.length];
        System.arraycopy(hello, 0, framed, 5, hello.length);
        assertEquals(1, ((HandshakeRecord.Hello) HandshakeRecord.decode(framed, 5, hello.length, PEER)).node());
    }

    @Test
    void badInputsToTheEncoderAreTypedToo() {
        refused(() -> new HandshakeRecord.Hello(1, 2, 3, 4, new byte[31]),
                "HELLO nonce of 31 bytes, expected 32 bytes");
        refused(() -> new HandshakeRecord.Challenge(1, 2, new byte[32], null), "CHALLENGE proof of null, expected 32");
        refused(() -> new HandshakeRecord.Auth(new byte[33]), "AUTH proof of 33 bytes, expected 32 bytes");
        refused(() -> new HandshakeRecord.Welcome(70000), "WELCOME port=70000, allowed=0..65535");
        refused(() -> new HandshakeRecord.Refusal(null, 0, 0, "x"), "REFUSAL code=null");
        refused(() -> new HandshakeRecord.Refusal(ErrorCode.PROTOCOL, 4, 0, "x"), "REFUSAL reasons=0x4, known=0x1");
    }

    private static void refused(Executable call, String expectedPart) {
        ProtocolException e = assertThrows(ProtocolException.class, call);
        assertEquals(ErrorCode.PROTOCOL, e.code());
        assertTrue(e.getMessage().contains(expectedPart), e.getMessage());
    }
}
