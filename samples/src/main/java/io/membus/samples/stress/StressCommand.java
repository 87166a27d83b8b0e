package io.membus.samples.stress;

import io.membus.core.error.DsmConfigException;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.capability.TransportCapabilities;
import io.membus.samples.proc.NodeProcess;
import io.membus.test.check.CheckResult;
import io.membus.test.check.KeyResult;
import io.membus.test.check.LinearizabilityChecker;
import io.membus.test.check.Model;
import io.membus.test.check.Models;
import io.membus.test.check.Verdict;
import io.membus.test.history.FaultWindow;
import io.membus.test.history.History;
import io.membus.test.history.HistoryRecorder;
import io.membus.test.history.Operation;
import io.membus.test.history.Outcome;
import io.membus.test.nemesis.Nemesis;
import io.membus.test.nemesis.NemesisSchedule;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Comparator;
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
    static final List<String> NEMESES = List.of("none", "partition", "drop", "kill", "pause", "delay", "skew", "all",
            "kill-permanent");
    /** Memory nodes of a kill-permanent run unless --nodes says: 2 kills with 1 backup (never the last 1 + backups). */
    static final int KILL_PERMANENT_NODES = 4;

    @Option(names = "--workload", defaultValue = "register",
            description = "register (DsmAtomicLong get/set/compareAndSet), counter (DsmAtomicLong getAndAdd/get), "
                    + "map (DsmMap get/put/putIfAbsent/remove), queue (DsmQueue offer/poll), lock (DsmLock "
                    + "tryLock/unlock) (default: ${DEFAULT-VALUE})")
    String workload;

    @Option(names = "--nemesis", defaultValue = "all",
            description = "none, partition, drop, kill, pause, delay, skew, or all (one at a time, at random) "
                    + "(default: ${DEFAULT-VALUE}); or kill-permanent: kill -9 of a memory node holding replica groups,"
                    + " never restarted (replication must promote its copies), waiting until every group is in sync"
                    + " before the next kill and never the last 1 + backups memory nodes; its clients run only on the"
                    + " client nodes, over tcp with --nodes " + KILL_PERMANENT_NODES + " and --backups 1 unless said")
    String nemesis;

    /** Memory nodes: 3, or what --nodes said; {@link #call()} makes it {@value #KILL_PERMANENT_NODES} for kill-permanent. */
    int nodes = 3;
    private boolean nodesGiven;

    @Option(names = "--nodes", description = "memory node processes, 2..9 (default: 3; " + KILL_PERMANENT_NODES
            + " with --nemesis kill-permanent: enough for two kills with one backup)")
    void nodes(int n) {
        nodes = n;
        nodesGiven = true;
    }

    @Option(names = "--backups", description = "membus.replication.backups of the memory nodes, 0..3 (default: 1 with"
            + " --nemesis kill-permanent, else the nodes' default)")
    Integer backups;

    @Option(names = "--clients", defaultValue = "2", description = "client threads per node, 1..16 (default: ${DEFAULT-VALUE})")
    int clients;

    @Option(names = "--client-nodes", defaultValue = "1",
            description = "client node processes, 0..4, besides the --nodes memory nodes: they export no memory, never"
                    + " count in the split-brain decision, and run the workload's client threads like the others"
                    + " (default: ${DEFAULT-VALUE})")
    int clientNodes;

    @Option(names = "--keys", defaultValue = "3",
            description = "independent objects, each checked on its own; key k lives on node k % nodes + 1, so every "
                    + "node holds keys when keys >= nodes (default: ${DEFAULT-VALUE})")
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

    @Option(names = "--transport", description = "shm or tcp (default: shm; tcp with --nemesis kill-permanent, whose"
            + " replication forwards changes to copies)")
    String transport;

    /** Milliseconds: 1000, or what --operation-timeout said; {@link #call()} makes it 5000 for kill-permanent. */
    int operationTimeoutMillis = 1000;
    private boolean operationTimeoutGiven;

    @Option(names = "--operation-timeout",
            description = "milliseconds before a client gives up on one operation (default: 1000; 5000 with --nemesis"
                    + " kill-permanent, whose operations wait out failure detection and promotion, and whose nodes' "
                    + "replication facts and claims need majority writes within it while 5 JVMs start on few cores)")
    void operationTimeout(int millis) {
        operationTimeoutMillis = millis;
        operationTimeoutGiven = true;
    }

    @Option(names = "--timeout", defaultValue = "300", description = "seconds the whole run may take (default: ${DEFAULT-VALUE})")
    int timeoutSeconds;

    @Option(names = "--coherent",
            description = "register on a coherent object (RemoteRef, cached reads under leases, invalidations) "
                    + "instead of DsmAtomicLong")
    boolean coherent;

    @Option(names = "--raw-verbs",
            description = "register and counter on raw words with one-sided verbs instead of DsmAtomicLong")
    boolean rawVerbs;

    /** For tests of the checker's reach: the clients' reads sometimes return a value they remembered. */
    @Option(names = "--plant-violation", hidden = true)
    boolean plantViolation;

    private final PrintStream stdout = System.out;

    private boolean killPermanent() {
        return "kill-permanent".equals(nemesis);
    }

    /** Whether node {@code id}'s process runs client threads: every node, but only client nodes under kill-permanent. */
    private boolean runsClients(int id) {
        return !killPermanent() || id > nodes;
    }

    @Override
    public Integer call() throws Exception {
        if (!nodesGiven && killPermanent()) {
            nodes = KILL_PERMANENT_NODES;
        }
        if (!operationTimeoutGiven && killPermanent()) {
            operationTimeoutMillis = 5000;
        }
        if (transport == null) {
            transport = killPermanent() ? "tcp" : "shm";
        }
        if (backups == null && killPermanent()) {
            backups = 1;
        }
        validate();
        long runSeed = seed != null ? seed : ThreadLocalRandom.current().nextLong();
        Path folder = out != null ? out : Path.of("membus-stress",
                LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")));
        Path histories = folder.resolve("history");
        Files.createDirectories(histories);
        try (var old = Files.list(histories)) {
            if (old.findAny().isPresent()) {
                throw new DsmConfigException("--out", folder, "a folder that holds no histories of a run (this one"
                        + " does; histories of two runs must never mix)");
            }
        }
        String replay = commandLine(runSeed);
        stdout.printf("membus stress: workload %s, nemesis %s, %d nodes%s over %s, %d clients each, %d keys, %d s, seed %d%n",
                workload, nemesis, nodes, clientNodes == 0 ? "" : " + " + clientNodes + " client node"
                        + (clientNodes == 1 ? "" : "s") + " (no memory)", transport, clients, keys, durationSeconds,
                runSeed);
        if (plantViolation) {
            stdout.println("  (planted violation: reads sometimes return a stale remembered value)");
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        HistoryRecorder faultsOnly = new HistoryRecorder(); // the kit's schedule records its fault windows here
        long origin = System.nanoTime() - faultsOnly.now();
        List<FaultWindow> windows;
        int members = nodes + clientNodes;
        if (killPermanent()) {
            stdout.printf("  (kill-permanent: membus.replication.backups = %d; clients only on the %d client node%s)%n",
                    backups, clientNodes, clientNodes == 1 ? "" : "s");
        }
        try (StressCluster cluster = new StressCluster(transport, nodes, clientNodes, Math.min(timeoutSeconds, 120),
                operationTimeoutMillis, backups == null ? -1 : backups, System.err)) {
            for (String line : cluster.start(deadline)) {
                stdout.println("  " + line);
            }
            long from = System.nanoTime() + 200_000_000L;
            long until = from + TimeUnit.SECONDS.toNanos(durationSeconds);
            int runners = killPermanent() ? clientNodes : members;
            long gapNanos = 1_000_000_000L * runners * clients / rate;
            StressCluster.Restarted run = (id, p, life) -> {
                p.send(String.join(" ", "RUN", rawVerbs ? workload + "-verbs" : coherent ? workload + "-coherent" : workload, Integer.toString(clients), Integer.toString(keys),
                        Long.toString(from), Long.toString(until), Long.toString(runSeed), Long.toString(gapNanos),
                        plantViolation ? "1" : "0", Integer.toString(life),
                        histories.resolve("node-" + id + "-life-" + life + ".log").toAbsolutePath().toString()));
                p.expect("RUNNING", deadline);
            };
            cluster.onRestart(run);
            if (coherent) {
                NodeProcess first = cluster.process(1);
                first.send("SETUP " + keys);
                stdout.println("  node 1 made " + first.expect("SETUP ", deadline));
            }
            for (int id = 1; id <= members; id++) {
                if (runsClients(id)) {
                    run.started(id, cluster.process(id), 0);
                }
            }
            stdout.printf("clients running for %d s%s%n", durationSeconds, nemesis.equals("none") ? "" : "; faults:");
            Duration quiet = Duration.ofMillis(Math.max(1000, durationSeconds * 100L));
            Duration faultFor = Duration.ofMillis(Math.max(1500, Math.min(2500, durationSeconds * 125L)));
            List<Nemesis> nemeses = new RemoteFaults(cluster, backups == null ? 0 : backups).nemeses(nemesis);
            NemesisSchedule schedule = NemesisSchedule.start(nemeses, faultsOnly, runSeed, quiet, faultFor);
            try {
                while (System.nanoTime() - until < 0) {
                    Thread.sleep(Math.max(1, Math.min(200, (until - System.nanoTime()) / 1_000_000)));
                }
            } finally {
                schedule.close(); // heals whatever is active: a run always ends healed
            }
            windows = faultsOnly.history().faults();
            for (FaultWindow w : windows) {
                stdout.printf(Locale.ROOT, "  nemesis %-9s %5.1f s .. %5.1f s  %s%n", w.kind(),
                        (w.startNanos() - (from - origin)) / 1e9, (w.endNanos() - (from - origin)) / 1e9, w.targets());
            }
            if (schedule.failure() != null) {
                throw new IllegalStateException("stress FAILED: the nemesis could not inject or heal a fault: "
                        + schedule.failure().getMessage(), schedule.failure());
            }
            long done = 0;
            long unknown = 0;
            for (int id = 1; id <= members; id++) {
                if (!runsClients(id)) {
                    continue;
                }
                String[] f = cluster.process(id).expect("DONE ", deadline).split(" ");
                done += Long.parseLong(f[0]);
                unknown += Long.parseLong(f[1]);
            }
            stdout.printf("clients done: %,d operations completed by the last processes of each node (%,d of them"
                    + " indeterminate)%n", done, unknown);
            return judge(folder, HistoryLines.read(histories, from, shift(windows, from - origin)), runSeed, replay);
        }
    }

    /** The fault windows on the clients' time line (0 = when they started). */
    private static List<FaultWindow> shift(List<FaultWindow> windows, long by) {
        return windows.stream().map(w -> new FaultWindow(w.kind(), w.targets(), w.startNanos() - by,
                w.endNanos() - by)).toList();
    }

    private int judge(Path folder, History history, long runSeed, String replay) {
        Model<?> model = switch (workload) {
            case "register" -> Models.register(0L);
            case "counter" -> Models.counter(0);
            case "map" -> Models.mapKey();
            case "queue" -> Models.fifoQueue(CollectionWorkloads.QUEUE_CAPACITY);
            case "lock" -> Models.lock();
            default -> throw new IllegalStateException("workload " + workload + " has no model");
        };
        Map<String, List<Operation>> byKey = history.byKey();
        stdout.printf("%nchecking %,d operations on %d keys against the %s model (dsm-testkit LinearizabilityChecker)%n",
                history.operations().size(), byKey.size(), workload);
        CheckResult result = new LinearizabilityChecker().check(history, model);
        List<String> keyNames = new ArrayList<>(result.keys().keySet());
        keyNames.sort(Comparator.comparingInt(Integer::parseInt));
        for (String key : keyNames) {
            KeyResult k = result.keys().get(key);
            Map<Outcome, Integer> counts = StressReport.count(byKey.get(key));
            stdout.printf(Locale.ROOT, "  key %-3s %-12s ok %6d  fail %6d  indeterminate %5d%s%n", key, k.verdict(),
                    counts.get(Outcome.OK), counts.get(Outcome.FAIL), counts.get(Outcome.INFO),
                    k.verdict() == Verdict.LINEARIZABLE ? "" : "\n      " + k.explanation());
        }
        boolean recorded = !byKey.isEmpty();
        if (!recorded) {
            stdout.println("  no operation was recorded: nothing to check");
        }
        StressReport.write(folder, new StressReport.Run(workload, nemesis, transport, nodes, clients, keys,
                durationSeconds, runSeed, replay), history, result, keyNames);
        stdout.printf("%nreport: %s%n", folder.resolve("index.html").toAbsolutePath());
        if (result.verdict() == Verdict.LINEARIZABLE && recorded) {
            stdout.println("stress OK: every key's history is linearizable");
            return 0;
        }
        if (result.verdict() == Verdict.VIOLATION) {
            stdout.println("stress FAILED: a history is not linearizable (keys " + result.keysWith(Verdict.VIOLATION)
                    + ")");
            return 1;
        }
        stdout.println("stress UNDECIDED: the checker could not decide every key (see above)");
        return 3;
    }

    private String commandLine(long runSeed) {
        return "./membus stress --workload " + workload + " --nemesis " + nemesis + " --nodes " + nodes
                + " --client-nodes " + clientNodes + " --clients " + clients + " --keys " + keys + " --duration " + durationSeconds + " --rate " + rate
                + " --transport " + transport + (backups == null ? "" : " --backups " + backups) + (rawVerbs ? " --raw-verbs" : "") + (coherent ? " --coherent" : "") + " --seed " + runSeed;
    }

    /**
     * Refuses a bad option with a {@link DsmConfigException} naming the option, the value given and what is
     * allowed; the CLI prints it as {@code membus: bad config: key=--workload, value=bag, allowed=register, ...}.
     */
    void validate() {
        if (!WORKLOADS.contains(workload)) {
            throw new DsmConfigException("--workload", workload, String.join(", ", WORKLOADS));
        }
        if (coherent && (rawVerbs || !workload.equals("register"))) {
            throw new DsmConfigException("--coherent", "with --workload " + workload + (rawVerbs ? " --raw-verbs" : ""),
                    "--workload register without --raw-verbs (--coherent runs the register workload on coherent"
                    + " objects)");
        }
        if (rawVerbs && !List.of("register", "counter").contains(workload)) {
            throw new DsmConfigException("--raw-verbs", "with --workload " + workload, "--workload register or counter"
                    + " (raw verbs run them on raw words; --workload " + workload + " needs its collection)");
        }
        if (!NEMESES.contains(nemesis)) {
            throw new DsmConfigException("--nemesis", nemesis, String.join(", ", NEMESES));
        }
        if (!List.of("shm", "tcp").contains(transport)) {
            throw new DsmConfigException("--transport", transport, "shm, tcp");
        }
        if (backups != null && (backups < 0 || backups > 3)) {
            throw new DsmConfigException("--backups", backups, "0..3");
        }
        // a capability, not a name: the killed node's structures live on in copies its transport forwarded to
        if (killPermanent() && (clientNodes < 1 || backups < 1
                || TransportCapabilities.of(transport).replication() != ReplicationSupport.FORWARDING)) {
            throw new DsmConfigException("--nemesis", "kill-permanent with --client-nodes " + clientNodes
                    + " --backups " + backups + " --transport " + transport, "kill-permanent needs --client-nodes 1 or"
                    + " more (its clients must outlive the memory nodes it kills), --backups 1 or more and --transport"
                    + " tcp (replication forwards changes over tcp; got " + transport + ")");
        }
        checkRange("--nodes", nodes, 2, 9);
        checkRange("--client-nodes", clientNodes, 0, 4);
        checkRange("--clients", clients, 1, 16);
        checkRange("--keys", keys, 1, 1000);
        if (durationSeconds < 1) {
            throw new DsmConfigException("--duration", durationSeconds, "1 s or more");
        }
        if (rate < 1) {
            throw new DsmConfigException("--rate", rate, "1 or more");
        }
        if (operationTimeoutMillis < 10) {
            throw new DsmConfigException("--operation-timeout", operationTimeoutMillis, "10 ms or more");
        }
        if (timeoutSeconds < durationSeconds) {
            throw new DsmConfigException("--timeout", timeoutSeconds, "at least --duration (" + durationSeconds + " s)");
        }
    }

    private static void checkRange(String option, int value, int min, int max) {
        if (value < min || value > max) {
            throw new DsmConfigException(option, value, min + ".." + max);
        }
    }
}
