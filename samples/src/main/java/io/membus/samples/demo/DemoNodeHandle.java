package io.membus.samples.demo;

import io.membus.samples.proc.NodeProcess;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;

/**
 * One node of {@code membus demo}, wherever it runs: a thread of this JVM (transport
 * local) or a node process driven over its standard input and output.
 *
 * <p><b>Note:</b> an implementation is used by the demo's driver thread and the threads
 * that wait for a phase; {@link Child} serialises its process's pipe in
 * {@link NodeProcess}, {@link InProcess} runs each phase on a thread of its own.
 */
interface DemoNodeHandle extends AutoCloseable {
    /** Waits until the node has joined and sees every node's segment; returns its status line. */
    String ready(long deadline) throws Exception;

    /** Runs one phase of an app on the node. */
    CompletableFuture<String> run(String app, String phase, List<String> args, long deadline);

    /** Asks the node to leave the cluster and stop (without waiting). */
    void exit();

    /** kill -9 (node processes only). */
    void kill();

    @Override
    void close();

    /** A node as a thread of this JVM (the local transport). */
    final class InProcess implements DemoNodeHandle {
        private final DemoNode node;
        private final int nodes;

        InProcess(int id, int nodes, int seedPort, long segmentSize, Map<String, String> props, boolean client) {
            this.nodes = nodes;
            this.node = new DemoNode("local", id, id == 1 ? seedPort : 0, seedPort, segmentSize, props, client);
        }

        @Override
        public String ready(long deadline) {
            node.awaitCluster(nodes, java.time.Duration.ofNanos(Math.max(1, deadline - System.nanoTime())));
            return node.statusLine();
        }

        @Override
        public CompletableFuture<String> run(String app, String phase, List<String> args, long deadline) {
            return CompletableFuture.supplyAsync(() -> node.run(app, nodes, phase, args),
                    r -> new Thread(r, "demo-node-" + node.nodeId()).start());
        }

        @Override
        public void exit() {
        }

        @Override
        public void kill() {
            throw new IllegalStateException("a node of --transport local is a thread of this JVM: it cannot be killed");
        }

        @Override
        public void close() {
            node.close();
        }
    }

    /** A node process, driven over its standard input and output. */
    final class Child implements DemoNodeHandle {
        private final int id;
        private final NodeProcess process;
        private final java.util.concurrent.atomic.AtomicLong tags = new java.util.concurrent.atomic.AtomicLong();
        private final BooleanSupplier aborting;

        /**
         * @param quietNode JVM options that keep the node's log quiet
         * @param aborting  whether the demo is aborting (close then kills at once instead of waiting)
         */
        Child(int id, int nodes, String transport, int timeoutSeconds, int seedPort, long segmentSize,
              Map<String, String> props, List<String> quietNode, BooleanSupplier aborting, boolean client)
                throws IOException {
            this.id = id;
            this.aborting = aborting;
            List<String> args = new ArrayList<>(List.of("demo-node", "--transport", transport, "--node-id",
                    Integer.toString(id), "--nodes", Integer.toString(nodes), "--port",
                    Integer.toString(id == 1 ? seedPort : 0), "--seed-port", Integer.toString(seedPort),
                    "--segment-size", Long.toString(segmentSize), "--timeout", Integer.toString(timeoutSeconds)));
            if (client) {
                args.add("--client");
            }
            Map<String, String> env = new LinkedHashMap<>();
            props.forEach((k, v) -> {
                if (k.endsWith(".secret")) {
                    // secrets go through the environment (readable by this user only), never the command line
                    env.put(DemoNodeCommand.SECRET_ENV, k + "=" + v);
                } else {
                    args.add("--property");
                    args.add(k + "=" + v);
                }
            });
            this.process = new NodeProcess("node " + id, quietNode, args, env, System.err::println);
        }

        @Override
        public String ready(long deadline) throws Exception {
            return process.expect("READY ", deadline) + " (pid " + process.pid() + ")";
        }

        @Override
        public CompletableFuture<String> run(String app, String phase, List<String> args, long deadline) {
            return CompletableFuture.supplyAsync(() -> {
                try {
                    String tag = Long.toString(tags.incrementAndGet());
                    process.send(String.join(" ", "RUN", tag, app, phase, String.join(" ", args)).trim());
                    return process.expect("ANSWER " + tag + " ", deadline);
                } catch (IllegalStateException e) {
                    throw e;
                } catch (Exception e) {
                    throw new IllegalStateException("node " + id + ": " + e, e);
                }
            }, waiter -> {
                // a thread per waiting phase: the common pool has one thread on a 2-core machine, and a
                // phase that waits for another node's phase would queue behind it
                Thread t = new Thread(waiter, "demo-wait-node-" + id);
                t.setDaemon(true);
                t.start();
            });
        }

        @Override
        public void exit() {
            process.exit();
        }

        @Override
        public void kill() {
            process.kill();
        }

        @Override
        public void close() {
            process.destroy(aborting.getAsBoolean() ? 0 : 20);
        }
    }
}
