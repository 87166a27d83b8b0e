package io.membus.transport.rdma;

import io.membus.core.error.ErrorCode;
import io.membus.core.error.TransportUnavailableException;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

/** The start-up check: one message naming what is missing, what to install, and tcp. */
class RdmaDetectionTest {

    @Test
    void theProviderIsFoundByServiceLoader() {
        assertEquals("rdma", Transports.provider("rdma").name());
    }

    /** Runs for real on a machine without libdisni or an RDMA device (this build machine). */
    @Test
    void startingRdmaHereFailsAtOnceWithOneMessageThatSaysWhatToInstall() {
        assumeFalse(RdmaDetection.probe().available(), "this machine has libdisni and an RDMA device");
        TransportConfig config = TransportConfig.builder(1)
                .property("rdma.host", "127.0.0.1")
                .property("rdma.secret", "0123456789abcdef")
                .build();
        TransportUnavailableException e = assertThrows(TransportUnavailableException.class,
                () -> Transports.create("rdma", config));
        assertEquals(ErrorCode.TRANSPORT_UNAVAILABLE, e.code());
        assertEquals("rdma", e.transport());
        String m = e.getMessage();
        System.out.println("[detection] " + m);
        assertTrue(m.startsWith("transport unavailable: transport=rdma; missing=["), m);
        if (!Files.isDirectory(Path.of("/sys/class/infiniband"))) {
            assertTrue(m.contains("RDMA device (/sys/class/infiniband is empty or absent"), m);
        }
        assertTrue(m.contains("install rdma-core"), m);
        assertTrue(m.contains("libibverbs-dev librdmacm-dev"), m);
        assertTrue(m.contains("build libdisni from DiSNI 2.1's source"), m);
        assertTrue(m.contains("-Djava.library.path="), m);
        assertTrue(m.endsWith("or use transport = tcp, which runs on any network without native libraries"), m);
    }

    /**
     * What a node started with {@code transport = rdma} passes (dsm-cluster's
     * {@code NodeConfig.transports()}: {@code rdma.secret} from membus.secret
     * when set, {@code rdma.host} from membus.host, which may be a host name): the
     * check runs before the settings are parsed, so every such node gets the one
     * detection message, a single line without a cause (the CLI prints only the
     * message), not a parse error or a stack trace from DiSNI.
     */
    @Test
    void aNodeConfiguredWithTransportRdmaGetsOnlyTheDetectionMessage() {
        assumeFalse(RdmaDetection.probe().available(), "this machine has libdisni and an RDMA device");
        List<Map<String, String>> nodeProperties = List.of(
                Map.of("rdma.secret", "a-cluster-secret-0123", "rdma.host", "127.0.0.1"),
                Map.of("rdma.secret", "a-cluster-secret-0123", "rdma.host", "no-such-host.invalid"),
                Map.of("rdma.host", "localhost")); // membus.secret unset: no rdma.secret at all
        for (Map<String, String> p : nodeProperties) {
            TransportConfig config = TransportConfig.builder(3).properties(p).build();
            TransportUnavailableException e = assertThrows(TransportUnavailableException.class,
                    () -> Transports.create("rdma", config), p.toString());
            String m = e.getMessage();
            assertNull(e.getCause(), m);
            assertFalse(m.contains("\n"), m);
            assertTrue(m.startsWith("transport unavailable: transport=rdma; missing=["), m);
            assertTrue(m.contains("install rdma-core") && m.contains("or use transport = tcp"), m);
        }
    }

    @Test
    void aMissingLibraryAndNoDeviceAreBothNamed(@TempDir Path dir) {
        RdmaDetection.Probe p = RdmaDetection.probe(name -> {
            throw new UnsatisfiedLinkError("no " + name + " in java.library.path: /opt/none");
        }, dir.resolve("absent"), dir.resolve("dev"));
        assertFalse(p.available());
        String m = RdmaDetection.message(p, dir.resolve("absent"), dir.resolve("dev"));
        assertTrue(m.contains("native library libdisni (System.loadLibrary(\"disni\") failed: no disni in"
                + " java.library.path: /opt/none"), m);
        assertTrue(m.contains("RDMA device (" + dir.resolve("absent") + " is empty or absent"), m);
    }

    @Test
    void aDeviceWithoutUverbsIsNamedWhenTheLibraryLoads(@TempDir Path dir) throws IOException {
        Path sys = Files.createDirectories(dir.resolve("sys/mlx5_0"));
        Path dev = Files.createDirectories(dir.resolve("dev"));
        RdmaDetection.Probe p = RdmaDetection.probe(name -> { }, sys.getParent(), dev);
        assertEquals(List.of("mlx5_0"), p.devices());
        assertFalse(p.available());
        String m = RdmaDetection.message(p, sys.getParent(), dev);
        assertFalse(m.contains("libdisni ("), "the library loaded: " + m);
        assertTrue(m.contains("user-space verbs device (devices [mlx5_0] found but no " + dev + "/uverbs*"), m);
    }

    @Test
    void aMissingRdmaCmDeviceIsNamedWithTheModuleToLoad(@TempDir Path dir) throws IOException {
        Path sys = Files.createDirectories(dir.resolve("sys/mlx5_0"));
        Path dev = Files.createDirectories(dir.resolve("dev"));
        Files.createFile(dev.resolve("uverbs0")); // ib_uverbs loaded, rdma_ucm not: DiSNI's CM could not open
        RdmaDetection.Probe p = RdmaDetection.probe(name -> { }, sys.getParent(), dev);
        assertFalse(p.available());
        String m = RdmaDetection.message(p, sys.getParent(), dev);
        assertTrue(m.contains("missing=[RDMA CM device (no " + dev + "/rdma_cm: load the rdma_ucm module"), m);
    }

    @Test
    void libraryDeviceAndUverbsPresentIsAvailable(@TempDir Path dir) throws IOException {
        Path sys = Files.createDirectories(dir.resolve("sys"));
        Files.createDirectories(sys.resolve("mlx5_0"));
        Path dev = Files.createDirectories(dir.resolve("dev"));
        Files.createFile(dev.resolve("uverbs0"));
        Files.createFile(dev.resolve("rdma_cm"));
        RdmaDetection.Probe p = RdmaDetection.probe(name -> assertEquals("disni", name), sys, dev);
        assertTrue(p.available());
        assertEquals(List.of("uverbs0"), p.uverbs());
    }
}
