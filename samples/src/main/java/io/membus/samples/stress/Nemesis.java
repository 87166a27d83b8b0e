package io.membus.samples.stress;

import io.membus.samples.proc.NodeProcess;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.StringJoiner;
import java.util.function.IntFunction;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * The faults of a stress run, one at a time: a quiet spell, a fault held for a
 * while, healed, and again, until the run's end. Every fault is recorded as a
 * {@link Window} for the report.
 *
 * <ul>
 *   <li>{@code partition}: the nodes split in two random halves; each node drops every
 *       verb to and from the other half (the verb fabric is cut; membership keeps
 *       talking, so nobody is downed: a cut that downs nodes is what {@code kill} does).</li>
 *   <li>{@code kill}: {@code kill -9} of a random node, which is started again with
 *       the same id and port (a new incarnation; its file-backed segments are back).</li>
 *   <li>{@code pause}: SIGSTOP of a random node, SIGCONT later (shorter than the
 *       failure detector's patience, so it comes back as the same member).</li>
 *   <li>{@code delay}: every verb between any two nodes held 10..100 ms.</li>
 *   <li>{@code skew}: one node's lease clock set 50..500 ms ahead or behind.</li>
 *   <li>{@code all}: each fault drawn at random from the five above.</li>
 * </ul>
 *
 * <p><b>Note:</b> runs on its own thread; {@link #windows()} is read after {@link #join}.
 */
final class Nemesis extends Thread {
    static final List<String> FAULTS = List.of("partition", "kill", "pause", "delay", "skew");

    /**
     * A fault's time on the run's time line.
     *
     * @param kind        partition, kill, pause, delay or skew
     * @param description what exactly was done
     * @param startNanos  when it began
     * @param endNanos    when it was healed (for kill: when the new process had rejoined)
     */
    record Window(String kind, String description, long startNanos, long endNanos) {
    }

    /** Starts the workload on a node process that has just (re)joined. */
    interface Runner {
        void run(int nodeId, NodeProcess process, int life) throws Exception;
    }

    private final String nemesis;
    private final StressCluster cluster;
    private final long untilNanos;
    private final long originNanos;
    private final long quietNanos;
    private final long holdNanos;
    private final Random random;
    private final Runner runner;
    private final PrintStream out;
    private final List<Window> windows = Collections.synchronizedList(new ArrayList<>());
    private volatile Exception failure;

    Nemesis(String nemesis, StressCluster cluster, long originNanos, long durationNanos, long seed, Runner runner,
            PrintStream out) {
        super("membus-nemesis");
        setDaemon(true);
        this.nemesis = nemesis;
        this.cluster = cluster;
        this.originNanos = originNanos;
        this.untilNanos = originNanos + durationNanos;
        // a fault cycle takes about a fifth of the run (at least ~1 s quiet and ~1.5 s held)
        this.quietNanos = Math.max(1_000_000_000L, durationNanos / 10);
        this.holdNanos = Math.max(1_500_000_000L, Math.min(2_500_000_000L, durationNanos / 8));
        this.random = new Random(seed);
        this.runner = runner;
        this.out = out;
    }

    List<Window> windows() {
        return List.copyOf(windows);
    }

    /** The first error the nemesis met (a node that did not come back, a signal that failed), or null. */
    Exception failure() {
        return failure;
    }

    @Override
    public void run() {
        if (nemesis.equals("none")) {
            return;
        }
        try {
            while (true) {
                sleepNanos(quietNanos / 2 + (long) (random.nextDouble() * quietNanos));
                long hold = holdNanos / 2 + (long) (random.nextDouble() * holdNanos);
                if (untilNanos - System.nanoTime() < hold + 500_000_000L) {
                    return; // no room for a whole fault before the end
                }
                String kind = nemesis.equals("all") ? FAULTS.get(random.nextInt(FAULTS.size())) : nemesis;
                long start = System.nanoTime();
                String what = inject(kind, hold);
                Window w = new Window(kind, what, start, System.nanoTime());
                windows.add(w);
                out.printf(Locale.ROOT, "  nemesis %-9s %5.1f s .. %5.1f s  %s%n", kind, (w.startNanos() - originNanos) / 1e9,
                        (w.endNanos() - originNanos) / 1e9, what);
            }
        } catch (Exception e) {
            failure = e;
        }
    }

    private String inject(String kind, long hold) throws Exception {
        int nodes = cluster.nodes();
        long deadline = System.nanoTime() + 120_000_000_000L;
        switch (kind) {
            case "partition" -> {
                List<Integer> ids = IntStream.rangeClosed(1, nodes).boxed().collect(Collectors.toList());
                Collections.shuffle(ids, random);
                int cut = 1 + random.nextInt(nodes - 1);
                List<Integer> a = ids.subList(0, cut);
                List<Integer> b = ids.subList(cut, nodes);
                for (int id : a) {
                    command(id, "DROP " + join(b), deadline);
                }
                for (int id : b) {
                    command(id, "DROP " + join(a), deadline);
                }
                sleepNanos(hold);
                cluster.toAll("HEAL", "FAULT", deadline);
                return "verbs cut between nodes " + sorted(a) + " and " + sorted(b);
            }
            case "kill" -> {
                int victim = 1 + random.nextInt(nodes);
                long pid = cluster.process(victim).pid();
                cluster.kill(victim);
                sleepNanos(hold);
                NodeProcess fresh = cluster.restart(victim);
                cluster.awaitReady(victim, deadline);
                runner.run(victim, fresh, cluster.life(victim));
                return "kill -9 of node " + victim + " (pid " + pid + "), started again as pid " + fresh.pid();
            }
            case "pause" -> {
                int victim = 1 + random.nextInt(nodes);
                NodeProcess p = cluster.process(victim);
                p.pause();
                try {
                    sleepNanos(hold);
                } finally {
                    p.resume();
                }
                return "SIGSTOP of node " + victim + " (pid " + p.pid() + "), then SIGCONT";
            }
            case "delay" -> {
                long millis = 10 + random.nextInt(91);
                for (int id = 1; id <= nodes; id++) {
                    command(id, "DELAY " + millis + " " + join(others(id, nodes)), deadline);
                }
                sleepNanos(hold);
                cluster.toAll("HEAL", "FAULT", deadline);
                return "every verb between nodes held " + millis + " ms";
            }
            case "skew" -> {
                int victim = 1 + random.nextInt(nodes);
                long micros = (50_000 + random.nextInt(450_001)) * (random.nextBoolean() ? 1L : -1L);
                command(victim, "SKEW " + micros, deadline);
                sleepNanos(hold);
                cluster.toAll("HEAL", "FAULT", deadline);
                return "node " + victim + "'s clock " + (micros > 0 ? "ahead" : "behind") + " by "
                        + Math.abs(micros) / 1000 + " ms";
            }
            default -> throw new IllegalArgumentException("--nemesis " + kind + " is unknown");
        }
    }

    private void command(int id, String line, long deadline) throws Exception {
        NodeProcess p = cluster.process(id);
        p.send(line);
        p.expect("FAULT", deadline);
    }

    private static List<Integer> others(int id, int nodes) {
        return IntStream.rangeClosed(1, nodes).filter(i -> i != id).boxed().toList();
    }

    private static String join(List<Integer> ids) {
        StringJoiner j = new StringJoiner(",");
        ids.forEach(i -> j.add(Integer.toString(i)));
        return j.toString();
    }

    private static List<Integer> sorted(List<Integer> ids) {
        List<Integer> s = new ArrayList<>(ids);
        Collections.sort(s);
        return s;
    }

    private static void sleepNanos(long nanos) throws InterruptedException {
        long end = System.nanoTime() + nanos;
        for (long left = nanos; left > 0; left = end - System.nanoTime()) {
            Thread.sleep(Math.max(1, left / 1_000_000));
        }
    }
}
