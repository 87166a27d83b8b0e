package io.membus.cluster;

import io.membus.alloc.BlockRef;
import io.membus.alloc.Placement;
import io.membus.core.error.DsmConfigException;
import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.membus.cluster.TestClusters.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The node's meters (segments, heap, membership), its Prometheus endpoint and the
 * clients in a status reply: two memory nodes and a client in this JVM (local transport).
 */
@Tag("slow") // in-JVM but over 20 s: the slow tier (failsafe, mvn verify)
class NodeMetersTest {
    private final TestClusters.LocalNodes nodes = new TestClusters.LocalNodes("meters-test",
            "membus.metrics.jmx = false\n");

    @AfterEach
    void closeAll() {
        nodes.close();
    }

    private DsmNode start(int id, int port, int seedPort, String extra) {
        return nodes.start(id, port, seedPort, extra);
    }

    private static double value(MeterRegistry r, String name, String... tags) {
        var search = r.find(name).tags(tags);
        if (search.gauge() != null) {
            return search.gauge().value();
        }
        if (search.functionCounter() != null) {
            return search.functionCounter().count();
        }
        throw new AssertionError("no meter " + name + " " + List.of(tags) + " in " + r.getMeters().stream()
                .map(m -> m.getId().toString()).toList());
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void segmentsHeapMembershipAndClientsAreMeteredScrapedAndShown() throws Exception {
        int seed = TestClusters.freePort();
        String heap = "membus.heap { segments = [1], chunk-size = 4KiB }\n";
        DsmNode one = start(1, seed, seed, heap + "membus.metrics.prometheus { enabled = true, port = 0 }\n");
        DsmNode two = start(2, 0, seed, heap);
        DsmNode client = start(11, 0, seed, "membus.segments.count = 0\n");
        for (DsmNode n : List.of(one, two, client)) {
            n.awaitMembers(3, Duration.ofSeconds(30));
        }
        MeterRegistry r = one.meterRegistry();
        assertEquals(65536, value(r, "membus.segment.size", "segment", "0"));
        assertEquals(65536, value(r, "membus.segment.size", "segment", "1"));
        double chunks = value(r, "membus.heap.chunks", "segment", "1", "state", "total");
        assertTrue(chunks > 0, "chunks " + chunks + " " + one.allocator().localUsage(1));
        double freeBefore = value(r, "membus.heap.chunks", "segment", "1", "state", "free");
        double claimedBefore = value(r, "membus.heap.claimed", "segment", "1");
        // node 2 claims three chunks of node 1's heap for one large object
        BlockRef large = two.allocator().allocate(3 * 4096, Placement.node(1));
        Thread.sleep(NodeMeters.HEAP_READING_NANOS / 1_000_000 + 100); // past the reading's lifetime
        var truth = one.allocator().localUsage(1);
        double freeAfter = value(r, "membus.heap.chunks", "segment", "1", "state", "free");
        assertEquals(truth.freeChunks(), freeAfter, truth.toString());
        assertTrue(freeAfter <= freeBefore - 3, "three chunks or more claimed: " + truth);
        assertEquals(claimedBefore + (freeBefore - freeAfter) * 4096, value(r, "membus.heap.claimed", "segment", "1"));
        assertEquals(truth.largeChunks(), value(r, "membus.heap.chunks", "segment", "1", "state", "large"));
        assertTrue(truth.chunksByOwner().getOrDefault(2, 0) >= 3, truth.toString());

        await("node 1 counts two members and a client", Duration.ofSeconds(10),
                () -> value(r, "membus.members", "role", "member") == 2
                        && value(r, "membus.members", "role", "client") == 1);
        assertTrue(value(r, "membus.membership.changes", "event", "up") >= 2, "up events");
        assertEquals(0, value(r, "membus.members.unreachable"));

        // the scrape endpoint answers the same meters in Prometheus' text format
        var address = one.prometheusAddress();
        assertEquals("127.0.0.1", address.getAddress().getHostAddress());
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
        HttpResponse<String> scrape = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:"
                + address.getPort() + "/metrics")).timeout(Duration.ofSeconds(10)).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, scrape.statusCode(), scrape.body());
        assertTrue(scrape.headers().firstValue("Content-Type").orElse("").startsWith("text/plain"), scrape.headers()
                .toString());
        String body = scrape.body();
        for (String line : List.of("membus_members{role=\"client\"} 1.0", "membus_members{role=\"member\"} 2.0",
                "membus_segment_size_bytes{segment=\"0\"} 65536.0",
                "membus_heap_claimed_bytes{segment=\"1\"} " + (claimedBefore + (freeBefore - freeAfter) * 4096))) {
            assertTrue(body.lines().anyMatch(l -> l.equals(line)), "no line " + line + " in\n" + body);
        }
        assertTrue(body.contains("membus_membership_changes_total{event=\"up\"}"), body);
        HttpResponse<String> other = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:"
                + address.getPort() + "/other")).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(404, other.statusCode());
        assertNull(two.prometheusAddress(), "off by default");

        // membus status shows the client, with its role
        ClusterMessage.StatusReply reply = ClusterStatus.query("127.0.0.1:" + seed, "test", "127.0.0.1",
                Duration.ofSeconds(10), one.config()); // with the cluster's credentials, as membus status --config
        assertEquals(List.of("client"), reply.members().stream().filter(m -> m.nodeId() == 11)
                .map(ClusterMessage.MemberRow::role).toList(), reply.members().toString());
        assertEquals(2, reply.members().stream().filter(m -> m.role().equals("member")).count(),
                reply.members().toString());
        two.allocator().free(large);

        // the client leaves: counted as removed, and no longer a live client
        client.close();
        await("node 1 saw the client leave", Duration.ofSeconds(20),
                () -> value(r, "membus.members", "role", "client") == 0
                        && value(r, "membus.membership.changes", "event", "removed") >= 1);

        // closed with the node: the port is free again
        int port = address.getPort();
        one.close();
        try (java.net.ServerSocket s = new java.net.ServerSocket(port, 1,
                java.net.InetAddress.getByName("127.0.0.1"))) {
            assertEquals(port, s.getLocalPort());
        }
    }

    @Test
    void badPrometheusSettingsAreRefusedWithTheKey() throws Exception {
        var port = assertThrows(DsmConfigException.class, () -> NodeConfig.parse(TestClusters.config(1, 0, 2551,
                "local", "membus.metrics.prometheus.port = 70000\n")));
        assertTrue(port.getMessage().contains("membus.metrics.prometheus.port"), port.getMessage());
        var enabled = assertThrows(DsmConfigException.class, () -> NodeConfig.parse(TestClusters.config(1, 0, 2551,
                "local", "membus.metrics.prometheus.enabled = maybe\n")));
        assertTrue(enabled.getMessage().contains("membus.metrics.prometheus.enabled"), enabled.getMessage());
        var host = assertThrows(DsmConfigException.class, () -> NodeConfig.parse(TestClusters.config(1, 0, 2551,
                "local", "membus.metrics.prometheus.host = \"\"\n")));
        assertTrue(host.getMessage().contains("membus.metrics.prometheus.host"), host.getMessage());
        NodeConfig defaults = NodeConfig.parse(TestClusters.config(1, 0, 2551, "local", ""));
        assertEquals(false, defaults.prometheusEnabled());
        assertEquals(9404, defaults.prometheusPort());
        assertEquals("127.0.0.1", defaults.prometheusHost());
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aTakenScrapePortFailsTheStartNamingTheKey() throws Exception {
        try (java.net.ServerSocket taken = new java.net.ServerSocket(0, 1,
                java.net.InetAddress.getByName("127.0.0.1"))) {
            int seed = TestClusters.freePort();
            var e = assertThrows(DsmConfigException.class, () -> start(1, seed, seed,
                    "membus.metrics.prometheus { enabled = true, port = " + taken.getLocalPort() + " }\n"));
            assertTrue(e.getMessage().contains("membus.metrics.prometheus.port"), e.getMessage());
            assertTrue(e.getMessage().contains(Integer.toString(taken.getLocalPort())), e.getMessage());
        }
    }
}
