package io.membus.bench;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@link PeersTable} reads JMH's JSON results and prints the table and the goals, met or not. */
class PeersTableTest {
    private static String run(String op, int threads, String peer, double mean, double p50, double p99, String unit) {
        return String.format(Locale.ROOT, """
                {"benchmark": "io.membus.bench.peers.PeersBenchmark.%s", "mode": "sample", "threads": %d,
                 "params": {"peer": "%s"},
                 "primaryMetric": {"score": %s, "scoreError": 1.0, "scoreUnit": "%s",
                   "scorePercentiles": {"0.0": 1.0, "50.0": %s, "99.0": %s, "100.0": 999.0}}}""",
                op, threads, peer, mean, unit, p50, p99);
    }

    private static String inFlight(String path, double mean) {
        return String.format(Locale.ROOT, """
                {"benchmark": "io.membus.bench.tcp.TcpSyncBenchmark.inFlight16", "mode": "avgt", "threads": 1,
                 "params": {"path": "%s", "targetIoThreads": "1"},
                 "primaryMetric": {"score": %s, "scoreError": 1.0, "scoreUnit": "us/op"}}""", path, mean);
    }

    @Test
    void ratiosAndGoalsFromTheResults(@TempDir Path dir) throws IOException {
        Path peers = dir.resolve("peers.json");
        Files.writeString(peers, "[" + String.join(",",
                run("get", 1, "membus0", 10, 9, 20, "us/op"),
                run("get", 1, "hazelcast", 20, 18, 40, "us/op"),
                run("get", 1, "redis", 5, 4, 8, "us/op"),
                run("set", 8, "membus1", 100, 50, 400, "us/op"),
                run("set", 8, "hazelcast", 150, 100, 300, "us/op")) + "]");
        Path flight = dir.resolve("in-flight.json");
        Files.writeString(flight, "[" + inFlight("lanes", 3.0) + "," + inFlight("batchingFloor", 2.7) + "]");

        String table = PeersTable.tableOf(List.of(peers, flight));

        // get, 1 thread: Hazelcast's mean over Membus' is 2.00 (medians 2.00), Redis' 0.50 (medians 0.44)
        assertTrue(table.contains("| map get (Long key, 64 B value, uncached) | 1 | 10.0 (p50 9.0, p99 20.0) | — |"
                + " 20.0 (p50 18.0, p99 40.0) | 5.0 (p50 4.0, p99 8.0) | — | 2.00× (p50 2.00×) | — |"
                + " 0.50× (p50 0.44×) | — | — |"), table);
        assertTrue(table.contains("| uncached map get ≥ 1.0× Redis GET | 0.44× ✗ (mean 0.50×) | not measured |"),
                table);
        assertTrue(table.contains("| uncached map get ≥ 1.5× Hazelcast IMap.get | 2.00× ✓ (mean 2.00×) |"), table);
        // put at one backup, 8 threads: the medians say 2.00× Hazelcast (goal 1.2×), the means 1.50×;
        // its p99 is 8× its p50 (goal 4×)
        assertTrue(table.contains("| map put ≥ 1.2× Hazelcast IMap.put (both at one backup) | not measured |"
                + " not measured | not measured | 2.00× ✓ (mean 1.50×) |"), table);
        assertTrue(table.contains("p50 50.0, p99 400 µs: 8.0× ✗"), table);
        // 16 in flight: 2.7 / 3.0 = 0.90, the goal exactly
        assertTrue(table.contains("| lanes | 3.0 | 0.90× |"), table);
        assertTrue(table.contains("batches its replies: lanes 0.90× ✓, pipelined not measured"), table);
    }

    @Test
    void resultsInAnotherUnitAreRefused(@TempDir Path dir) throws IOException {
        Path peers = dir.resolve("peers.json");
        Files.writeString(peers, "[" + run("get", 1, "membus0", 10, 9, 20, "ns/op") + "]");
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> PeersTable.tableOf(List.of(peers)));
        assertTrue(e.getMessage().contains("us/op"), e.getMessage());
    }

    @Test
    void noFileIsABadArgumentNamingTheCommand() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> PeersTable.main(new String[0]));
        assertTrue(e.getMessage().contains("benchmarks.jar peers"), e.getMessage());
    }
}
