package io.membus.cluster;

import io.membus.core.Access;
import io.membus.core.error.DsmConfigException;
import io.membus.core.replication.ReplicationConfig;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class NodeConfigTest {

    private static DsmConfigException bad(String hocon) {
        return assertThrows(DsmConfigException.class, () -> NodeConfig.parse(hocon));
    }

    @org.junit.jupiter.api.io.TempDir
    Path home;

    @Test
    void defaultsComeFromReferenceConf() throws Exception {
        Path secretFile = home.resolve(".membus/cluster-secret");
        NodeConfig c = NodeConfig.parse("membus.node-id = 7\nmembus.secret-file = \"" + secretFile + "\"");
        assertEquals(7, c.nodeId());
        assertEquals("membus", c.clusterName());
        assertEquals("127.0.0.1", c.host());
        assertEquals(2551, c.port());
        assertEquals(List.of(), c.seedNodes());
        assertEquals("tcp", c.transport());
        assertEquals(Duration.ofSeconds(5), c.operationTimeout());
        assertEquals(1, c.segmentCount());
        assertEquals(64L << 20, c.segmentSize());
        assertEquals(Access.ALL, c.segmentAccess());
        assertFalse(c.fileBacked());
        assertEquals(Duration.ofSeconds(7), c.stableAfter());
        assertFalse(c.metricsJmx(), "no JMX export unless membus.metrics.jmx = true");
        assertFalse(c.prometheusEnabled(), "no scrape endpoint unless membus.metrics.prometheus.enabled = true");
        assertTrue(NodeConfig.parse("membus.node-id = 7\nmembus.secret-file = \"" + secretFile
                + "\"\nmembus.metrics.jmx = true").metricsJmx());
        String secret = Files.readString(secretFile).strip();
        assertEquals(Map.of("tcp", Map.of("host", "127.0.0.1", "secret", secret)), c.transports().root().unwrapped(),
                "no secret set: the secret file's (made on first use) is the transport's");
        assertEquals("membus.secret-file", c.keyOfTransportSetting("membus.transports.tcp.secret"));
        assertTrue(c.authenticate());
        assertEquals(NodeConfig.Membership.SECRET_TLS, c.membership(), "membership is authenticated by default");
        assertEquals(Path.of(System.getProperty("user.home"), ".membus", "cluster-secret").toString(),
                com.typesafe.config.ConfigFactory.defaultReference().getString("membus.secret-file"));
        assertEquals(0, c.transportSettings().getInt("tcp.port", 0, 65535), "tcp's reference.conf supplies the rest");
    }

    @Test
    void secretAndHostGoToTheTransportUnlessItsPropertiesSetThem() {
        NodeConfig c = NodeConfig.parse("""
                membus { node-id = 1, transport = tcp, secret = "0123456789abcdef0123", host = "10.0.0.5"
                  transports.tcp { port = 0 } }
                """);
        assertEquals(Map.of("tcp", Map.of("port", 0, "secret", "0123456789abcdef0123", "host", "10.0.0.5")),
                c.transports().root().unwrapped());
        assertFalse(c.toString().contains("0123456789abcdef"), "the secret is never printed: " + c);
        NodeConfig own = NodeConfig.parse("""
                membus { node-id = 1, transport = tcp, secret = "0123456789abcdef0123", host = "10.0.0.5"
                  transports.tcp { secret = "ffffffffffffffffffff", host = "0.0.0.0" } }
                """);
        assertEquals("ffffffffffffffffffff", own.transports().getString("tcp.secret"));
        assertEquals("0.0.0.0", own.transports().getString("tcp.host"));
    }

    @Test
    void aTransportPropertyIsTracedToTheKeyTheUserSetItUnder() {
        NodeConfig c = NodeConfig.parse("""
                membus { node-id = 1, transport = tcp, secret = "0123456789abcdef0123"
                  transports.tcp { port = 0, host = "0.0.0.0" } }
                """);
        assertEquals("membus.secret", c.keyOfTransportSetting("membus.transports.tcp.secret"));
        assertEquals("membus.transports.tcp.host", c.keyOfTransportSetting("membus.transports.tcp.host"));
        assertEquals("membus.transports.tcp.port", c.keyOfTransportSetting("membus.transports.tcp.port"));
        assertEquals("membus.host", NodeConfig.parse("membus.node-id = 1").keyOfTransportSetting("membus.transports.tcp.host"));
    }

    @Test
    void transportSettingsAreCheckedAtParseAndTheOldFlatFormIsRefusedWithTheNewKey() {
        DsmConfigException typo = assertThrows(DsmConfigException.class, () -> NodeConfig.parse(
                "membus { node-id = 1, transports.tcp.prot = 7000 }"));
        assertEquals("membus.transports.tcp.prot", typo.key());
        assertTrue(typo.allowed().contains("port") && typo.allowed().contains("io-threads"), typo.getMessage());
        DsmConfigException old = assertThrows(DsmConfigException.class, () -> NodeConfig.parse(
                "membus { node-id = 1, transport-properties { \"tcp.port\" = 0 } }"));
        assertEquals("membus.transport-properties", old.key());
        assertTrue(old.allowed().contains("membus.transports.tcp.port = 0"), old.getMessage());
        DsmConfigException notObject = assertThrows(DsmConfigException.class, () -> NodeConfig.parse(
                "membus { node-id = 1, transports.tcp = 5 }"));
        assertEquals("membus.transports.tcp", notObject.key());
        // a subtree of a transport whose module is not on this class path is left alone
        assertEquals("x", NodeConfig.parse("membus { node-id = 1, transports.carrier-pigeon.coop = x }")
                .transports().getString("carrier-pigeon.coop"));
    }

    @Test
    void heapSegmentsMustBeThisNodesSegmentsAndTheChunkAPowerOfTwo() {
        NodeConfig none = NodeConfig.parse("membus.node-id = 1");
        assertEquals(List.of(), none.heapSegments(), "no heap unless asked for");
        NodeConfig c = NodeConfig.parse("membus { node-id = 1, segments.count = 3, heap { segments = [2, 0],"
                + " chunk-size = 1MiB } }");
        assertEquals(List.of(2, 0), c.heapSegments());
        assertEquals(1 << 20, c.heapChunkSize());
        DsmConfigException outside = bad("membus { node-id = 1, segments.count = 2, heap.segments = [2] }");
        assertTrue(outside.getMessage().contains("membus.heap.segments") && outside.getMessage().contains("0..1"),
                outside.getMessage());
        bad("membus { node-id = 1, segments.count = 2, heap.segments = [1, 1] }");
        bad("membus { node-id = 1, heap.segments = \"zero\" }");
        DsmConfigException chunk = bad("membus { node-id = 1, heap.chunk-size = 5000 }");
        assertTrue(chunk.getMessage().contains("membus.heap.chunk-size") && chunk.getMessage().contains("power of two"),
                chunk.getMessage());
    }

    @Test
    void aMissingNodeIdIsRefusedWithWhatToSet() {
        DsmConfigException e = bad("membus.port = 1");
        assertEquals("membus.node-id", e.key());
        assertTrue(e.getMessage().contains("value=0"), e.getMessage());
        assertTrue(e.getMessage().contains("allowed=an integer 1..65535"), e.getMessage());
    }

    @Test
    void everyBadValueNamesItsKeyAndWhatIsAllowed() {
        String id = "membus.node-id = 1\n";
        assertEquals("membus.node-id", bad("membus.node-id = 70000").key());
        assertEquals("membus.node-id", bad("membus.node-id = three").key());
        DsmConfigException t = bad(id + "membus.transport = carrier-pigeon");
        assertEquals("membus.transport", t.key());
        assertTrue(t.getMessage().contains("value=carrier-pigeon, allowed=one of "), t.getMessage());
        // the allowed names are the transports ServiceLoader finds, not a list in the config code
        for (var p : io.membus.core.transport.Transports.providers()) {
            assertTrue(t.getMessage().contains(p.name()), p.name() + " is listed: " + t.getMessage());
        }
        DsmConfigException s = bad(id + "membus.seed-nodes = [\"localhost\"]");
        assertEquals("membus.seed-nodes", s.key());
        assertTrue(s.getMessage().contains("host:port"), s.getMessage());
        assertEquals("membus.seed-nodes", bad(id + "membus.seed-nodes = [\"h:99999\"]").key());
        // one parser (HostPort): IPv6 only in brackets, a port only in decimal digits
        DsmConfigException v6 = bad(id + "membus.seed-nodes = [\"::1:2551\"]");
        assertEquals("membus.seed-nodes", v6.key());
        assertTrue(v6.getMessage().contains("an IPv6 address goes in brackets"), v6.getMessage());
        assertEquals("membus.seed-nodes", bad(id + "membus.seed-nodes = [\"h:+2551\"]").key());
        assertEquals(List.of("[::1]:2551", "h:2551"), NodeConfig.parse(id + "membus.seed-nodes = [\"[::1]:2551\","
                + " \" h:2551 \"]").seedNodes());
        assertEquals("membus.port", bad(id + "membus.port = -1").key());
        DsmConfigException size = bad(id + "membus.segments.size = 12 bytes");
        assertEquals("membus.segments.size", size.key());
        assertTrue(size.getMessage().contains("a multiple of 8"), size.getMessage());
        assertEquals("membus.segments.size", bad(id + "membus.segments.size = lots").key());
        assertEquals("membus.segments.count", bad(id + "membus.segments.count = 257").key());
        DsmConfigException access = bad(id + "membus.segments.access = rx");
        assertEquals("membus.segments.access", access.key());
        assertTrue(access.getMessage().contains("r (read), w (write), a (atomics)"), access.getMessage());
        assertEquals("membus.segments.file-backed", bad(id + "membus.segments.file-backed = maybe").key());
        DsmConfigException timeout = bad(id + "membus.operation-timeout = soon");
        assertEquals("membus.operation-timeout", timeout.key());
        assertTrue(timeout.getMessage().contains("250ms, 5s or 2m"), timeout.getMessage());
        assertEquals("membus.connect-timeout", bad(id + "membus.connect-timeout = 0s").key());
        assertEquals("membus.failure-detection.threshold", bad(id + "membus.failure-detection.threshold = 0.5").key());
        assertEquals("membus.cluster-name", bad(id + "membus.cluster-name = \"a b\"").key());
    }

    @Test
    void aConfigFileIsReadAndAMissingOneIsNamed(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        Path f = dir.resolve("node.conf");
        Files.writeString(f, "membus { node-id = 4, transport = shm, segments { count = 3, size = 1MiB, file-backed = on } }");
        NodeConfig c = NodeConfig.load(f);
        assertEquals(4, c.nodeId());
        assertEquals(3, c.segmentCount());
        assertEquals(1L << 20, c.segmentSize());
        assertTrue(c.fileBacked());
        DsmConfigException missing = assertThrows(DsmConfigException.class, () -> NodeConfig.load(dir.resolve("nope.conf")));
        assertTrue(missing.getMessage().contains("nope.conf"), missing.getMessage());
        Files.writeString(f, "membus { node-id = ");
        DsmConfigException broken = assertThrows(DsmConfigException.class, () -> NodeConfig.load(f));
        assertTrue(broken.getMessage().contains("valid HOCON"), broken.getMessage());
    }

    @Test
    void aPortInUseIsReportedAsABadPort() throws Exception {
        try (java.net.ServerSocket taken = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            DsmConfigException e = assertThrows(DsmConfigException.class, () -> DsmNode.start(NodeConfig.parse(
                    "membus { node-id = 1, transport = local, port = " + taken.getLocalPort() + " }")));
            assertEquals("membus.port", e.key());
            assertTrue(e.getMessage().contains("value=127.0.0.1:" + taken.getLocalPort()), e.getMessage());
        }
    }

    @Test
    void pekkoSettingsOfTheConfigWinOverMembusTuningButNotOverIdentity() {
        NodeConfig c = NodeConfig.parse("""
                membus { node-id = 9, port = 4000, failure-detection.stable-after = 3s }
                pekko.cluster.split-brain-resolver.stable-after = 11s
                pekko.remote.artery.canonical.port = 1234
                """);
        var p = DsmNode.pekkoConfig(c);
        assertEquals(Duration.ofSeconds(11), p.getDuration("pekko.cluster.split-brain-resolver.stable-after"));
        assertEquals(4000, p.getInt("pekko.remote.artery.canonical.port"));
        assertEquals("keep-majority", p.getString("pekko.cluster.split-brain-resolver.active-strategy"));
        assertEquals(List.of("membus-node", "membus-node-9"), p.getStringList("pekko.cluster.roles"));
        assertEquals("membus", p.getString("pekko.actor.serialization-bindings.\"io.membus.cluster.ClusterMessage\""));
    }

    @Test
    void replicationSettingsAreReadCheckedAndIgnoredByAClient() {
        String base = "membus { node-id = 1, secret = \"0123456789abcdef0123\" }\n";
        ReplicationConfig defaults = NodeConfig.parse(base).replication();
        assertEquals(1, defaults.backups(), "one backup by default, as Hazelcast");
        assertEquals(4096, defaults.windowEffects());
        assertEquals(64L << 20, defaults.windowBytes());
        assertEquals(256 << 10, defaults.chunkBytes());
        assertEquals(0, defaults.rereplicationRate());
        assertEquals(ReplicationConfig.DEFAULT, defaults, "reference.conf and ReplicationConfig.DEFAULT agree");
        assertEquals(Duration.ofSeconds(30), NodeConfig.parse(base).replicationLeaveTimeout());

        NodeConfig set = NodeConfig.parse(base + """
                membus.replication { backups = 2, window-effects = 16, window-bytes = 1MiB, chunk = 64KiB,
                  rereplication-rate = 8MiB }
                """);
        assertEquals(new ReplicationConfig(2, 16, 1L << 20, 64 << 10, 8L << 20),
                set.replication());

        NodeConfig client = NodeConfig.parse(base + "membus { role = client, segments.count = 0,"
                + " replication.backups = 3 }\n");
        assertEquals(0, client.replication().backups(), "a client holds no copies");
        assertEquals(3, client.configuredReplication().backups());

        Map<String, String> refused = Map.of(
                "replication.backups = 4", "membus.replication.backups",
                "replication.backups = -1", "membus.replication.backups",
                "replication.backups = many", "membus.replication.backups",
                "replication.window-effects = 0", "membus.replication.window-effects",
                "replication.window-bytes = lots", "membus.replication.window-bytes",
                "replication.rereplication-rate = -1", "membus.replication.rereplication-rate",
                // read leases are not built (replication.md section 17.6): no key for them, so the unknown-key check
                // names it for a user who sets it
                "replication.lease = 500ms", "membus.replication.lease",
                "replication.chunk = 1000", "membus.replication.chunk",
                "replication.chunk = 1GiB", "membus.replication.chunk",
                "replication.rereplication-rate = fast", "membus.replication.rereplication-rate");
        refused.forEach((line, key) -> {
            DsmConfigException e = bad(base + "membus." + line + "\n");
            assertEquals(key, e.key(), line + ": " + e.getMessage());
        });
        DsmConfigException four = bad(base + "membus.replication.backups = 4\n");
        assertTrue(four.getMessage().contains("value=4") && four.getMessage().contains("0..3"), four.getMessage());
        DsmConfigException unknown = bad(base + "membus.replication.backup = 1\n");
        assertEquals("membus.replication.backup", unknown.key(), unknown.getMessage());
        assertTrue(unknown.getMessage().contains("closest known key: membus.replication.backups"), unknown.getMessage());
    }
}
