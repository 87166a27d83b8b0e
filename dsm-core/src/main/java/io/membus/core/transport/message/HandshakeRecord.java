package io.membus.core.transport.message;

import io.membus.core.auth.PeerAuth;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.ProtocolException;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * Layout of one handshake record: what two nodes say to each other when one opens a
 * connection to the other, before anything else: who connects (node id, incarnation),
 * whom it means (the target's node id and incarnation), both nonces and both proofs of the
 * cluster secret ({@link PeerAuth}), the target's welcome, or why it refuses. Every
 * networked transport moves these records, each in its own framing: tcp puts one in the
 * body of its HELLO, CHALLENGE, AUTH, WELCOME and REFUSED frames; rdma writes each one on
 * its control stream behind a length (it sends no WELCOME: its first catalog follows an
 * admitted AUTH). What each side checks (the proofs, the node and
 * incarnation asked for, fencing) is the transport's; what the bytes mean is here.
 *
 * <pre>
 *   0      1        2                4                               8
 *   +------+--------+----------------+-------------------------------+------ ... --+
 *   | kind |version |  reserved (0)  |        magic "MBHS"           |    body      |
 *   |  u8  |   u8   |     int16      |   bytes 'M' 'B' 'H' 'S'       |              |
 *   +------+--------+----------------+-------------------------------+------ ... --+
 *
 *   HELLO (1)      initiator -> target                                                     (64 bytes)
 *     8 node int32 | 12 targetNode int32 | 16 incarnation int64 | 24 targetIncarnation int64 | 32 nonce[32]
 *   CHALLENGE (2)  target -> initiator                                                     (88 bytes)
 *     8 node int32 | 12 reserved int32 (0) | 16 incarnation int64 | 24 nonce[32] | 56 proof[32] (the target's)
 *   AUTH (3)       initiator -> target                                                     (40 bytes)
 *     8 proof[32] (the initiator's)
 *   WELCOME (4)    target -> initiator: admitted                                           (16 bytes)
 *     8 port int32 (a second port of the target for further connections: tcp's lane server; 0 none)
 *     | 12 reserved int32 (0)
 *   REFUSAL (5)    target -> initiator: not admitted; the connection closes      (24 + text, at most 1048)
 *     8 code u8 (ErrorCode.wire()) | 9 reasons u8 (bit 0 FENCED: the target fenced the initiator,
 *     reconnecting cannot help) | 10 reserved int16 (0) | 12 reserved int32 (0)
 *     | 16 detail int64 (STALE_INCARNATION: the target's incarnation; else 0) | 24 text UTF-8 (at most 1024)
 *
 *   proofs: PeerAuth.proof(role, initiator node, incarnation, target node, incarnation, nonce, nonce)
 * </pre>
 *
 * All integers little-endian, as everywhere in Membus ({@link io.membus.core.Words}). A
 * record's length is its framing's to carry; every kind but REFUSAL has exactly its length.
 * {@link #VERSION} is checked on every decode: a record of another version is refused with
 * a {@link ProtocolException} naming both versions (mixed-version clusters are not
 * supported). Every malformed record (too short or long for its kind, unknown kind, a
 * reserved field not zero, bad magic, unknown reason bits) is refused the same way, naming
 * the field; nothing of it is used.
 *
 * <p><b>Note:</b> stateless; thread-safe. The record types are immutable values except for
 * their byte arrays (nonces, proofs), which they neither copy nor change: a caller that
 * hands one over does not change it afterwards. A decoded record's arrays are its own.
 */
public final class HandshakeRecord {
    /** Version of this layout; a record of another version is refused. */
    public static final int VERSION = 1;
    /** Bytes 4..7 of every record: 'M' 'B' 'H' 'S'. */
    public static final int MAGIC = 0x5348424d;

    public static final int KIND_HELLO = 1;
    public static final int KIND_CHALLENGE = 2;
    public static final int KIND_AUTH = 3;
    public static final int KIND_WELCOME = 4;
    public static final int KIND_REFUSAL = 5;

    public static final int KIND_OFFSET = 0;
    public static final int VERSION_OFFSET = 1;
    public static final int MAGIC_OFFSET = 4;
    /** Bytes of the header; the body starts here. */
    public static final int HEADER_LENGTH = 8;

    public static final int NONCE_LENGTH = PeerAuth.NONCE_LENGTH;
    public static final int PROOF_LENGTH = PeerAuth.PROOF_LENGTH;

    public static final int HELLO_NODE_OFFSET = 8;
    public static final int HELLO_TARGET_NODE_OFFSET = 12;
    public static final int HELLO_INCARNATION_OFFSET = 16;
    public static final int HELLO_TARGET_INCARNATION_OFFSET = 24;
    public static final int HELLO_NONCE_OFFSET = 32;
    public static final int HELLO_LENGTH = HELLO_NONCE_OFFSET + NONCE_LENGTH;

    public static final int CHALLENGE_NODE_OFFSET = 8;
    public static final int CHALLENGE_INCARNATION_OFFSET = 16;
    public static final int CHALLENGE_NONCE_OFFSET = 24;
    public static final int CHALLENGE_PROOF_OFFSET = CHALLENGE_NONCE_OFFSET + NONCE_LENGTH;
    public static final int CHALLENGE_LENGTH = CHALLENGE_PROOF_OFFSET + PROOF_LENGTH;

    public static final int AUTH_PROOF_OFFSET = 8;
    public static final int AUTH_LENGTH = AUTH_PROOF_OFFSET + PROOF_LENGTH;

    public static final int WELCOME_PORT_OFFSET = 8;
    public static final int WELCOME_LENGTH = 16;

    public static final int REFUSAL_CODE_OFFSET = 8;
    public static final int REFUSAL_REASONS_OFFSET = 9;
    public static final int REFUSAL_DETAIL_OFFSET = 16;
    public static final int REFUSAL_TEXT_OFFSET = 24;
    /** Reason bit of a REFUSAL: the target fenced the initiator; reconnecting cannot help. */
    public static final int REASON_FENCED = 1;
    /** Longest refusal text carried (UTF-8 bytes); longer ones are cut. */
    public static final int MAX_REFUSAL_TEXT = 1024;
    /** Bytes of the longest record (a REFUSAL with the longest text). */
    public static final int MAX_LENGTH = REFUSAL_TEXT_OFFSET + MAX_REFUSAL_TEXT;

    /** Who a record built on this node is from, in the errors of its encoder. */
    private static final String THIS_NODE = "this node (encoding a handshake record)";

    private HandshakeRecord() {
    }

    /** One decoded (or to be encoded) handshake record. */
    public sealed interface Record permits Hello, Challenge, Auth, Welcome, Refusal {
        /** Its kind: {@link #KIND_HELLO} ... {@link #KIND_REFUSAL}. */
        int kind();

        /** Its bytes, as the layout above. */
        byte[] encode();
    }

    /**
     * The initiator's opening: who it is, whom it means, its nonce.
     *
     * @throws ProtocolException when the nonce is not {@link #NONCE_LENGTH} bytes
     */
    public record Hello(int node, long incarnation, int targetNode, long targetIncarnation, byte[] nonce)
            implements Record {
        public Hello {
            checkLength("HELLO", "nonce", nonce, NONCE_LENGTH);
        }

        @Override
        public int kind() {
            return KIND_HELLO;
        }

        @Override
        public byte[] encode() {
            ByteBuffer b = header(KIND_HELLO, HELLO_LENGTH);
            b.putInt(HELLO_NODE_OFFSET, node).putInt(HELLO_TARGET_NODE_OFFSET, targetNode)
                    .putLong(HELLO_INCARNATION_OFFSET, incarnation)
                    .putLong(HELLO_TARGET_INCARNATION_OFFSET, targetIncarnation)
                    .put(HELLO_NONCE_OFFSET, nonce);
            return b.array();
        }
    }

    /**
     * The target's answer to a HELLO it serves: who it is, its nonce, its proof.
     *
     * @throws ProtocolException when the nonce or proof has the wrong length
     */
    public record Challenge(int node, long incarnation, byte[] nonce, byte[] proof) implements Record {
        public Challenge {
            checkLength("CHALLENGE", "nonce", nonce, NONCE_LENGTH);
            checkLength("CHALLENGE", "proof", proof, PROOF_LENGTH);
        }

        @Override
        public int kind() {
            return KIND_CHALLENGE;
        }

        @Override
        public byte[] encode() {
            ByteBuffer b = header(KIND_CHALLENGE, CHALLENGE_LENGTH);
            b.putInt(CHALLENGE_NODE_OFFSET, node).putLong(CHALLENGE_INCARNATION_OFFSET, incarnation)
                    .put(CHALLENGE_NONCE_OFFSET, nonce).put(CHALLENGE_PROOF_OFFSET, proof);
            return b.array();
        }
    }

    /**
     * The initiator's proof.
     *
     * @throws ProtocolException when the proof has the wrong length
     */
    public record Auth(byte[] proof) implements Record {
        public Auth {
            checkLength("AUTH", "proof", proof, PROOF_LENGTH);
        }

        @Override
        public int kind() {
            return KIND_AUTH;
        }

        @Override
        public byte[] encode() {
            return header(KIND_AUTH, AUTH_LENGTH).put(AUTH_PROOF_OFFSET, proof).array();
        }
    }

    /**
     * The target admitted the initiator.
     *
     * @param port a second port of the target for further connections (tcp's lane server); 0 for none
     * @throws ProtocolException when the port is outside 0..65535
     */
    public record Welcome(int port) implements Record {
        public Welcome {
            if (port < 0 || port > 0xffff) {
                throw new ProtocolException(THIS_NODE, "WELCOME port=" + port + ", allowed=0..65535");
            }
        }

        @Override
        public int kind() {
            return KIND_WELCOME;
        }

        @Override
        public byte[] encode() {
            return header(KIND_WELCOME, WELCOME_LENGTH).putInt(WELCOME_PORT_OFFSET, port).array();
        }
    }

    /**
     * The target refused the initiator: why, as a code, reason bits, one number and a text
     * (cut at {@link #MAX_REFUSAL_TEXT} UTF-8 bytes when encoded).
     *
     * @param code    the category (AUTHENTICATION, STALE_INCARNATION, NODE_UNAVAILABLE, ...)
     * @param reasons {@link #REASON_FENCED} or 0
     * @param detail  STALE_INCARNATION: the target's incarnation; otherwise 0
     * @param text    what was refused and why (null: empty)
     * @throws ProtocolException when the code is null or a reason bit is unknown
     */
    public record Refusal(ErrorCode code, int reasons, long detail, String text) implements Record {
        public Refusal {
            if (code == null) {
                throw new ProtocolException(THIS_NODE, "REFUSAL code=null; name the ErrorCode of the refusal");
            }
            if ((reasons & ~REASON_FENCED) != 0) {
                throw new ProtocolException(THIS_NODE, "REFUSAL reasons=0x" + Integer.toHexString(reasons)
                        + ", known=0x" + Integer.toHexString(REASON_FENCED));
            }
            text = text == null ? "" : text;
        }

        /** Whether the target fenced the initiator ({@link #REASON_FENCED}). */
        public boolean fenced() {
            return (reasons & REASON_FENCED) != 0;
        }

        @Override
        public int kind() {
            return KIND_REFUSAL;
        }

        @Override
        public byte[] encode() {
            byte[] t = text.getBytes(StandardCharsets.UTF_8);
            int n = Math.min(t.length, MAX_REFUSAL_TEXT);
            ByteBuffer b = header(KIND_REFUSAL, REFUSAL_TEXT_OFFSET + n);
            b.put(REFUSAL_CODE_OFFSET, code.wire()).put(REFUSAL_REASONS_OFFSET, (byte) reasons)
                    .putLong(REFUSAL_DETAIL_OFFSET, detail).put(REFUSAL_TEXT_OFFSET, t, 0, n);
            return b.array();
        }
    }

    /** The name of a kind, for errors and logs ({@code kind=N} for an unknown one). */
    public static String kindName(int kind) {
        return switch (kind) {
            case KIND_HELLO -> "HELLO";
            case KIND_CHALLENGE -> "CHALLENGE";
            case KIND_AUTH -> "AUTH";
            case KIND_WELCOME -> "WELCOME";
            case KIND_REFUSAL -> "REFUSAL";
            default -> "kind=" + kind;
        };
    }

    /** Bytes of a record of {@code kind}: its exact length, or for a REFUSAL its fixed part; -1 for an unknown kind. */
    public static int fixedLength(int kind) {
        return switch (kind) {
            case KIND_HELLO -> HELLO_LENGTH;
            case KIND_CHALLENGE -> CHALLENGE_LENGTH;
            case KIND_AUTH -> AUTH_LENGTH;
            case KIND_WELCOME -> WELCOME_LENGTH;
            case KIND_REFUSAL -> REFUSAL_TEXT_OFFSET;
            default -> -1;
        };
    }

    /** {@link #decode(byte[], int, int, String)} of a whole array. */
    public static Record decode(byte[] record, String peer) {
        return decode(record, 0, record.length, peer);
    }

    /**
     * Decodes the record of {@code length} bytes at {@code offset} of {@code bytes}, received
     * from {@code peer}.
     *
     * @throws ProtocolException naming {@code peer} and what is wrong when the record is
     *         malformed or of another {@link #VERSION}
     */
    public static Record decode(byte[] bytes, int offset, int length, String peer) {
        if (length < HEADER_LENGTH) {
            throw malformed(peer, "a record of " + length + " bytes is shorter than the " + HEADER_LENGTH
                    + "-byte header");
        }
        ByteBuffer b = ByteBuffer.wrap(bytes, offset, length).slice().order(ByteOrder.LITTLE_ENDIAN);
        int kind = b.get(KIND_OFFSET) & 0xff;
        int version = b.get(VERSION_OFFSET) & 0xff;
        int magic = b.getInt(MAGIC_OFFSET);
        if (magic != MAGIC) {
            throw malformed(peer, "magic=0x" + Integer.toHexString(magic) + ", expected=0x"
                    + Integer.toHexString(MAGIC) + " ('MBHS'): not a Membus handshake");
        }
        if (version != VERSION) {
            throw new ProtocolException(peer, "handshake record version=" + version + ", supported=" + VERSION
                    + ": mixed-version clusters are not supported; run one Membus version on every node");
        }
        reservedZero(b, peer, kind, 2, 2);
        int fixed = fixedLength(kind);
        if (fixed < 0) {
            throw malformed(peer, "kind=" + kind + " (unknown; known: 1 HELLO .. 5 REFUSAL)");
        }
        int max = kind == KIND_REFUSAL ? MAX_LENGTH : fixed;
        if (length < fixed || length > max) {
            throw malformed(peer, kindName(kind) + " of " + length + " bytes, expected "
                    + (fixed == max ? String.valueOf(fixed) : fixed + ".." + max));
        }
        return switch (kind) {
            case KIND_HELLO -> new Hello(b.getInt(HELLO_NODE_OFFSET), b.getLong(HELLO_INCARNATION_OFFSET),
                    b.getInt(HELLO_TARGET_NODE_OFFSET), b.getLong(HELLO_TARGET_INCARNATION_OFFSET),
                    bytes(b, HELLO_NONCE_OFFSET, NONCE_LENGTH));
            case KIND_CHALLENGE -> {
                reservedZero(b, peer, kind, CHALLENGE_NODE_OFFSET + 4, 4);
                yield new Challenge(b.getInt(CHALLENGE_NODE_OFFSET), b.getLong(CHALLENGE_INCARNATION_OFFSET),
                        bytes(b, CHALLENGE_NONCE_OFFSET, NONCE_LENGTH), bytes(b, CHALLENGE_PROOF_OFFSET, PROOF_LENGTH));
            }
            case KIND_AUTH -> new Auth(bytes(b, AUTH_PROOF_OFFSET, PROOF_LENGTH));
            case KIND_WELCOME -> {
                reservedZero(b, peer, kind, WELCOME_PORT_OFFSET + 4, 4);
                int port = b.getInt(WELCOME_PORT_OFFSET);
                if (port < 0 || port > 0xffff) {
                    throw malformed(peer, "WELCOME port=" + port + ", allowed=0..65535");
                }
                yield new Welcome(port);
            }
            default -> {
                reservedZero(b, peer, kind, REFUSAL_REASONS_OFFSET + 1, 6);
                int reasons = b.get(REFUSAL_REASONS_OFFSET) & 0xff;
                if ((reasons & ~REASON_FENCED) != 0) {
                    throw malformed(peer, "REFUSAL reasons=0x" + Integer.toHexString(reasons) + ", known=0x"
                            + Integer.toHexString(REASON_FENCED));
                }
                yield new Refusal(ErrorCode.fromWire(b.get(REFUSAL_CODE_OFFSET) & 0xff), reasons,
                        b.getLong(REFUSAL_DETAIL_OFFSET), new String(bytes(b, REFUSAL_TEXT_OFFSET,
                        length - REFUSAL_TEXT_OFFSET), StandardCharsets.UTF_8));
            }
        };
    }

    /**
     * Decodes a record that must be of type {@code expected} (or a REFUSAL, when
     * {@code refusalAllowed}: the caller then checks which it got).
     *
     * @throws ProtocolException when it is malformed, of another version, or of another kind
     */
    public static Record expect(byte[] record, String peer, int expectedKind, boolean refusalAllowed) {
        Record r = decode(record, peer);
        if (r.kind() != expectedKind && !(refusalAllowed && r.kind() == KIND_REFUSAL)) {
            throw new ProtocolException(peer, "handshake record " + kindName(r.kind()) + " where "
                    + kindName(expectedKind) + (refusalAllowed ? " or REFUSAL" : "") + " was expected");
        }
        return r;
    }

    // ---------------------------------------------------------------- bytes

    private static ByteBuffer header(int kind, int length) {
        ByteBuffer b = ByteBuffer.allocate(length).order(ByteOrder.LITTLE_ENDIAN);
        b.put(KIND_OFFSET, (byte) kind).put(VERSION_OFFSET, (byte) VERSION).putInt(MAGIC_OFFSET, MAGIC);
        return b;
    }

    private static byte[] bytes(ByteBuffer b, int at, int n) {
        byte[] out = new byte[n];
        b.get(at, out);
        return out;
    }

    private static void reservedZero(ByteBuffer b, String peer, int kind, int at, int n) {
        for (int i = at; i < at + n; i++) {
            if (b.get(i) != 0) {
                throw malformed(peer, kindName(kind) + " reserved byte " + i + "=0x"
                        + Integer.toHexString(b.get(i) & 0xff) + ", must be 0");
            }
        }
    }

    private static void checkLength(String kind, String field, byte[] value, int expected) {
        int n = value == null ? -1 : value.length;
        if (n != expected) {
            throw new ProtocolException(THIS_NODE, kind + " " + field + " of " + (value == null ? "null" : n + " bytes")
                    + ", expected " + expected + " bytes");
        }
    }

    private static ProtocolException malformed(String peer, String what) {
        return new ProtocolException(peer, "malformed handshake record: " + what);
    }
}
