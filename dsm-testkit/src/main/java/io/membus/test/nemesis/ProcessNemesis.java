package io.membus.test.nemesis;

import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmTimeoutException;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * Process faults against nodes that run in processes of their own:
 * <ul>
 *   <li>{@code kill}: {@code kill -9} of one random node; healing restarts it (a new
 *       incarnation);</li>
 *   <li>{@code pause}: {@code SIGSTOP} of one random node (it stops mid-operation, its
 *       leases and locks keep their words); healing sends {@code SIGCONT}.</li>
 * </ul>
 * Signals go to process ids the harness started, never to processes found by name.
 *
 * <p><b>Note:</b> thread-safe.
 */
public final class ProcessNemesis implements Nemesis {
    private final String kind;
    private final List<NodeProcess> nodes;
    private final int backups;
    private final ReplicaHealth health;
    private final Duration settleTimeout;
    /** Memory nodes this nemesis killed for good (kill-permanent); guarded by {@code this}. */
    private final java.util.Set<Integer> killed = new java.util.TreeSet<>();

    private ProcessNemesis(String kind, List<NodeProcess> nodes, int backups, ReplicaHealth health,
                           Duration settleTimeout) {
        if (nodes.isEmpty()) {
            throw new DsmConfigException(kind + " nemesis nodes", "[] (none)", "one or more node processes");
        }
        this.kind = kind;
        this.nodes = List.copyOf(nodes);
        this.backups = backups;
        this.health = health;
        this.settleTimeout = settleTimeout;
    }

    private ProcessNemesis(String kind, List<NodeProcess> nodes) {
        this(kind, nodes, 0, null, Duration.ZERO);
    }

    /**
     * What {@link #killPermanent} asks the cluster before each kill. Implemented by the
     * harness (e.g. from the nodes' status: their members and their replica groups short
     * of copies or not in sync).
     *
     * <p><b>Note:</b> implementations are thread-safe; called from the schedule's thread.
     */
    public interface ReplicaHealth {
        /**
         * Whether the cluster is whole again after the kills of {@code gone}: no live node
         * lists one of them as a member any more, and every replica group is served with
         * all its copies in sync.
         */
        boolean inSync(java.util.Set<Integer> gone);

        /** Whether memory node {@code nodeId} holds replica groups (as primary or copy). */
        boolean holdsGroups(int nodeId);
    }

    /**
     * {@code kill -9} of a random memory node of {@code memoryNodes} that holds groups,
     * never restarted (see the class comment).
     *
     * @param memoryNodes   the memory nodes (never a client node: killing it kills the history's clients)
     * @param backups       {@code membus.replication.backups} of the cluster, at least 1
     * @param health        how the nemesis learns whether the cluster is whole again
     * @param settleTimeout how long a kill waits for the cluster to be whole again; beyond it the
     *                      fault fails (the schedule reports it: re-replication did not finish)
     */
    public static ProcessNemesis killPermanent(List<NodeProcess> memoryNodes, int backups, ReplicaHealth health,
                                               Duration settleTimeout) {
        if (backups < 1) {
            throw new DsmConfigException("membus.replication.backups", backups, "1 or more for a kill-permanent"
                    + " nemesis (with 0 a killed node's memory is gone): set backups 1 or use the kill nemesis");
        }
        return new ProcessNemesis("kill-permanent", memoryNodes, backups, java.util.Objects.requireNonNull(health),
                settleTimeout);
    }

    /** The memory nodes this nemesis killed for good so far. */
    public synchronized java.util.Set<Integer> killed() {
        return java.util.Set.copyOf(killed);
    }

    public static ProcessNemesis kill(List<NodeProcess> nodes) {
        return new ProcessNemesis("kill", nodes);
    }

    public static ProcessNemesis pause(List<NodeProcess> nodes) {
        return new ProcessNemesis("pause", nodes);
    }

    @Override
    public String kind() {
        return kind;
    }

    @Override
    public Fault start(Random random) {
        if (kind.equals("kill-permanent")) {
            return killPermanently(random);
        }
        NodeProcess node = nodes.get(random.nextInt(nodes.size()));
        long pid = node.pid();
        if (kind.equals("kill")) {
            node.kill();
        } else {
            signal("STOP", pid);
            awaitStopped(pid);
        }
        String targets = "node " + node.nodeId() + " (pid " + pid + ")";
        return Fault.of(kind, targets, () -> {
            if (kind.equals("kill")) {
                node.restart();
            } else {
                signal("CONT", pid);
            }
        });
    }

    private synchronized Fault killPermanently(Random random) {
        java.util.Set<Integer> gone = java.util.Set.copyOf(killed);
        long deadline = System.nanoTime() + settleTimeout.toNanos();
        while (!health.inSync(gone)) {
            if (System.nanoTime() - deadline > 0) {
                int last = gone.isEmpty() ? 0 : java.util.Collections.max(gone);
                throw new DsmTimeoutException("kill-permanent: wait until the cluster is whole again after the kill of"
                        + " node(s) " + gone, last, settleTimeout, "the cluster was not whole again in time (a killed"
                        + " node still a member, or a replica group short of copies or not in sync), so no further"
                        + " node is killed: check re-replication (membus status) or raise the settle timeout");
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("kill-permanent: interrupted waiting for the groups to be in sync", e);
            }
        }
        List<NodeProcess> alive = nodes.stream().filter(n -> !killed.contains(n.nodeId())).toList();
        List<NodeProcess> candidates = alive.stream().filter(n -> health.holdsGroups(n.nodeId())).toList();
        String targets;
        if (alive.size() <= 1 + backups) {
            targets = "none (" + alive.size() + " memory nodes left, backups=" + backups + ": the last " + (1 + backups)
                    + " are never killed)";
        } else if (candidates.isEmpty()) {
            targets = "none (no live memory node holds replica groups)";
        } else {
            NodeProcess node = candidates.get(random.nextInt(candidates.size()));
            long pid = node.pid();
            node.kill();
            killed.add(node.nodeId());
            targets = "node " + node.nodeId() + " (pid " + pid + ", for good)";
        }
        // never healed: the node is never restarted, its groups live on in their promoted copies
        return Fault.of("kill-permanent", targets, () -> { });
    }

    /**
     * Waits (at most 2 s) until Linux reports {@code pid} stopped: a signal is delivered
     * asynchronously, and the fault must be in effect when {@code start} returns. Where
     * {@code /proc} is not there, returns at once.
     */
    static void awaitStopped(long pid) {
        java.nio.file.Path stat = java.nio.file.Path.of("/proc", Long.toString(pid), "stat");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
        while (System.nanoTime() - deadline < 0) {
            try {
                String s = java.nio.file.Files.readString(stat);
                char state = s.charAt(s.lastIndexOf(')') + 2);
                if (state == 'T' || state == 't' || state == 'Z' || state == 'X') {
                    return;
                }
            } catch (IOException | RuntimeException e) {
                return; // no /proc, or the process is gone
            }
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Sends {@code SIG<name>} to {@code pid} with the {@code kill} command; fails loudly when it cannot. */
    static void signal(String name, long pid) {
        try {
            Process p = new ProcessBuilder("kill", "-" + name, Long.toString(pid)).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes());
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException("kill -" + name + " " + pid + " did not finish in 10 s");
            }
            if (p.exitValue() != 0) {
                throw new IllegalStateException("kill -" + name + " " + pid + " failed (exit " + p.exitValue() + "): "
                        + out.trim());
            }
        } catch (IOException e) {
            throw new IllegalStateException("cannot run kill -" + name + " " + pid + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted sending SIG" + name + " to " + pid, e);
        }
    }
}
