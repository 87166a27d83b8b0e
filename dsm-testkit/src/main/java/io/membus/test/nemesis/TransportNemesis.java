package io.membus.test.nemesis;

import io.membus.core.error.DsmConfigException;
import io.membus.core.fault.FaultInjector;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

/**
 * Network faults through the transports' {@link FaultInjector}s (nodes in this JVM,
 * or a harness that forwards the rules to node processes):
 * <ul>
 *   <li>{@code partition}: a random minority of the nodes is cut from the rest, both
 *       ways (their verbs and messages are dropped: initiators see deadlines fire);</li>
 *   <li>{@code drop}: one random node loses all traffic with one other node;</li>
 *   <li>{@code delay}: the traffic between one random pair of nodes is held for
 *       {@code delay} each way, keeping its order.</li>
 * </ul>
 *
 * <p><b>Note:</b> thread-safe; the injectors are thread-safe and rules apply to
 * verbs issued after they are set.
 */
public final class TransportNemesis implements Nemesis {
    private final String kind;
    private final Map<Integer, FaultInjector> nodes;
    private final Duration delay;

    private TransportNemesis(String kind, Map<Integer, FaultInjector> nodes, Duration delay) {
        if (nodes.size() < 2) {
            throw new DsmConfigException(kind + " nemesis nodes", nodes.keySet(), "2 or more nodes");
        }
        this.kind = kind;
        this.nodes = new TreeMap<>(nodes);
        this.delay = delay;
    }

    /** Cuts a random minority from the rest. {@code nodes}: node id to its transport's injector. */
    public static TransportNemesis partition(Map<Integer, FaultInjector> nodes) {
        return new TransportNemesis("partition", nodes, Duration.ZERO);
    }

    /** Drops all traffic between one random pair, at one end. */
    public static TransportNemesis drop(Map<Integer, FaultInjector> nodes) {
        return new TransportNemesis("drop", nodes, Duration.ZERO);
    }

    /** Delays all traffic between one random pair by {@code delay}. */
    public static TransportNemesis delay(Map<Integer, FaultInjector> nodes, Duration delay) {
        return new TransportNemesis("delay", nodes, delay);
    }

    @Override
    public String kind() {
        return kind;
    }

    @Override
    public Fault start(Random random) {
        List<Integer> ids = new ArrayList<>(nodes.keySet());
        Collections.shuffle(ids, random);
        List<int[]> pairs = new ArrayList<>(); // (at, peer): the rule is set at node `at` for `peer`
        String targets;
        switch (kind) {
            case "partition" -> {
                int minority = 1 + random.nextInt(Math.max(1, (ids.size() - 1) / 2));
                List<Integer> a = new ArrayList<>(ids.subList(0, minority));
                List<Integer> b = new ArrayList<>(ids.subList(minority, ids.size()));
                Collections.sort(a);
                Collections.sort(b);
                for (int x : a) {
                    for (int y : b) {
                        pairs.add(new int[] {x, y});
                        pairs.add(new int[] {y, x});
                    }
                }
                targets = a + " | " + b;
            }
            case "drop" -> {
                pairs.add(new int[] {ids.get(0), ids.get(1)});
                targets = "node " + ids.get(0) + " drops node " + ids.get(1);
            }
            default -> {
                pairs.add(new int[] {ids.get(0), ids.get(1)});
                pairs.add(new int[] {ids.get(1), ids.get(0)});
                targets = "nodes " + ids.get(0) + " <-> " + ids.get(1) + " +" + delay.toMillis() + "ms";
            }
        }
        for (int[] p : pairs) {
            if (kind.equals("delay")) {
                nodes.get(p[0]).delay(p[1], delay);
            } else {
                nodes.get(p[0]).drop(p[1]);
            }
        }
        return Fault.of(kind, targets, () -> {
            for (int[] p : pairs) {
                nodes.get(p[0]).heal(p[1]);
            }
        });
    }
}
