package io.membus.cluster;

import org.apache.pekko.remote.artery.tcp.SSLEngineProvider;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLSession;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509ExtendedKeyManager;
import javax.net.ssl.X509ExtendedTrustManager;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.MessageDigest;
import java.security.Principal;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Membership (Pekko Artery) over mutual TLS whose credentials come from the cluster
 * secret, so a process without the secret cannot complete a handshake with any member:
 * it can neither join, nor be counted, nor down anyone, nor read the gossip (directory,
 * names).
 *
 * <p>How: each JVM makes one EC P-256 key pair per secret and a self-signed certificate
 * whose subject is {@code CN=membus-<tag>}, where {@code tag = HMAC-SHA256(k,
 * publicKey)} and {@code k = HMAC-SHA256(secret, "membus-membership-tls/1")}. Every
 * member presents its certificate and accepts a peer's only if the tag is right for the
 * certificate's public key; TLS itself proves the peer holds the matching private key.
 * A stranger cannot make a tag for a key of its own without the secret, and cannot use
 * a member's certificate without that member's private key. Nothing is written to disk.
 * (Deriving one key pair from the secret in every JVM would also work, but would rest on
 * how the JDK's key generator draws its random bytes; binding fresh keys with a MAC
 * does not.)
 *
 * <p>A refused peer is remembered ({@link Provider#lastRefusal()}), so a node that cannot
 * join can say "membership handshake refused: wrong membus.secret?".
 *
 * <p><b>Note:</b> thread-safe. {@link Credentials} are immutable and cached per secret
 * (made once per JVM); a {@link Provider} is used by Artery's connection threads at
 * once; its last refusal is an {@link AtomicReference}.
 */
final class MembershipTls {
    private static final Logger LOG = LoggerFactory.getLogger(MembershipTls.class);
    static final String LABEL = "membus-membership-tls/1";
    private static final String CN_PREFIX = "membus-";
    private static final String PROTOCOL = "TLSv1.3";
    private static final Map<String, Credentials> CACHE = new ConcurrentHashMap<>();

    static {
        // TLS 1.3 lets a peer half-close: without this, the JDK never answers a close_notify, Artery's TLS
        // stage waits for one, and a node that stops while others run stalls 10-15 s in its actor-system
        // termination (docs/security.md). Set before this JVM's first TLS engine; a user's own setting wins.
        if (System.getProperty("jdk.tls.acknowledgeCloseNotify") == null) {
            System.setProperty("jdk.tls.acknowledgeCloseNotify", "true");
        }
    }

    private MembershipTls() {
    }

    /** The Artery settings that select TLS (the engine provider comes from {@link #setup}). */
    static Map<String, Object> arterySettings() {
        return Map.of("pekko.remote.artery.transport", "tls-tcp");
    }

    /** An engine provider for one actor system ({@code systemName}, for logs) of the cluster of {@code secret}. */
    static Provider provider(ClusterSecret secret, String systemName) {
        return new Provider(credentials(secret), systemName);
    }

    /** This JVM's credentials for {@code secret}, made on first use. */
    static Credentials credentials(ClusterSecret secret) {
        byte[] k = secret.derive(LABEL);
        return CACHE.computeIfAbsent(HexFormat.of().formatHex(ClusterSecret.hmac(k, "cache".getBytes(
                StandardCharsets.UTF_8))), x -> Credentials.make(k));
    }

    /**
     * A key pair, its certificate (tagged under the secret) and the tag key.
     *
     * <p><b>Note:</b> immutable; thread-safe.
     */
    static final class Credentials {
        private final byte[] tagKey;
        private final PrivateKey key;
        private final X509Certificate certificate;

        private Credentials(byte[] tagKey, PrivateKey key, X509Certificate certificate) {
            this.tagKey = tagKey;
            this.key = key;
            this.certificate = certificate;
        }

        static Credentials make(byte[] tagKey) {
            try {
                KeyPairGenerator g = KeyPairGenerator.getInstance("EC");
                g.initialize(new ECGenParameterSpec("secp256r1"), new SecureRandom());
                KeyPair pair = g.generateKeyPair();
                String cn = CN_PREFIX + HexFormat.of().formatHex(ClusterSecret.hmac(tagKey, pair.getPublic().getEncoded()));
                return new Credentials(tagKey, pair.getPrivate(), Certificates.selfSigned(pair, cn));
            } catch (GeneralSecurityException e) {
                throw new IllegalStateException("EC P-256 and SHA256withECDSA are part of every JDK 17", e);
            }
        }

        X509Certificate certificate() {
            return certificate;
        }

        /** Whether {@code cert} was made by a holder of this secret (its tag is right for its key). */
        boolean vouchesFor(X509Certificate cert) {
            String name = cert.getSubjectX500Principal().getName();
            String expected = "CN=" + CN_PREFIX + HexFormat.of().formatHex(ClusterSecret.hmac(tagKey,
                    cert.getPublicKey().getEncoded()));
            return MessageDigest.isEqual(expected.getBytes(StandardCharsets.US_ASCII),
                    name.getBytes(StandardCharsets.UTF_8));
        }
    }

    /**
     * Artery's engine provider: TLS 1.3, mutual authentication, this JVM's certificate,
     * and a trust manager that accepts exactly the certificates tagged under the secret.
     *
     * <p><b>Note:</b> thread-safe (see the class comment).
     */
    static final class Provider implements SSLEngineProvider {
        private final SSLContext context;
        private final String systemName;
        private final AtomicReference<String> lastRefusal = new AtomicReference<>();
        private final java.util.concurrent.atomic.AtomicBoolean loggedServerRefusal =
                new java.util.concurrent.atomic.AtomicBoolean();

        Provider(Credentials credentials, String systemName) {
            this.systemName = systemName;
            try {
                this.context = SSLContext.getInstance(PROTOCOL);
                context.init(new javax.net.ssl.KeyManager[] {new KeyManager(credentials)},
                        new TrustManager[] {new Trust(credentials, this)}, new SecureRandom());
            } catch (GeneralSecurityException e) {
                throw new IllegalStateException("TLSv1.3 is part of every JDK 17", e);
            }
        }

        /**
         * Why the last peer this node connected to was refused (its certificate was not made
         * with this secret), or {@code null} when none was. Refusals of peers connecting to
         * this node are logged, not kept: a stranger probing must not make a start fail.
         */
        String lastRefusal() {
            return lastRefusal.get();
        }

        void refused(String peer, boolean asClient) {
            String text = "membership handshake refused with " + peer + ": its certificate was not made with this"
                    + " node's cluster secret (wrong membus.secret?)";
            if (asClient) {
                if (lastRefusal.getAndSet(text) == null) {
                    LOG.warn("{} (said once per actor system {})", text, systemName);
                }
            } else if (!loggedServerRefusal.getAndSet(true)) {
                LOG.warn("refused {} at the membership port: its certificate was not made with this node's cluster"
                        + " secret (a node with a wrong membus.secret?; said once per actor system {})", peer, systemName);
            }
        }

        @Override
        public SSLEngine createServerSSLEngine(String hostname, int port) {
            SSLEngine e = context.createSSLEngine();
            e.setUseClientMode(false);
            e.setNeedClientAuth(true);
            e.setEnabledProtocols(new String[] {PROTOCOL});
            return e;
        }

        @Override
        public SSLEngine createClientSSLEngine(String hostname, int port) {
            SSLEngine e = context.createSSLEngine(hostname, port);
            e.setUseClientMode(true);
            e.setEnabledProtocols(new String[] {PROTOCOL});
            return e;
        }

        @Override
        public Option<Throwable> verifyClientSession(String hostname, SSLSession session) {
            return Option.empty(); // the trust manager has checked the certificate's tag
        }

        @Override
        public Option<Throwable> verifyServerSession(String hostname, SSLSession session) {
            return Option.empty();
        }
    }

    /** Presents this JVM's certificate, whatever the peer asks for. */
    private static final class KeyManager extends X509ExtendedKeyManager {
        private static final String ALIAS = "membus";
        private final Credentials c;

        KeyManager(Credentials c) {
            this.c = c;
        }

        @Override
        public String[] getClientAliases(String keyType, Principal[] issuers) {
            return new String[] {ALIAS};
        }

        @Override
        public String chooseClientAlias(String[] keyType, Principal[] issuers, Socket socket) {
            return ALIAS;
        }

        @Override
        public String chooseEngineClientAlias(String[] keyType, Principal[] issuers, SSLEngine engine) {
            return ALIAS;
        }

        @Override
        public String[] getServerAliases(String keyType, Principal[] issuers) {
            return new String[] {ALIAS};
        }

        @Override
        public String chooseServerAlias(String keyType, Principal[] issuers, Socket socket) {
            return "EC".equals(keyType) ? ALIAS : null;
        }

        @Override
        public String chooseEngineServerAlias(String keyType, Principal[] issuers, SSLEngine engine) {
            return "EC".equals(keyType) ? ALIAS : null;
        }

        @Override
        public X509Certificate[] getCertificateChain(String alias) {
            return new X509Certificate[] {c.certificate};
        }

        @Override
        public PrivateKey getPrivateKey(String alias) {
            return c.key;
        }
    }

    /** Accepts a peer certificate only when its tag is right; remembers refusals. */
    private static final class Trust extends X509ExtendedTrustManager {
        private final Credentials c;
        private final Provider provider;

        Trust(Credentials c, Provider provider) {
            this.c = c;
            this.provider = provider;
        }

        private void check(X509Certificate[] chain, String peer, boolean asClient) throws CertificateException {
            if (chain == null || chain.length == 0 || !c.vouchesFor(chain[0])) {
                provider.refused(peer, asClient);
                throw new CertificateException("membership handshake refused: the peer's certificate was not made with"
                        + " this cluster's secret (wrong membus.secret?)");
            }
        }

        private static String peer(SSLEngine e) {
            return e == null || e.getPeerHost() == null ? "a connecting peer" : e.getPeerHost() + ":" + e.getPeerPort();
        }

        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine engine)
                throws CertificateException {
            check(chain, peer(engine), false);
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine engine)
                throws CertificateException {
            check(chain, peer(engine), true);
        }

        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket)
                throws CertificateException {
            check(chain, "a connecting peer", false);
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket)
                throws CertificateException {
            check(chain, "a peer", true);
        }

        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType) throws CertificateException {
            check(chain, "a connecting peer", false);
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType) throws CertificateException {
            check(chain, "a peer", true);
        }

        @Override
        public X509Certificate[] getAcceptedIssuers() {
            return new X509Certificate[0];
        }
    }

    /**
     * A minimal X.509 v3 self-signed certificate in DER (the JDK has no public API to
     * make one): version, serial, ECDSA-SHA256, issuer = subject = one CN, a validity,
     * the key. TLS uses only its key and name here.
     */
    static final class Certificates {
        /** 1.2.840.10045.4.3.2, ecdsa-with-SHA256. */
        private static final byte[] ECDSA_SHA256 = {0x06, 0x08, 0x2a, (byte) 0x86, 0x48, (byte) 0xce, 0x3d, 0x04, 0x03, 0x02};
        /** 2.5.4.3, commonName. */
        private static final byte[] CN = {0x06, 0x03, 0x55, 0x04, 0x03};
        private static final DateTimeFormatter UTC_TIME = DateTimeFormatter.ofPattern("yyMMddHHmmss'Z'");
        private static final DateTimeFormatter GENERALIZED_TIME = DateTimeFormatter.ofPattern("yyyyMMddHHmmss'Z'");

        private Certificates() {
        }

        static X509Certificate selfSigned(KeyPair pair, String commonName) throws GeneralSecurityException {
            byte[] algorithm = der(0x30, ECDSA_SHA256);
            byte[] name = der(0x30, der(0x31, der(0x30, CN, der(0x0c, commonName.getBytes(StandardCharsets.UTF_8)))));
            ZonedDateTime now = ZonedDateTime.now(ZoneOffset.UTC);
            byte[] validity = der(0x30, time(now.minusDays(1)), time(now.plusYears(20)));
            byte[] serial = new byte[16];
            new SecureRandom().nextBytes(serial);
            byte[] tbs = der(0x30,
                    der(0xa0, der(0x02, new byte[] {2})),                 // [0] version v3
                    der(0x02, new BigInteger(1, serial).toByteArray()),  // serial, positive
                    algorithm, name, validity, name,
                    pair.getPublic().getEncoded());                      // SubjectPublicKeyInfo as the JDK encodes it
            Signature s = Signature.getInstance("SHA256withECDSA");
            s.initSign(pair.getPrivate());
            s.update(tbs);
            byte[] signature = s.sign();
            byte[] bits = new byte[signature.length + 1];                // BIT STRING: no unused bits
            System.arraycopy(signature, 0, bits, 1, signature.length);
            byte[] cert = der(0x30, tbs, algorithm, der(0x03, bits));
            return (X509Certificate) CertificateFactory.getInstance("X.509")
                    .generateCertificate(new ByteArrayInputStream(cert));
        }

        private static byte[] time(ZonedDateTime t) {
            return t.getYear() < 2050 ? der(0x17, UTC_TIME.format(t).getBytes(StandardCharsets.US_ASCII))
                    : der(0x18, GENERALIZED_TIME.format(t).getBytes(StandardCharsets.US_ASCII));
        }

        /** One DER element: tag, definite length, the parts concatenated. */
        static byte[] der(int tag, byte[]... parts) {
            ByteArrayOutputStream body = new ByteArrayOutputStream();
            for (byte[] p : parts) {
                body.writeBytes(p);
            }
            int n = body.size();
            ByteArrayOutputStream out = new ByteArrayOutputStream(n + 6);
            out.write(tag);
            if (n < 0x80) {
                out.write(n);
            } else if (n < 0x100) {
                out.write(0x81);
                out.write(n);
            } else if (n < 0x10000) {
                out.write(0x82);
                out.write(n >> 8);
                out.write(n);
            } else {
                throw new IllegalArgumentException("DER element too long for a certificate: " + n);
            }
            out.writeBytes(body.toByteArray());
            return out.toByteArray();
        }
    }
}
