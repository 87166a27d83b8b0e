package io.membus.transport.rdma;

import io.membus.core.auth.PeerAuth;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.ProtocolException;
import io.membus.core.transport.message.HandshakeRecord;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;

/**
 * The control channel of the {@code rdma} transport: a TCP connection per
 * queue-pair connection that authenticates the two nodes, carries the target's
 * segment catalog (and every later change of it), and ties the RDMA CM connect
 * request to the authenticated session: the initiator announces the CM address
 * its request will come from, and the target accepts a request only from an
 * announced address (DiSNI 2.1 cannot read a connect request's private data on the
 * passive side, so a token there would never be seen).
 *
 * <pre>
 * initiator -> target  magic "MBRD" | version 3 | HELLO record        (the channel's opening: this framing's own)
 * target -> initiator  CHALLENGE record (node, incarnation, nonceT[32], macT[32]) or REFUSAL record
 *                                 (NODE_UNAVAILABLE: closed, or fenced with the FENCED bit; STALE_INCARNATION with
 *                                 this node's incarnation as detail: another node or incarnation was asked for)
 * initiator -> target  AUTH record (macI[32])
 *   each record: length u16 | one dsm-core HandshakeRecord (little-endian inside, the bytes tcp's handshake
 *   frames carry; HELLO = node, target node, incarnations, nonceI[32])
 * target -> initiator  CATALOG    kind 1 | session[16] | count u16 | count x (index u8 | address | size | remoteKey | flags u8) | mac[32]
 * initiator -> target  ACK        kind 1                       (after every CATALOG; export waits for it)
 * initiator -> target  CM_SOURCE  kind 2 | IPv4[4] | port u16 | mac[32]
 * target -> initiator  READY      kind 2 | mac[32]             (the target now accepts a request from that address)
 * </pre>
 *
 * {@code macT} and {@code macI} are the target's and the initiator's proofs of {@link PeerAuth}, the
 * handshake tcp uses too (both node ids and incarnations, both nonces, the role); every
 * later frame is MACed ({@link PeerAuth#mac}) with the session id and a sequence number or its
 * content, so frames cannot be forged or replayed into another session. Frame integers are
 * big-endian ({@link DataOutputStream}); the MACed transcripts and the handshake records
 * ({@link HandshakeRecord}, whose version and fields its decoder checks) are little-endian.
 *
 * <p><b>Note:</b> stateless helpers; thread-safe.
 */
final class ControlFrames {
    static final int MAGIC = 0x4d425244; // "MBRD"
    /** Version of this framing: 3 carries the handshake as dsm-core {@link HandshakeRecord}s (2 had its own). */
    static final int VERSION = 3;
    /** Handshake nonces: {@link PeerAuth#NONCE_LENGTH}. */
    static final int NONCE_BYTES = PeerAuth.NONCE_LENGTH;
    /** Session ids and catalog tokens. */
    static final int SESSION_BYTES = 16;
    static final int MAC_BYTES = PeerAuth.PROOF_LENGTH;
    /** Target to initiator: a catalog follows. */
    static final int CATALOG = 1;
    /** Target to initiator: the announced CM address is expected. */
    static final int READY = 2;
    /** Initiator to target: a catalog was applied. */
    static final int ACK = 1;
    /** Initiator to target: the CM address the connect request will come from. */
    static final int CM_SOURCE = 2;
    static final int MAX_ENTRIES = 256;

    private ControlFrames() {
    }

    /** A MAC of a control frame (see {@link PeerAuth#mac}): the one authentication tcp uses too. */
    static byte[] mac(byte[] secret, String label, byte[] nonceI, byte[] nonceT, long... facts) {
        return new PeerAuth(secret, "rdma").mac(label, nonceI, nonceT, facts);
    }

    /** The handshake proof of {@code role} (see {@link PeerAuth#proof}). */
    static byte[] proof(byte[] secret, PeerAuth.Role role, int initiatorNode, long initiatorIncarnation,
                        int targetNode, long targetIncarnation, byte[] nonceI, byte[] nonceT) {
        return new PeerAuth(secret, "rdma").proof(role, initiatorNode, initiatorIncarnation, targetNode,
                targetIncarnation, nonceI, nonceT);
    }

    static void checkMac(byte[] expected, byte[] actual, String peer, String what) {
        if (!PeerAuth.matches(expected, actual)) {
            throw new AuthenticationException(peer, "bad " + what + " (HMAC-SHA256 with membus.transports.rdma.secret does not match)");
        }
    }

    /** Writes one handshake record behind its length (not flushed). */
    static void writeRecord(DataOutputStream out, HandshakeRecord.Record record) throws IOException {
        byte[] b = record.encode();
        out.writeShort(b.length);
        out.write(b);
    }

    /**
     * Reads one handshake record of {@code expectedKind} (or a REFUSAL, when
     * {@code refusalAllowed}) from {@code peer}.
     *
     * @throws ProtocolException when it is longer than any record, malformed, of another
     *         version or of another kind
     */
    static HandshakeRecord.Record readRecord(DataInputStream in, String peer, int expectedKind,
                                             boolean refusalAllowed) throws IOException {
        int n = in.readUnsignedShort();
        if (n > HandshakeRecord.MAX_LENGTH) {
            throw new ProtocolException(peer, "handshake record of " + n + " bytes, at most "
                    + HandshakeRecord.MAX_LENGTH);
        }
        return HandshakeRecord.expect(readBytes(in, n), peer, expectedKind, refusalAllowed);
    }

    static byte[] readBytes(DataInputStream in, int n) throws IOException {
        byte[] b = new byte[n];
        in.readFully(b);
        return b;
    }

    static void writeCatalog(DataOutputStream out, byte[] secret, byte[] nonceI, long seq, byte[] token,
                             List<CatalogEntry> entries) throws IOException {
        out.writeByte(CATALOG);
        out.write(token);
        out.writeShort(entries.size());
        long[] facts = new long[2 + entries.size() * 5];
        facts[0] = seq;
        facts[1] = entries.size();
        int f = 2;
        for (CatalogEntry e : entries) {
            out.writeByte(e.index());
            out.writeLong(e.address());
            out.writeLong(e.size());
            out.writeLong(e.remoteKey());
            out.writeByte(e.flags());
            facts[f++] = e.index();
            facts[f++] = e.address();
            facts[f++] = e.size();
            facts[f++] = e.remoteKey();
            facts[f++] = e.flags();
        }
        out.write(mac(secret, "C", nonceI, token, facts));
        out.flush();
    }

    /** Reads and verifies one catalog (after its kind byte); returns the session id in {@code tokenOut}. */
    static List<CatalogEntry> readCatalog(DataInputStream in, byte[] secret, byte[] nonceI, long seq, byte[] tokenOut,
                                          String peer) throws IOException {
        byte[] token = readBytes(in, SESSION_BYTES);
        int count = in.readUnsignedShort();
        if (count > MAX_ENTRIES) {
            throw new ProtocolException(peer, "catalog too long: count=" + count + ", max=" + MAX_ENTRIES);
        }
        List<CatalogEntry> entries = new ArrayList<>(count);
        long[] facts = new long[2 + count * 5];
        facts[0] = seq;
        facts[1] = count;
        int f = 2;
        for (int i = 0; i < count; i++) {
            int index = in.readUnsignedByte();
            long address = in.readLong();
            long size = in.readLong();
            long remoteKey = in.readLong();
            int flags = in.readUnsignedByte();
            if (size <= 0 || (flags & ~7) != 0 || flags == 0) {
                throw new ProtocolException(peer, "bad catalog entry: segment=" + index + ", size=" + size
                        + ", flags=" + flags);
            }
            entries.add(new CatalogEntry(index, address, size, remoteKey, flags));
            facts[f++] = index;
            facts[f++] = address;
            facts[f++] = size;
            facts[f++] = remoteKey;
            facts[f++] = flags;
        }
        checkMac(mac(secret, "C", nonceI, token, facts), readBytes(in, MAC_BYTES), peer, "catalog");
        System.arraycopy(token, 0, tokenOut, 0, SESSION_BYTES);
        return entries;
    }

    static long ipv4(InetSocketAddress a) {
        byte[] b = a.getAddress().getAddress();
        return ((b[0] & 0xffL) << 24) | ((b[1] & 0xffL) << 16) | ((b[2] & 0xffL) << 8) | (b[3] & 0xffL);
    }

    static void writeCmSource(DataOutputStream out, byte[] secret, byte[] nonceI, byte[] session, InetSocketAddress a)
            throws IOException {
        if (!(a.getAddress() instanceof java.net.Inet4Address)) {
            throw new IOException("the RDMA CM source address is not IPv4: " + a);
        }
        out.writeByte(CM_SOURCE);
        out.write(a.getAddress().getAddress());
        out.writeShort(a.getPort());
        out.write(mac(secret, "S", nonceI, session, ipv4(a), a.getPort()));
        out.flush();
    }

    static InetSocketAddress readCmSource(DataInputStream in, byte[] secret, byte[] nonceI, byte[] session, String peer)
            throws IOException {
        byte[] ip = readBytes(in, 4);
        int port = in.readUnsignedShort();
        InetSocketAddress a = new InetSocketAddress(java.net.InetAddress.getByAddress(ip), port);
        checkMac(mac(secret, "S", nonceI, session, ipv4(a), port), readBytes(in, MAC_BYTES), peer, "CM source");
        return a;
    }

    static void writeReady(DataOutputStream out, byte[] secret, byte[] nonceI, byte[] session, InetSocketAddress a)
            throws IOException {
        out.writeByte(READY);
        out.write(mac(secret, "R", nonceI, session, ipv4(a), a.getPort()));
        out.flush();
    }

    static void readReady(DataInputStream in, byte[] secret, byte[] nonceI, byte[] session, InetSocketAddress a,
                          String peer) throws IOException {
        checkMac(mac(secret, "R", nonceI, session, ipv4(a), a.getPort()), readBytes(in, MAC_BYTES), peer, "ready");
    }
}
