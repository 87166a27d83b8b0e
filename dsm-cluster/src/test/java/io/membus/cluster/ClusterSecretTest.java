package io.membus.cluster;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyPairGenerator;
import java.security.spec.ECGenParameterSpec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The secret file (made on first use, private, refused when others can read it) and the certificates made from it. */
class ClusterSecretTest {
    @TempDir
    Path dir;

    @Test
    void aMissingSecretFileIsCreatedPrivateAndThenReadBack() throws Exception {
        Path file = dir.resolve("home/.membus/cluster-secret");
        ClusterSecret made = ClusterSecret.resolve("", file.toString());
        assertEquals(file.toString(), made.source());
        assertEquals(64, made.value().length(), "32 random bytes as hex");
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file.getParent())));
        try (var files = Files.list(file.getParent())) {
            assertEquals(1, files.count(), "nothing but the file is left in its directory");
        }
        // another JVM (no cache: a path of its own pointing at the same file) reads the same secret
        Path link = dir.resolve("other");
        Files.createSymbolicLink(link, file.getParent());
        assertEquals(made.value(), ClusterSecret.resolve("", link.resolve("cluster-secret").toString()).value());
        assertTrue(made.toString().indexOf(made.value()) < 0, "never printed: " + made);
    }

    @Test
    void aSecretFileOthersCanReadIsRefusedWithTheChmodToRun() throws Exception {
        Path file = dir.resolve("shared-secret");
        Files.writeString(file, "0123456789abcdef0123456789abcdef\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> ClusterSecret.resolve("", file.toString()));
        assertEquals("membus.secret-file", e.key());
        assertTrue(e.getMessage().contains("chmod 600 " + file), e.getMessage());
        assertFalse(e.getMessage().contains("0123456789abcdef"), "the secret is never printed: " + e.getMessage());
    }

    @Test
    void aShortSecretIsRefusedWithoutPrintingIt() throws Exception {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> ClusterSecret.resolve("hunter2", ""));
        assertEquals("membus.secret", e.key());
        assertFalse(e.getMessage().contains("hunter2"), e.getMessage());
        Path file = dir.resolve("short");
        Files.writeString(file, "abc\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
        assertEquals("membus.secret-file", assertThrows(DsmConfigException.class,
                () -> ClusterSecret.resolve("", file.toString())).key());
        assertEquals("membus.secret", ClusterSecret.resolve("0123456789abcdef", "").source(), "the file is not needed");
    }

    @Test
    void aCertificateIsAcceptedByEveryHolderOfItsSecretAndByNobodyElse() throws Exception {
        ClusterSecret a = ClusterSecret.resolve("cluster-a-secret-0123456789", "");
        ClusterSecret b = ClusterSecret.resolve("cluster-b-secret-0123456789", "");
        MembershipTls.Credentials one = MembershipTls.Credentials.make(a.derive(MembershipTls.LABEL));
        MembershipTls.Credentials two = MembershipTls.Credentials.make(a.derive(MembershipTls.LABEL));
        MembershipTls.Credentials other = MembershipTls.Credentials.make(b.derive(MembershipTls.LABEL));
        assertNotEquals(one.certificate().getPublicKey(), two.certificate().getPublicKey(), "a key pair per JVM");
        assertTrue(two.vouchesFor(one.certificate()) && one.vouchesFor(two.certificate()));
        assertFalse(other.vouchesFor(one.certificate()));
        assertFalse(one.vouchesFor(other.certificate()));
        one.certificate().verify(one.certificate().getPublicKey()); // a well-formed self-signed certificate
        // a stranger who copies a member's name onto a key of its own is refused
        KeyPairGenerator g = KeyPairGenerator.getInstance("EC");
        g.initialize(new ECGenParameterSpec("secp256r1"));
        var forged = MembershipTls.Certificates.selfSigned(g.generateKeyPair(),
                one.certificate().getSubjectX500Principal().getName().substring(3));
        assertFalse(two.vouchesFor(forged));
    }
}
