package io.membus.samples.stress;

import io.membus.core.error.DsmConfigException;
import io.membus.core.time.SkewableClock;
import io.membus.core.fault.FaultInjector;
import io.membus.test.nemesis.ClockNemesis;
import io.membus.test.nemesis.Fault;
import io.membus.test.nemesis.Nemesis;
import io.membus.test.nemesis.ProcessNemesis;
import io.membus.test.nemesis.TransportNemesis;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.StringJoiner;

/**
 * The test kit's nemeses aimed at node processes. The kit's network and clock
 * nemeses act on {@link FaultInjector}s and {@link SkewableClock}s of the JVM they run
 * in; here the transports and clocks are in the node processes, so this JVM keeps a
 * mirror of each node's injector and clock, lets the kit's nemesis set them, and after
 * every start and every heal sends each node its rules ({@code RULES}) and skew
 * ({@code SKEW}) over its standard input. The process nemeses (kill, pause) act on the
 * {@link StressCluster}'s processes directly.
 *
 * <p><b>Note:</b> thread-safe: the kit's schedule starts and heals from one thread;
 * each sync sends under the cluster's per-process locks.
 */
final class RemoteFaults {
    /** How long the delay nemesis holds each verb. */
    static final Duration DELAY = Duration.ofMillis(50);
    /** The clock nemesis moves a node's clock by ±(½..1)× this. */
    static final Duration SKEW = Duration.ofMillis(300);

    /** How long kill-permanent waits for the cluster to be whole again (downing, promotion, re-replication). */
    static final Duration SETTLE = Duration.ofSeconds(60);

    private final StressCluster cluster;
    private final int backups;
    private final Map<Integer, FaultInjector> injectors = new LinkedHashMap<>();
    private final Map<Integer, SkewableClock> clocks = new LinkedHashMap<>();

    RemoteFaults(StressCluster cluster) {
        this(cluster, 0);
    }

    /** @param backups the memory nodes' {@code membus.replication.backups} (kill-permanent needs 1 or more) */
    RemoteFaults(StressCluster cluster, int backups) {
        this.cluster = cluster;
        this.backups = backups;
        for (int id = 1; id <= cluster.members(); id++) {
            injectors.put(id, new FaultInjector());
            clocks.put(id, new SkewableClock());
        }
    }

    /** The kit's nemeses for {@code --nemesis} (none: an empty list). */
    List<Nemesis> nemeses(String which) {
        List<Nemesis> all = new ArrayList<>();
        if (which.equals("none")) {
            return all;
        }
        if (which.equals("partition") || which.equals("all")) {
            all.add(mirrored(TransportNemesis.partition(injectors)));
        }
        if (which.equals("drop") || which.equals("all")) {
            all.add(mirrored(TransportNemesis.drop(injectors)));
        }
        if (which.equals("delay") || which.equals("all")) {
            all.add(mirrored(TransportNemesis.delay(injectors, DELAY)));
        }
        if (which.equals("skew") || which.equals("all")) {
            all.add(mirrored(new ClockNemesis(clocks, SKEW)));
        }
        if (which.equals("kill") || which.equals("all")) {
            all.add(ProcessNemesis.kill(cluster.kitProcesses()));
        }
        if (which.equals("kill-permanent")) {
            all.add(ProcessNemesis.killPermanent(cluster.kitMemoryProcesses(), backups, cluster.replicaHealth(),
                    SETTLE));
        }
        if (which.equals("pause") || which.equals("all")) {
            all.add(ProcessNemesis.pause(cluster.kitProcesses()));
        }
        if (all.isEmpty()) {
            throw new DsmConfigException("--nemesis", which, String.join(", ", StressCommand.NEMESES));
        }
        return all;
    }

    /** A kit nemesis whose every start and heal is followed by sending the mirrors to the nodes. */
    private Nemesis mirrored(Nemesis inner) {
        return new Nemesis() {
            @Override
            public String kind() {
                return inner.kind();
            }

            @Override
            public Fault start(Random random) {
                Fault f = inner.start(random);
                sync();
                return Fault.of(f.kind(), f.targets(), () -> {
                    f.heal();
                    sync();
                });
            }
        };
    }

    /** Sends every live node its mirrored rules and skew, and waits for each to apply them. */
    void sync() {
        long deadline = System.nanoTime() + 60_000_000_000L;
        try {
            for (int id = 1; id <= cluster.members(); id++) {
                cluster.command(id, "RULES " + rules(id) + " " + clocks.get(id).skewMicros(), "FAULT", deadline);
            }
        } catch (Exception e) {
            throw new IllegalStateException("could not send the faults to the nodes: " + e.getMessage(), e);
        }
    }

    /** {@code peer:drop} and {@code peer:delay:millis} for every peer with a rule, or {@code -}. */
    private String rules(int id) {
        FaultInjector f = injectors.get(id);
        StringJoiner j = new StringJoiner(",");
        for (int peer = 1; peer <= cluster.members(); peer++) {
            FaultInjector.Rule r = f.rule(peer);
            if (r != null) {
                j.add(r.drop() ? peer + ":drop" : peer + ":delay:" + r.delay().toMillis());
            }
        }
        return j.length() == 0 ? "-" : j.toString();
    }
}
