package io.membus.transport.tcp;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;

/**
 * The proofs of the challenge-response handshake: HMAC-SHA256 under the cluster
 * secret over a role label, both node ids and incarnations and both nonces.
 * The labels differ per role, so a proof reflected back to its sender does not
 * verify; the nonces are fresh per connection, so a recorded handshake does not
 * verify on another connection.
 *
 * <pre>
 *   proof(role) = HMAC-SHA256(secret, "membus-tcp/1 " + role
 *                 | clientNode int32 | clientIncarnation int64
 *                 | serverNode int32 | serverIncarnation int64
 *                 | clientNonce[32] | serverNonce[32])          (little-endian)
 * </pre>
 *
 * <p><b>Note:</b> thread-safe: a new {@link Mac} per proof (a handshake is rare).
 */
final class Handshake {
    static final String CLIENT = "client";
    static final String SERVER = "server";
    private static final SecureRandom RANDOM = new SecureRandom();

    private final SecretKeySpec key;

    Handshake(byte[] secret) {
        this.key = new SecretKeySpec(secret, "HmacSHA256");
    }

    static byte[] nonce() {
        byte[] n = new byte[Frame.NONCE_LENGTH];
        RANDOM.nextBytes(n);
        return n;
    }

    byte[] proof(String role, int clientNode, long clientIncarnation, int serverNode, long serverIncarnation,
                 byte[] clientNonce, byte[] serverNonce) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(key);
            mac.update(("membus-tcp/1 " + role).getBytes(StandardCharsets.US_ASCII));
            ByteBuffer ids = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN);
            ids.putInt(clientNode).putLong(clientIncarnation).putInt(serverNode).putLong(serverIncarnation);
            mac.update(ids.array());
            mac.update(clientNonce);
            mac.update(serverNonce);
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is not available in this JVM", e);
        }
    }

    /** Constant-time comparison of a received proof with the expected one. */
    static boolean matches(byte[] expected, byte[] received) {
        return MessageDigest.isEqual(expected, received);
    }
}
