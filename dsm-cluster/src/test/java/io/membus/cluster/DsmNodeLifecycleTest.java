package io.membus.cluster;

import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.membus.cluster.TestClusters.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** DsmNode's start and close: a failed start leaves nothing running; close is idempotent from any thread. */
class DsmNodeLifecycleTest {

    /** A one-node cluster over tcp, its own seed, under a cluster name no other test uses. */
    private static String config(String cluster, int id, int port, String extra) {
        return TestClusters.FAST + "membus.node-id = " + id + "\n"
                + "membus.cluster-name = " + cluster + "\n"
                + "membus.host = \"127.0.0.1\"\n"
                + "membus.port = " + port + "\n"
                + "membus.seed-nodes = [\"127.0.0.1:" + port + "\"]\n"
                + "membus.transport = tcp\n"
                + "membus.secret = \"lifecycle-secret\"\n"
                + "membus.transports.tcp.port = \"0\"\n"
                + "membus.segments.count = 2\n"
                + "membus.segments.size = 64KiB\n"
                + extra;
    }

    /** Threads of the node's actor system ({@code <cluster>-...}) or of its tcp transport ({@code membus-tcp-<id>-...}). */
    private static List<String> threadsOf(String cluster, int id) {
        return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .filter(n -> n.startsWith(cluster + "-") || n.startsWith("membus-tcp-" + id + "-")).toList();
    }

    private static boolean portFree(int port) {
        try (ServerSocket s = new ServerSocket(port, 1, InetAddress.getByName("127.0.0.1"))) {
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aStartThatFailsHalfwayLeavesNoActorSystemTransportOrThreadBehind(@TempDir Path dir) throws IOException {
        String cluster = "lifecycle-fail-" + System.nanoTime();
        int id = 41;
        Path notADirectory = Files.writeString(dir.resolve("a-file"), "not a directory");
        int port = TestClusters.freePort();
        // joins, claims the id, starts the tcp transport, then fails exporting a file-backed segment
        DsmException e = assertThrows(DsmException.class, () -> DsmNode.start(NodeConfig.parse(config(cluster, id, port,
                "membus.segments.file-backed = true\nmembus.segments.dir = \"" + notADirectory + "\"\n"))));
        assertTrue(e.getMessage().contains(notADirectory.toString()), e.getMessage());
        await("no thread of the failed node left: " + threadsOf(cluster, id), Duration.ofSeconds(15),
                () -> threadsOf(cluster, id).isEmpty());
        await("the failed node's Pekko port " + port + " is free again", Duration.ofSeconds(10), () -> portFree(port));
        try (var files = Files.list(dir)) {
            assertTrue(files.allMatch(p -> p.equals(notADirectory)), "no segment file was left behind");
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aSecretTheTransportRefusesIsReportedUnderTheKeyTheUserSet() {
        String cluster = "lifecycle-secret-" + System.nanoTime();
        int id = 43;
        int port = TestClusters.freePort();
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> DsmNode.start(NodeConfig.parse(
                config(cluster, id, port, "membus.secret = \"too-short\"\n"))));
        assertEquals("membus.secret", e.key(), e.getMessage());
        assertTrue(e.getMessage().contains("at least 16"), e.getMessage());
        assertFalse(e.getMessage().contains("too-short"), "the secret is never printed: " + e.getMessage());
        await("no thread of the refused node left: " + threadsOf(cluster, id), Duration.ofSeconds(15),
                () -> threadsOf(cluster, id).isEmpty());
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void closeIsIdempotentAndConcurrentClosesBothReturnWhenTheNodeIsGone() {
        String cluster = "lifecycle-close-" + System.nanoTime();
        int id = 42;
        int port = TestClusters.freePort();
        DsmNode node = DsmNode.start(NodeConfig.parse(config(cluster, id, port, "")));
        node.awaitMembers(1, Duration.ofSeconds(10));
        assertTrue(!threadsOf(cluster, id).isEmpty(), "the node runs threads");
        // a user's main returns after close() and the JVM exits, even when Pekko's own stop stalls (Artery's stream
        // shutdown has no deadline in Pekko 1.7: seen on CI as "actor-system-terminate timed out"): no thread the
        // node starts may keep the JVM alive
        List<String> nonDaemon = Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive)
                .filter(t -> !t.isDaemon()).map(Thread::getName)
                .filter(n -> n.startsWith(cluster + "-") || n.startsWith("membus-")).toList();
        assertEquals(List.of(), nonDaemon, "threads of a running node that would keep the JVM alive");
        CompletableFuture<Void> other = CompletableFuture.runAsync(node::close);
        node.close();
        other.join();
        // both calls returned after the shutdown finished: the transport is closed, the system terminated
        assertTrue(((io.membus.core.transport.AbstractTransport) node.transport()).isClosed(), "transport closed when close() returns");
        await("no thread of the closed node left: " + threadsOf(cluster, id), Duration.ofSeconds(15),
                () -> threadsOf(cluster, id).isEmpty());
        node.close();
        await("the closed node's Pekko port " + port + " is free again", Duration.ofSeconds(10), () -> portFree(port));
    }

    /**
     * Issue 24 (8): a thread interrupted while its start waits to join the cluster gets a
     * typed error, leaves nothing running, and its interrupt flag is still set (the join's
     * wait used to turn the interrupt into "joining the cluster failed" and clear the flag).
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aStartInterruptedWhileItWaitsToJoinFailsAndKeepsTheInterrupt() throws Exception {
        String cluster = "lifecycle-interrupt-" + System.nanoTime();
        int id = 47;
        int port = TestClusters.freePort();
        int nobody = TestClusters.freePort(); // a seed nobody runs: the join waits (start-timeout 30 s)
        CompletableFuture<DsmException> failure = new CompletableFuture<>();
        CompletableFuture<Boolean> flagAfter = new CompletableFuture<>();
        Thread starter = new Thread(() -> {
            try {
                DsmNode.start(NodeConfig.parse(config(cluster, id, port,
                        "membus.seed-nodes = [\"127.0.0.1:" + nobody + "\"]\n"))).close();
                failure.complete(null);
            } catch (DsmException e) {
                failure.complete(e);
            } catch (RuntimeException e) {
                failure.completeExceptionally(e);
            }
            flagAfter.complete(Thread.currentThread().isInterrupted());
        }, "interrupted-starter");
        starter.start();
        // interrupt only once the starter waits in the join (an interrupt inside Pekko's own start is Pekko's)
        await("the starter waits to join the cluster", Duration.ofSeconds(30), () -> waitsIn(starter, "join"));
        starter.interrupt();
        DsmException e = failure.get(20, TimeUnit.SECONDS);
        assertTrue(e != null, "an interrupted start fails");
        assertTrue(flagAfter.get(5, TimeUnit.SECONDS), "the interrupt is kept: " + e.getMessage());
        assertTrue(e.getMessage().contains("interrupted"), e.getMessage());
        await("no thread of the interrupted start left: " + threadsOf(cluster, id), Duration.ofSeconds(15),
                () -> threadsOf(cluster, id).isEmpty());
    }

    /** Whether {@code t} is blocked inside DsmNode's method {@code method}. */
    private static boolean waitsIn(Thread t, String method) {
        boolean in = false;
        for (StackTraceElement e : t.getStackTrace()) {
            in |= e.getClassName().equals(DsmNode.class.getName()) && e.getMethodName().equals(method);
        }
        return in && (t.getState() == Thread.State.TIMED_WAITING || t.getState() == Thread.State.WAITING);
    }
}
