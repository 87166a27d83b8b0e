package io.membus.cluster;

import com.typesafe.config.ConfigFactory;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.membus.cluster.TestClusters.config;
import static io.membus.cluster.TestClusters.freePort;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Membership over Pekko Artery TLS, configured from membus.tls, with certificates made by keytool. */
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
class MembershipTlsTest {
    private static final String PASSWORD = "changeit-test";
    private final List<DsmNode> nodes = new ArrayList<>();

    @TempDir
    Path dir;

    @AfterEach
    void close() {
        nodes.forEach(DsmNode::close);
    }

    /** A key store with a self-signed certificate for "alias", and a trust store holding that certificate. */
    private Path[] stores(String alias) throws Exception {
        Path keyStore = dir.resolve(alias + "-key.p12");
        Path cert = dir.resolve(alias + ".cer");
        Path trustStore = dir.resolve(alias + "-trust.p12");
        keytool("-genkeypair", "-alias", alias, "-keyalg", "EC", "-groupname", "secp256r1", "-sigalg", "SHA256withECDSA",
                "-dname", "CN=" + alias, "-validity", "2", "-storetype", "PKCS12", "-keystore", keyStore.toString(),
                "-storepass", PASSWORD, "-keypass", PASSWORD);
        keytool("-exportcert", "-alias", alias, "-keystore", keyStore.toString(), "-storepass", PASSWORD,
                "-file", cert.toString());
        keytool("-importcert", "-noprompt", "-alias", alias, "-file", cert.toString(), "-storetype", "PKCS12",
                "-keystore", trustStore.toString(), "-storepass", PASSWORD);
        return new Path[] {keyStore, trustStore};
    }

    private static void keytool(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "keytool").toString());
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IOException("keytool " + String.join(" ", args) + " failed: " + out);
        }
    }

    private static String tls(Path[] stores) {
        return "membus.tls { enabled = true, key-store = \"" + stores[0] + "\", key-store-password = \"" + PASSWORD
                + "\", trust-store = \"" + stores[1] + "\", trust-store-password = \"" + PASSWORD + "\" }\n";
    }

    private DsmNode start(String hocon) {
        DsmNode n = DsmNode.start(ConfigFactory.parseString(hocon));
        nodes.add(n);
        return n;
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void membersWithTheClusterCertificateFormAClusterAndAStrangerIsKeptOut() throws Exception {
        Path[] cluster = stores("cluster");
        Path[] stranger = stores("stranger");
        int seed = freePort();
        start(config(1, seed, seed, "local", "membus.transports.local.fabric = tls1\n" + tls(cluster)));
        DsmNode two = start(config(2, freePort(), seed, "local",
                "membus.transports.local.fabric = tls1\n" + tls(cluster)));
        assertEquals(2, two.awaitMembers(2, Duration.ofSeconds(30)));

        // membus status speaks TLS with the same certificates ...
        ClusterMessage.StatusReply reply = ClusterStatus.query("127.0.0.1:" + seed, "test", "127.0.0.1",
                Duration.ofSeconds(10), NodeConfig.from(ConfigFactory.parseString(
                        config(9, 0, seed, "local", tls(cluster)))));
        assertEquals(2, reply.members().size());
        // ... and gets no answer without them
        assertThrows(DsmException.class, () -> ClusterStatus.query("127.0.0.1:" + seed, "test", "127.0.0.1",
                Duration.ofSeconds(2)));

        // a node whose certificate the cluster does not trust never joins
        DsmException refused = assertThrows(DsmException.class, () -> start(config(3, freePort(), seed, "local",
                "membus.start-timeout = 4s\nmembus.transports.local.fabric = tls1\n" + tls(stranger))));
        assertTrue(refused.getMessage().contains("could not join"), refused.getMessage());
        assertEquals(2, two.awaitMembers(2, Duration.ofSeconds(5)));
    }

    @Test
    void aTlsConfigWithoutItsStoresIsRefusedAtStartNamingTheKey() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> NodeConfig.from(ConfigFactory.parseString(
                config(1, 2551, 2551, "local", "membus.tls.enabled = true\n"))));
        assertTrue(e.getMessage().contains("membus.tls.key-store"), e.getMessage());
        String text = NodeConfig.from(ConfigFactory.parseString(config(1, 2551, 2551, "local",
                "membus.tls { key-store-password = hunter2, trust-store-password = hunter2 }\n"))).tls().toString();
        assertTrue(!text.contains("hunter2"), "passwords are never printed: " + text);
    }
}
