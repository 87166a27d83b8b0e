package io.membus.test.nemesis;

import java.io.IOException;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

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

    private ProcessNemesis(String kind, List<NodeProcess> nodes) {
        if (nodes.isEmpty()) {
            throw new IllegalArgumentException("a " + kind + " nemesis needs node processes");
        }
        this.kind = kind;
        this.nodes = List.copyOf(nodes);
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
        NodeProcess node = nodes.get(random.nextInt(nodes.size()));
        long pid = node.pid();
        if (kind.equals("kill")) {
            node.kill();
        } else {
            signal("STOP", pid);
            awaitStopped(pid);
        }
        AtomicBoolean healed = new AtomicBoolean();
        String targets = "node " + node.nodeId() + " (pid " + pid + ")";
        return new Fault() {
            @Override
            public String kind() {
                return kind;
            }

            @Override
            public String targets() {
                return targets;
            }

            @Override
            public void heal() {
                if (healed.compareAndSet(false, true)) {
                    if (kind.equals("kill")) {
                        node.restart();
                    } else {
                        signal("CONT", pid);
                    }
                }
            }
        };
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
