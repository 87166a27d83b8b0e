package io.membus.bench;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.membus.core.error.DsmConfigException;
import org.openjdk.jmh.results.format.ResultFormatType;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.CommandLineOptions;
import org.openjdk.jmh.runner.options.OptionsBuilder;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Issue 28's peer comparison as one command, and its table.
 *
 * <pre>
 *   java -jar dsm-bench/target/benchmarks.jar peers [JMH options, e.g. -f 1 -wi 2 -w 1s -i 3 -r 2s]
 *   java -cp dsm-bench/target/benchmarks.jar io.membus.bench.PeersTable RESULT.json...
 * </pre>
 *
 * <p>The first runs {@code PeersBenchmark} and {@code PeersCachedBenchmark} at 1 and then 8
 * threads (every peer) and
 * {@code TcpSyncBenchmark.inFlight16} (16 reads in flight on one connection, beside the
 * blocking floor that batches its replies and the one that does not), writes JMH's JSON
 * results to {@code peers-results/} (or the folder of {@code -Dpeers.out}), and prints the
 * markdown table and the goals of issue 28, each met or not. The second prints the same from
 * JSON results JMH wrote before ({@code -rf json}).
 *
 * <p>Cells are the mean time per operation of one thread (µs, JMH SampleTime) with its p50 and
 * p99; a ratio {@code A / B} is B's mean over A's: how many times faster A is (above 1: A wins;
 * at a fixed thread count, the ratio of throughputs), with the ratio of the medians beside it. A
 * goal is judged by the medians where the results have them (SampleTime), else by the means.
 *
 * <p><b>Note:</b> a program entry point; single-threaded.
 */
public final class PeersTable {
    private static final String PEERS = "io.membus.bench.peers.PeersBenchmark";
    private static final String CACHED = "io.membus.bench.peers.PeersCachedBenchmark";
    private static final String IN_FLIGHT = "io.membus.bench.tcp.TcpSyncBenchmark.inFlight16";
    private static final List<String> OPS = List.of("get", "set", "increment", "offerPoll", "cachedGet");
    private static final Map<String, String> OP_NAMES = Map.of(
            "get", "map get (Long key, 64 B value, uncached)",
            "set", "map put / SET (present key, 64 B)",
            "increment", "counter +1",
            "offerPoll", "queue offer + poll (64 B)",
            "cachedGet", "cached map get (Membus leased, Hazelcast near cache)");

    private PeersTable() {
    }

    /** One JMH result: mean, p50 and p99 in µs per operation (per thread). */
    record Figure(double mean, double p50, double p99) {
    }

    /** Results by key: "op|threads|peer" for the peers, "inFlight16|path" for the in-flight reads. */
    private final Map<String, Figure> figures = new LinkedHashMap<>();

    public static void main(String[] args) throws IOException {
        if (args.length == 0 || args[0].startsWith("-")) {
            throw new DsmConfigException("arguments", String.join(" ", args), "JMH JSON result files to tabulate;"
                    + " to run the comparison: java -jar dsm-bench/target/benchmarks.jar peers [JMH options]");
        }
        List<Path> files = new ArrayList<>();
        for (String f : args) {
            files.add(Path.of(f));
        }
        System.out.println(tableOf(files));
    }

    /** The markdown table and goals of these JMH JSON result files. */
    static String tableOf(List<Path> files) throws IOException {
        PeersTable t = new PeersTable();
        for (Path p : files) {
            t.read(p);
        }
        return t.markdown();
    }

    /** Runs the comparison with the user's JMH options (includes and thread counts are this class's). */
    static void run(String[] jmhArgs) throws Exception {
        CommandLineOptions cli = new CommandLineOptions(jmhArgs);
        String[] flags = BenchMain.forkFlags();
        Path out = Path.of(System.getProperty("peers.out", "peers-results"));
        Files.createDirectories(out);
        List<Path> results = new ArrayList<>();
        for (int threads : new int[] {1, 8}) {
            Path json = out.resolve("peers-t" + threads + ".json");
            new Runner(new OptionsBuilder().parent(cli).include(PEERS.replace(".", "\\.") + "\\.")
                    .include(CACHED.replace(".", "\\.") + "\\.")
                    .threads(threads).jvmArgsAppend(flags).resultFormat(ResultFormatType.JSON)
                    .result(json.toString()).build()).run();
            results.add(json);
        }
        Path json = out.resolve("in-flight.json");
        new Runner(new OptionsBuilder().parent(cli).include(IN_FLIGHT.replace(".", "\\.") + "$")
                .param("path", "lanes", "pipelined", "batchingFloor", "floor").threads(1).jvmArgsAppend(flags)
                .resultFormat(ResultFormatType.JSON).result(json.toString()).build()).run();
        results.add(json);
        System.out.println();
        System.out.println("JMH results: " + results);
        System.out.println();
        System.out.println(tableOf(results));
    }

    private void read(Path file) throws IOException {
        JsonArray runs;
        try (Reader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            runs = JsonParser.parseReader(r).getAsJsonArray();
        }
        for (JsonElement e : runs) {
            JsonObject run = e.getAsJsonObject();
            String bench = run.get("benchmark").getAsString();
            JsonObject params = run.has("params") ? run.getAsJsonObject("params") : new JsonObject();
            JsonObject metric = run.getAsJsonObject("primaryMetric");
            String unit = metric.get("scoreUnit").getAsString();
            if (!unit.equals("us/op")) {
                throw new DsmConfigException("scoreUnit of " + bench, unit, "us/op (the benchmarks' own unit: run"
                        + " them without -tu)");
            }
            double mean = metric.get("score").getAsDouble();
            JsonObject pct = metric.has("scorePercentiles") ? metric.getAsJsonObject("scorePercentiles") : null;
            double p50 = pct != null && pct.has("50.0") ? pct.get("50.0").getAsDouble() : Double.NaN;
            double p99 = pct != null && pct.has("99.0") ? pct.get("99.0").getAsDouble() : Double.NaN;
            Figure f = new Figure(mean, p50, p99);
            if (bench.startsWith(PEERS + ".") || bench.startsWith(CACHED + ".")) {
                String op = bench.substring(bench.lastIndexOf('.') + 1);
                figures.put(op + "|" + run.get("threads").getAsInt() + "|" + params.get("peer").getAsString(), f);
            } else if (bench.equals(IN_FLIGHT)) {
                figures.put("inFlight16|" + params.get("path").getAsString(), f);
            }
        }
    }

    private Figure fig(String op, int threads, String peer) {
        return figures.get(op + "|" + threads + "|" + peer);
    }

    private static String cell(Figure f) {
        if (f == null) {
            return "—";
        }
        return Double.isNaN(f.p99()) ? num(f.mean())
                : num(f.mean()) + " (p50 " + num(f.p50()) + ", p99 " + num(f.p99()) + ")";
    }

    private static String num(double v) {
        return v >= 100 ? String.format(Locale.ROOT, "%.0f", v) : String.format(Locale.ROOT, "%.1f", v);
    }

    /** How many times faster {@code a} is than {@code b} (b's mean over a's), or null. */
    private static Double ratio(Figure a, Figure b) {
        return a == null || b == null ? null : b.mean() / a.mean();
    }

    /** The same by the medians (b's p50 over a's), or null when either has none. */
    private static Double ratio50(Figure a, Figure b) {
        return a == null || b == null || Double.isNaN(a.p50()) || Double.isNaN(b.p50()) ? null : b.p50() / a.p50();
    }

    private static String ratioCell(Double r) {
        return r == null ? "—" : String.format(Locale.ROOT, "%.2f×", r);
    }

    /** The ratio of the means, and of the medians in parentheses when both have one. */
    private static String ratioCell(Figure a, Figure b) {
        Double p50 = ratio50(a, b);
        return ratioCell(ratio(a, b)) + (p50 == null ? "" : " (p50 " + ratioCell(p50) + ")");
    }

    String markdown() {
        StringBuilder sb = new StringBuilder();
        sb.append("| operation | threads | Membus 0 backups | Membus 1 backup | Hazelcast (1 backup) | Redis | floor"
                + " | M0 / Hz | M1 / Hz | M0 / Redis | M1 / Redis | M0 / floor |\n");
        sb.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (String op : OPS) {
            for (int t : new int[] {1, 8}) {
                Figure m0 = fig(op, t, "membus0");
                Figure m1 = fig(op, t, "membus1");
                Figure hz = fig(op, t, "hazelcast");
                Figure redis = fig(op, t, "redis");
                Figure floor = fig(op, t, "floor");
                if (m0 == null && m1 == null && hz == null && redis == null && floor == null) {
                    continue;
                }
                sb.append("| ").append(OP_NAMES.get(op)).append(" | ").append(t).append(" | ").append(cell(m0))
                        .append(" | ").append(cell(m1)).append(" | ").append(cell(hz)).append(" | ")
                        .append(cell(redis)).append(" | ").append(cell(floor)).append(" | ")
                        .append(ratioCell(m0, hz)).append(" | ").append(ratioCell(m1, hz)).append(" | ")
                        .append(ratioCell(m0, redis)).append(" | ").append(ratioCell(m1, redis))
                        .append(" | ").append(ratioCell(m0, floor)).append(" |\n");
            }
        }
        Figure lanes = figures.get("inFlight16|lanes");
        Figure pipelined = figures.get("inFlight16|pipelined");
        Figure batching = figures.get("inFlight16|batchingFloor");
        Figure perReply = figures.get("inFlight16|floor");
        if (lanes != null || pipelined != null || batching != null) {
            sb.append("\n16 reads of 64 B in flight on one tcp connection (one thread, µs per read; one memory node in a"
                    + " child process, replication off):\n\n");
            sb.append("| path | µs per read | / floor that batches its replies | / floor with a write per reply |\n");
            sb.append("| --- | ---: | ---: | ---: |\n");
            for (String path : List.of("lanes", "pipelined", "batchingFloor", "floor")) {
                Figure f = figures.get("inFlight16|" + path);
                if (f != null) {
                    sb.append("| ").append(path).append(" | ").append(num(f.mean())).append(" | ")
                            .append(ratioCell(ratio(f, batching))).append(" | ").append(ratioCell(ratio(f, perReply)))
                            .append(" |\n");
                }
            }
        }
        sb.append("\nGoals of issue 28 (Membus' speed over the peer's: the peer's p50 over Membus' p50, which"
                + " decides ✓ met or ✗ not met — on a loaded machine the means carry the scheduler's stalls — with the"
                + " ratio of the means beside it; in parentheses where the goal does not apply to that column):\n\n");
        sb.append("| goal | 0 backups, 1 thread | 0 backups, 8 threads | 1 backup, 1 thread | 1 backup, 8 threads |\n");
        sb.append("| --- | ---: | ---: | ---: | ---: |\n");
        goalRow(sb, "uncached map get ≥ 1.0× Redis GET", "get", "redis", 1.0, true);
        goalRow(sb, "uncached map get ≥ 1.5× Hazelcast IMap.get", "get", "hazelcast", 1.5, true);
        goalRow(sb, "map put ≥ 1.2× Hazelcast IMap.put (both at one backup)", "set", "hazelcast", 1.2, false);
        goalRow(sb, "map put ≥ 0.8× Redis SET", "set", "redis", 0.8, true);
        goalRow(sb, "queue offer + poll ≥ 1.5× Hazelcast IQueue (both at one backup)", "offerPoll", "hazelcast", 1.5,
                false);
        goalRow(sb, "queue offer + poll ≥ 0.6× Redis LPUSH + RPOP", "offerPoll", "redis", 0.6, true);
        goalRow(sb, "counter +1 keeps its lead over Hazelcast (≥ 1.0×)", "increment", "hazelcast", 1.0, true);
        goalRow(sb, "cached get keeps its lead over Hazelcast's near-cache hit (≥ 1.0×)", "cachedGet", "hazelcast",
                1.0, true);
        goalRow(sb, "counter +1 beside Redis INCR (the issue's 1.08× / 0.88×: ≥ 1.0×)", "increment", "redis", 1.0,
                true);
        sb.append("| 8-thread map put p99 ≤ 4× its p50 | | ").append(tailCell(fig("set", 8, "membus0")))
                .append(" | | ").append(tailCell(fig("set", 8, "membus1"))).append(" |\n");
        sb.append("\n16 reads in flight on one connection ≥ 0.9× the floor that batches its replies: lanes ")
                .append(mark(ratio(lanes, batching), 0.9, true)).append(", pipelined ")
                .append(mark(ratio(pipelined, batching), 0.9, true)).append("\n");
        return sb.toString();
    }

    /** A row of the goals' table: {@code op} of Membus over {@code peer}'s, at least {@code atLeast}. */
    private void goalRow(StringBuilder sb, String what, String op, String peer, double atLeast,
            boolean zeroBackupsToo) {
        sb.append("| ").append(what);
        for (String m : List.of("membus0", "membus1")) {
            for (int t : new int[] {1, 8}) {
                Figure a = fig(op, t, m);
                Figure b = fig(op, t, peer);
                Double byMedian = ratio50(a, b);
                Double byMean = ratio(a, b);
                boolean applies = zeroBackupsToo || m.equals("membus1");
                String cell = mark(byMedian != null ? byMedian : byMean, atLeast, applies);
                if (byMedian != null && byMean != null) {
                    String mean = String.format(Locale.ROOT, "mean %.2f×", byMean);
                    cell = applies ? cell + " (" + mean + ")" : cell.substring(0, cell.length() - 1) + ", " + mean + ")";
                }
                sb.append(" | ").append(cell);
            }
        }
        sb.append(" |\n");
    }

    private static String mark(Double value, double atLeast, boolean applies) {
        if (value == null) {
            return "not measured";
        }
        String v = String.format(Locale.ROOT, "%.2f×", value); // by the medians where the results have them
        return !applies ? "(" + v + ")" : v + (value >= atLeast ? " ✓" : " ✗");
    }

    private static String tailCell(Figure f) {
        if (f == null || Double.isNaN(f.p99())) {
            return "not measured";
        }
        double tail = f.p99() / f.p50();
        return "p50 " + num(f.p50()) + ", p99 " + num(f.p99()) + " µs: " + String.format(Locale.ROOT, "%.1f×", tail)
                + (tail <= 4.0 ? " ✓" : " ✗");
    }
}
