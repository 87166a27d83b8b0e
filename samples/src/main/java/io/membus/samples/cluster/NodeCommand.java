package io.membus.samples.cluster;

import io.membus.core.error.DsmConfigException;
import io.membus.cluster.DsmNode;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * {@code membus node --config FILE}: runs one node in the foreground, printing its
 * status line every few seconds, until it is stopped (Ctrl-C: it leaves the cluster
 * gracefully) or downed by the cluster (it says why and exits with code 3).
 *
 * <p><b>Note:</b> one instance per process.
 */
@Command(name = "node", mixinStandardHelpOptions = true,
        description = "Run a Membus node in the foreground from a HOCON config file (a membus { } section).")
public final class NodeCommand implements Callable<Integer> {

    @Option(names = "--config", required = true, description = "the node's config file (see reference.conf of dsm-cluster)")
    Path config;

    @Option(names = "--status-interval", defaultValue = "5",
            description = "seconds between status lines (default: ${DEFAULT-VALUE})")
    int statusInterval;

    @Option(names = "--run-for", defaultValue = "0",
            description = "stop after this many seconds; 0 runs until stopped (default: ${DEFAULT-VALUE})")
    int runFor;

    @Override
    public Integer call() throws Exception {
        if (statusInterval < 1) {
            throw new DsmConfigException("--status-interval", statusInterval, "1 or more seconds");
        }
        PrintStream out = System.out;
        DsmNode node = DsmNode.start(config);
        // the coherence layer runs on every node: it answers invalidations and clock checks, and
        // `membus status` shows its state (caching, measured skew)
        io.membus.Membus membus = io.membus.Membus.wrap(node);
        try {
            membus.heap();
        } catch (io.membus.core.error.DsmException e) {
            out.println("membus node " + node.nodeId() + ": no coherent heap: " + e.getMessage());
        }
        CountDownLatch stopped = new CountDownLatch(1);
        Thread hook = new Thread(() -> {
            out.println("membus node " + node.nodeId() + ": stopping, leaving the cluster");
            membus.close();
            node.close();
            stopped.countDown();
        }, "membus-node-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        out.println("membus node " + node.nodeId() + " running (member " + node.memberAddress() + "); Ctrl-C stops it");
        // status lines on a fixed schedule (tick k at start + k * interval, the last tick at start + run-for):
        // whether a tick is the last is decided by the schedule, never by how late a loaded machine woke up, so
        // --run-for R --status-interval I prints exactly ceil(R / I) + 1 lines
        long start = System.nanoTime();
        long interval = TimeUnit.SECONDS.toNanos(statusInterval);
        long until = runFor > 0 ? start + TimeUnit.SECONDS.toNanos(runFor) : Long.MAX_VALUE;
        for (long tick = start; ; ) {
            out.println(StatusText.statusLine(node.status()));
            out.flush();
            if (node.isDown()) {
                Runtime.getRuntime().removeShutdownHook(hook);
                membus.close();
                node.close();
                System.err.println("membus node " + node.nodeId() + " is down: " + node.downReason());
                return 3;
            }
            if (runFor > 0 && tick - until >= 0) {
                Runtime.getRuntime().removeShutdownHook(hook);
                membus.close();
                node.close();
                return 0;
            }
            tick = runFor > 0 && until - tick < interval ? until : tick + interval;
            // woken early (a timed wait may return a fraction of a millisecond before its time), wait the rest
            for (long left = tick - System.nanoTime(); left > 0; left = tick - System.nanoTime()) {
                if (stopped.await(left, TimeUnit.NANOSECONDS)) {
                    return 0;
                }
            }
        }
    }
}
