package io.membus.core.auth;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Objects;

/**
 * The one peer authentication every networked transport uses (tcp, rdma): a
 * mutual challenge-response under the cluster secret. Each side sends a fresh
 * nonce; each proves it knows the secret with an HMAC-SHA256 over a transcript
 * that names the transport, its own role, both node ids and incarnations and both
 * nonces. The role labels differ, so a proof reflected back to its sender does not
 * verify; the nonces are fresh per connection, so a recorded handshake does not
 * verify on another; the incarnations are inside, so a proof for an earlier
 * incarnation of a node does not open a connection to a later one.
 *
 * <pre>
 *   proof(role) = HMAC-SHA256(secret, "membus-auth/1 " + transport + " " + role
 *                 | initiatorNode int32 | initiatorIncarnation int64
 *                 | targetNode int32    | targetIncarnation int64
 *                 | initiatorNonce[32]  | targetNonce[32])            little-endian
 *
 *   mac(label, a, b, facts...) = HMAC-SHA256(secret, "membus-auth/1 " + transport + " " + label
 *                 | a | b | facts as int64 little-endian)             for frames after the handshake
 * </pre>
 *
 * <p><b>Note:</b> thread-safe: immutable, and a new {@link Mac} per proof (handshakes
 * and control frames are rare).
 */
public final class PeerAuth {
    /** Bytes of each side's nonce. */
    public static final int NONCE_LENGTH = 32;
    /** Bytes of a proof or a MAC (HMAC-SHA256). */
    public static final int PROOF_LENGTH = 32;
    private static final SecureRandom RANDOM = new SecureRandom();

    /** Who proves: the side that opened the connection, or the side that accepted it. */
    public enum Role {
        INITIATOR("initiator"), TARGET("target");

        private final String label;

        Role(String label) {
            this.label = label;
        }
    }

    private final SecretKeySpec key;
    private final String prefix;

    /**
     * @param secret    the cluster secret (at least one byte; transports check its strength)
     * @param transport the transport's name, so a proof of one transport is no proof on another
     */
    public PeerAuth(byte[] secret, String transport) {
        this.key = new SecretKeySpec(Objects.requireNonNull(secret, "secret"), "HmacSHA256");
        this.prefix = "membus-auth/1 " + Objects.requireNonNull(transport, "transport") + " ";
    }

    /** A fresh random nonce of {@link #NONCE_LENGTH} bytes. */
    public static byte[] nonce() {
        byte[] n = new byte[NONCE_LENGTH];
        RANDOM.nextBytes(n);
        return n;
    }

    /** The proof {@code role} sends for this handshake. */
    public byte[] proof(Role role, int initiatorNode, long initiatorIncarnation, int targetNode,
                        long targetIncarnation, byte[] initiatorNonce, byte[] targetNonce) {
        Mac mac = mac(role.label);
        byte[] ids = new byte[24];
        putIntLe(ids, 0, initiatorNode);
        putLongLe(ids, 4, initiatorIncarnation);
        putIntLe(ids, 12, targetNode);
        putLongLe(ids, 16, targetIncarnation);
        mac.update(ids);
        mac.update(initiatorNonce);
        mac.update(targetNonce);
        return mac.doFinal();
    }

    /** A MAC over a control frame of an authenticated session (see the class comment). */
    public byte[] mac(String label, byte[] a, byte[] b, long... facts) {
        Mac mac = mac(label);
        mac.update(a);
        mac.update(b);
        byte[] word = new byte[8];
        for (long f : facts) {
            putLongLe(word, 0, f);
            mac.update(word);
        }
        return mac.doFinal();
    }

    /** Constant-time comparison of a received proof or MAC with the expected one. */
    public static boolean matches(byte[] expected, byte[] received) {
        return MessageDigest.isEqual(expected, received);
    }

    private Mac mac(String label) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(key);
            mac.update((prefix + label).getBytes(StandardCharsets.US_ASCII));
            return mac;
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is not available in this JVM", e);
        }
    }

    private static void putIntLe(byte[] b, int at, int v) {
        for (int i = 0; i < 4; i++) {
            b[at + i] = (byte) (v >>> (8 * i));
        }
    }

    private static void putLongLe(byte[] b, int at, long v) {
        for (int i = 0; i < 8; i++) {
            b[at + i] = (byte) (v >>> (8 * i));
        }
    }
}
