package io.membus.samples.stress;

import io.membus.samples.proc.NodeProcess;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * {@code membus stress}: a Jepsen-style run against a real multi-process cluster on
 * this machine. Node processes run client threads that record every operation's
 * invocation and completion in a history; a nemesis injects faults meanwhile; at the
 * end every key's history is checked for linearizability against the workload's
 * model, and a report folder shows the verdicts, the counts and the pictures. The
 * exit code is 0 when every key is linearizable, 1 on a violation, 3 when the
 * checker could not decide.
 *
 * <p><b>Note:</b> one instance per run.
 */
@Command(name = "stress", mixinStandardHelpOptions = true,
        description = "Run a Jepsen-style consistency test against a multi-process cluster on this machine: "
                + "clients record histories under injected faults, a linearizability checker judges them, "
                + "and a report folder (index.html, PNG charts) shows the result.")
public final class StressCommand implements Callable<Integer> {
    static final List<String> WORKLOADS = List.of("register", "counter", "map", "queue", "lock");
    static final List<String> NEMESES = List.of("none", "partition", "kill", "pause", "delay", "skew", "all");

    @Option(names = "--workload", defaultValue = "register",
            description = "register (read/write/cas of a word), counter (fetch-and-add/read), map, queue, lock "
                    + "(default: ${DEFAULT-VALUE})")
    String workload;

    @Option(names = "--nemesis", defaultValue = "all",
            description = "none, partition, kill, pause, delay, skew, or all (one at a time, at random) "
                    + "(default: ${DEFAULT-VALUE})")
    String nemesis;

    @Option(names = "--nodes", defaultValue = "3", description = "node processes, 2..9 (default: ${DEFAULT-VALUE})")
    int nodes;

    @Option(names = "--clients", defaultValue = "2", description = "client threads per node, 1..16 (default: ${DEFAULT-VALUE})")
    int clients;

    @Option(names = "--keys", defaultValue = "3",
            description = "independent objects, each checked on its own, spread over the nodes (default: ${DEFAULT-VALUE})")
    int keys;

    @Option(names = "--duration", defaultValue = "20", description = "seconds the clients run (default: ${DEFAULT-VALUE})")
    int durationSeconds;

    @Option(names = "--rate", defaultValue = "300",
            description = "operations per second, all clients together (default: ${DEFAULT-VALUE})")
    int rate;

    @Option(names = "--seed", description = "seed of the clients' and the nemesis' choices (default: random, printed)")
    Long seed;

    @Option(names = "--out", description = "report folder (default: membus-stress/<date-time>)")
    Path out;

    @Option(names = "--transport", defaultValue = "shm", description = "shm or tcp (default: ${DEFAULT-VALUE})")
    String transport;

    @Option(names = "--operation-timeout", defaultValue = "1000",
            description = "milliseconds before a client gives up on one operation (default: ${DEFAULT-VALUE})")
    int operationTimeoutMillis;

    @Option(names = "--timeout", defaultValue = "300", description = "seconds the whole run may take (default: ${DEFAULT-VALUE})")
    int timeoutSeconds;

    /** For tests of the checker's reach: the clients' reads sometimes return a value they remembered. */
    @Option(names = "--plant-violation", hidden = true)
    boolean plantViolation;

    private final PrintStream stdout = System.out;

    @Override
    public Integer call() throws Exception {
        validate();
        long runSeed = seed != null ? seed : ThreadLocalRandom.current().nextLong();
        Path folder = out != null ? out : Path.of("membus-stress",
                LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")));
        Path histories = folder.resolve("history");
        Files.createDirectories(histories);
        String replay = commandLine(runSeed);
        stdout.printf("membus stress: workload %s, nemesis %s, %d nodes over %s, %d clients each, %d keys, %d s, seed %d%n",
                workload, nemesis, nodes, transport, clients, keys, durationSeconds, runSeed);
        if (plantViolation) {
            stdout.println("  (planted violation: reads sometimes return a stale remembered value)");
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        List<Nemesis.Window> windows;
        long origin;
        try (StressCluster cluster = new StressCluster(transport, nodes, Math.min(timeoutSeconds, 120),
                operationTimeoutMillis, System.err)) {
            for (String line : cluster.start(deadline)) {
                stdout.println("  " + line);
            }
            origin = System.nanoTime() + 300_000_000L;
            long until = origin + TimeUnit.SECONDS.toNanos(durationSeconds);
            long gapNanos = 1_000_000_000L * nodes * clients / rate;
            Nemesis.Runner runner = (id, p, life) -> {
                p.send(String.join(" ", "RUN", workload, Integer.toString(clients), Integer.toString(keys),
                        Long.toString(origin), Long.toString(until), Long.toString(runSeed), Long.toString(gapNanos),
                        plantViolation ? "1" : "0", Integer.toString(life),
                        histories.resolve("node-" + id + "-life-" + life + ".log").toAbsolutePath().toString()));
                p.expect("RUNNING", deadline);
            };
            for (int id = 1; id <= nodes; id++) {
                runner.run(id, cluster.process(id), 0);
            }
            stdout.printf("clients running for %d s%s%n", durationSeconds, nemesis.equals("none") ? "" : "; faults:");
            Nemesis faults = new Nemesis(nemesis, cluster, origin, TimeUnit.SECONDS.toNanos(durationSeconds), runSeed,
                    runner, stdout);
            faults.start();
            faults.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
            if (faults.isAlive()) {
                throw new IllegalStateException("stress FAILED: the nemesis did not finish before --timeout");
            }
            if (faults.failure() != null) {
                throw new IllegalStateException("stress FAILED: the nemesis could not inject or heal a fault: "
                        + faults.failure().getMessage(), faults.failure());
            }
            windows = faults.windows();
            long done = 0;
            long unknown = 0;
            for (int id = 1; id <= nodes; id++) {
                String[] f = cluster.process(id).expect("DONE ", deadline).split(" ");
                done += Long.parseLong(f[0]);
                unknown += Long.parseLong(f[1]);
            }
            stdout.printf("clients done: %,d operations completed by the last processes of each node (%,d of them"
                    + " indeterminate)%n", done, unknown);
        }
        return judge(folder, histories, windows, runSeed, replay, origin);
    }

    private int judge(Path folder, Path histories, List<Nemesis.Window> windows, long runSeed, String replay,
                      long origin) {
        History history = History.read(histories);
        Checker checker = Checkers.linearizability();
        List<StressReport.KeyResult> results = new ArrayList<>();
        String model = model();
        Map<Integer, List<Event>> byKey = history.byKey();
        boolean valid = true;
        boolean undecided = false;
        stdout.printf("%nchecking %,d operations on %d keys against the %s model%n", history.ops().size(),
                byKey.size(), model);
        for (Map.Entry<Integer, List<Event>> e : byKey.entrySet()) {
            Checker.Verdict v = checker.check(model, e.getValue());
            List<History.Op> ops = History.of(e.getValue()).ops();
            StressReport.KeyResult r = new StressReport.KeyResult(e.getKey(), v, StressReport.count(ops));
            results.add(r);
            valid &= v.status() == Checker.Status.LINEARIZABLE;
            undecided |= v.status() == Checker.Status.UNKNOWN;
            stdout.printf(Locale.ROOT, "  key %-3d %-12s ok %6d  fail %6d  indeterminate %5d  %s%n", e.getKey(),
                    v.status(), r.counts().get(Event.Type.OK), r.counts().get(Event.Type.FAIL),
                    r.counts().get(Event.Type.INFO), v.status() == Checker.Status.LINEARIZABLE ? "" : v.detail());
        }
        if (byKey.isEmpty()) {
            valid = false;
            undecided = true;
            stdout.println("  no operation was recorded: nothing to check");
        }
        StressReport.write(folder, new StressReport.Run(workload, nemesis, transport, nodes, clients, keys,
                durationSeconds, runSeed, replay), history, windows, results, valid, origin);
        stdout.printf("%nreport: %s%n", folder.resolve("index.html").toAbsolutePath());
        if (valid) {
            stdout.println("stress OK: every key's history is linearizable");
            return 0;
        }
        boolean violation = results.stream().anyMatch(r -> r.verdict().status() == Checker.Status.VIOLATION);
        stdout.println(violation ? "stress FAILED: a history is not linearizable (see the keys above)"
                : "stress UNDECIDED: the checker could not decide every key (see above)");
        return violation || !undecided ? 1 : 3;
    }

    private String model() {
        return switch (workload) {
            case "register", "counter" -> workload;
            default -> throw new IllegalStateException("workload " + workload + " has no model yet");
        };
    }

    private String commandLine(long runSeed) {
        return "./membus stress --workload " + workload + " --nemesis " + nemesis + " --nodes " + nodes
                + " --clients " + clients + " --keys " + keys + " --duration " + durationSeconds + " --rate " + rate
                + " --transport " + transport + " --seed " + runSeed;
    }

    private void validate() {
        if (!WORKLOADS.contains(workload)) {
            throw new IllegalArgumentException("--workload " + workload + " is unknown; allowed: "
                    + String.join(", ", WORKLOADS));
        }
        if (!List.of("register", "counter").contains(workload)) {
            throw new IllegalArgumentException("--workload " + workload + " needs a collection this build does not"
                    + " have yet; allowed now: register, counter");
        }
        if (!NEMESES.contains(nemesis)) {
            throw new IllegalArgumentException("--nemesis " + nemesis + " is unknown; allowed: "
                    + String.join(", ", NEMESES));
        }
        if (!List.of("shm", "tcp").contains(transport)) {
            throw new IllegalArgumentException("--transport " + transport + " is unknown; allowed: shm, tcp");
        }
        if (nodes < 2 || nodes > 9 || clients < 1 || clients > 16 || keys < 1 || keys > 1000) {
            throw new IllegalArgumentException("--nodes " + nodes + ", --clients " + clients + ", --keys " + keys
                    + ": allowed --nodes 2..9, --clients 1..16, --keys 1..1000");
        }
        if (durationSeconds < 1 || rate < 1 || operationTimeoutMillis < 10 || timeoutSeconds < durationSeconds) {
            throw new IllegalArgumentException("--duration " + durationSeconds + ", --rate " + rate
                    + ", --operation-timeout " + operationTimeoutMillis + ", --timeout " + timeoutSeconds
                    + ": allowed --duration 1 s or more, --rate 1 or more, --operation-timeout 10 ms or more, "
                    + "--timeout at least --duration");
        }
    }
}
