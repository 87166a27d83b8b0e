package io.membus.transport.rdma;

import io.membus.core.error.TransportUnavailableException;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * Checks, before anything else of the {@code rdma} transport runs, that this
 * machine can run it: DiSNI's native library {@code libdisni} loads, and the kernel
 * shows at least one RDMA device with a user-space verbs node and the RDMA CM's
 * user-space device. When anything is
 * missing, {@link #requireAvailable()} throws one
 * {@link TransportUnavailableException} that names everything missing, what to
 * install, and that {@code tcp} works instead.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class RdmaDetection {
    /** The name {@code System.loadLibrary} takes: {@code libdisni.so} on Linux. */
    public static final String LIBRARY = "disni";
    static final Path SYSFS_DEVICES = Path.of("/sys/class/infiniband");
    static final Path UVERBS_DIR = Path.of("/dev/infiniband");

    /**
     * What the probe found.
     *
     * @param libraryError why {@code libdisni} did not load, or {@code null} when it did
     * @param devices      RDMA devices under {@code /sys/class/infiniband}
     * @param uverbs       user-space verbs nodes under {@code /dev/infiniband}
     * @param rdmaCm       whether {@code /dev/infiniband/rdma_cm} (the RDMA CM's user-space device) exists
     */
    public record Probe(String libraryError, List<String> devices, List<String> uverbs, boolean rdmaCm) {
        public boolean available() {
            return libraryError == null && !devices.isEmpty() && !uverbs.isEmpty() && rdmaCm;
        }
    }

    private RdmaDetection() {
    }

    /** Probes this machine. */
    public static Probe probe() {
        return probe(System::loadLibrary, SYSFS_DEVICES, UVERBS_DIR);
    }

    /** Probes with the given loader and directories (tests supply their own). */
    static Probe probe(Consumer<String> loader, Path sysfsDevices, Path uverbsDir) {
        String libraryError = null;
        try {
            loader.accept(LIBRARY);
        } catch (UnsatisfiedLinkError | SecurityException e) {
            libraryError = String.valueOf(e.getMessage());
        }
        return new Probe(libraryError, list(sysfsDevices, ""), list(uverbsDir, "uverbs"),
                Files.exists(uverbsDir.resolve("rdma_cm")));
    }

    private static List<String> list(Path dir, String prefix) {
        List<String> names = new ArrayList<>();
        if (!Files.isDirectory(dir)) {
            return names;
        }
        try (Stream<Path> s = Files.list(dir)) {
            s.map(p -> p.getFileName().toString()).filter(n -> n.startsWith(prefix)).sorted().forEach(names::add);
        } catch (IOException e) {
            // unreadable: reported as "no device" with the directory named in the message
        }
        return names;
    }

    /**
     * @throws TransportUnavailableException when {@link #probe()} finds something missing
     */
    public static void requireAvailable() {
        Probe p = probe();
        if (!p.available()) {
            throw new TransportUnavailableException("rdma", message(p, SYSFS_DEVICES, UVERBS_DIR));
        }
    }

    /** The one message for a failed probe: what is missing, what to install, the alternative. */
    static String message(Probe p, Path sysfsDevices, Path uverbsDir) {
        List<String> missing = new ArrayList<>();
        if (p.libraryError() != null) {
            String path = System.getProperty("java.library.path");
            missing.add("native library libdisni (System.loadLibrary(\"" + LIBRARY + "\") failed: " + p.libraryError()
                    + (p.libraryError().contains(String.valueOf(path)) ? "" : "; java.library.path=" + path) + ")");
        }
        if (p.devices().isEmpty()) {
            missing.add("RDMA device (" + sysfsDevices + " is empty or absent: no InfiniBand/RoCE NIC, or the kernel"
                    + " has no RDMA support: modules ib_core, ib_uverbs, rdma_ucm)");
        } else if (p.uverbs().isEmpty()) {
            missing.add("user-space verbs device (devices " + p.devices() + " found but no " + uverbsDir
                    + "/uverbs*: load the ib_uverbs module and check its permissions)");
        }
        if (!p.devices().isEmpty() && !p.rdmaCm()) {
            missing.add("RDMA CM device (no " + uverbsDir.resolve("rdma_cm") + ": load the rdma_ucm module"
                    + " (modprobe rdma_ucm) and check its permissions; connections are set up through the RDMA CM)");
        }
        return "missing=[" + String.join("; ", missing) + "]"
                + "; to run rdma: install rdma-core (Debian/Ubuntu: apt-get install rdma-core ibverbs-providers"
                + " libibverbs-dev librdmacm-dev), build libdisni from DiSNI 2.1's source (github.com/zrlio/disni,"
                + " tag v2.1: cd libdisni && ./autoprepare.sh && ./configure --with-jdk=$JAVA_HOME && make install)"
                + " and start the JVM with -Djava.library.path=<directory of libdisni.so> (or put that directory on"
                + " LD_LIBRARY_PATH; see docs/rdma-transport.md)"
                + "; or use transport = tcp, which runs on any network without native libraries";
    }
}
