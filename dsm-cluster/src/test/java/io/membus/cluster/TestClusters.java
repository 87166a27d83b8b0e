package io.membus.cluster;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;

/**
 * Configs for test clusters on loopback with Pekko tuned so that formation and
 * downing take seconds, and polling helpers with deadlines.
 */
final class TestClusters {
    private TestClusters() {
    }

    /** Timeouts that make a test cluster form in about a second and down a lost member in a few. */
    static final String FAST = """
            membus.start-timeout = 30s
            membus.operation-timeout = 2s
            membus.connect-timeout = 2s
            membus.failure-detection {
              heartbeat-interval = 200ms
              acceptable-heartbeat-pause = 1200ms
              threshold = 8.0
              stable-after = 2s
              gossip-interval = 200ms
            }
            pekko.cluster.seed-node-timeout = 1s
            pekko.cluster.retry-unsuccessful-join-after = 500ms
            pekko.cluster.failure-detector.expected-response-after = 400ms
            pekko.cluster.split-brain-resolver.down-all-when-unstable = off
            pekko.remote.artery.advanced.test-mode = on
            pekko.coordinated-shutdown.run-by-jvm-shutdown-hook = off
            """;

    static int freePort() {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The cluster secret of test clusters (membership TLS is made from it, as by default). */
    static final String SECRET = "test-cluster-secret-0123456789";

    /**
     * A node's config: id, its port, the seed's port, the transport and its properties (HOCON
     * lines, which may override anything before them, e.g. membus.secret).
     */
    static String config(int id, int port, int seedPort, String transport, String extra) {
        return FAST + "membus.node-id = " + id + "\n"
                + "membus.secret = \"" + SECRET + "\"\n"
                + "membus.cluster-name = test\n"
                + "membus.host = \"127.0.0.1\"\n"
                + "membus.port = " + port + "\n"
                + "membus.seed-nodes = [\"127.0.0.1:" + seedPort + "\"]\n"
                + "membus.transport = " + transport + "\n"
                + "membus.segments.count = 2\n"
                + "membus.segments.size = 64KiB\n"
                + extra;
    }

    /**
     * In-JVM nodes over {@code local} on a fabric of their own, each started with the same
     * extra lines; {@link #close()} closes every node started, in start order (a test's
     * {@code @AfterEach}). Not thread-safe: the test's thread starts and closes them.
     */
    static final class LocalNodes implements AutoCloseable {
        private final List<DsmNode> nodes = new ArrayList<>();
        private final String fabric;
        private final String common;

        /** @param name the fabric's prefix (made unique here); @param common HOCON lines every node gets */
        LocalNodes(String name, String common) {
            this.fabric = name + "-" + System.nanoTime();
            this.common = common;
        }

        /** Starts node {@code id} on {@code port} with seed {@code seedPort}, the common lines, then {@code extra}. */
        DsmNode start(int id, int port, int seedPort, String extra) {
            DsmNode n = DsmNode.start(NodeConfig.parse(config(id, port, seedPort, "local",
                    "membus.transports.local.fabric = \"" + fabric + "\"\n" + common + extra)));
            nodes.add(n);
            return n;
        }

        /**
         * Starts node {@code ids[0]} as the seed on a free port, then the others joining it,
         * node {@code ids[i]} with {@code extras[i]} (none past the end of {@code extras}); returns
         * them in that order once every one of them sees all of them as members (30 s at most).
         */
        List<DsmNode> startConverged(int[] ids, String... extras) {
            int seedPort = freePort();
            List<DsmNode> started = new ArrayList<>();
            for (int i = 0; i < ids.length; i++) {
                started.add(start(ids[i], i == 0 ? seedPort : 0, seedPort, i < extras.length ? extras[i] : ""));
            }
            for (DsmNode n : started) {
                n.awaitMembers(ids.length, Duration.ofSeconds(30));
            }
            return started;
        }

        @Override
        public void close() {
            for (DsmNode n : nodes) {
                n.close();
            }
        }
    }

    /** Polls {@code condition} every 20 ms until it holds; fails with {@code what} at the deadline. */
    static void await(String what, Duration timeout, BooleanSupplier condition) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out after " + timeout.toMillis() + " ms waiting for: " + what);
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted waiting for: " + what);
            }
        }
    }
}
