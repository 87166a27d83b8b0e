package io.membus.samples.cluster;

import io.membus.cluster.ClusterMessage;
import io.membus.cluster.ClusterStatus;
import io.membus.cluster.NodeConfig;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.time.Duration;
import java.util.concurrent.Callable;

/**
 * {@code membus status --seed HOST:PORT}: asks one running node (without joining the
 * cluster) for the members, their state, their segments and the memory they export,
 * and prints them as a table.
 *
 * <p><b>Note:</b> one instance per process.
 */
@Command(name = "status", mixinStandardHelpOptions = true,
        description = "Print a Membus cluster's members, their state, segments and memory, asking one node.")
public final class StatusCommand implements Callable<Integer> {

    @Option(names = "--seed", required = true, description = "a node's Pekko address as host:port (its membus.host:port)")
    String seed;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    private boolean clusterNameGiven() {
        return spec != null && spec.commandLine().getParseResult().hasMatchedOption("--cluster-name");
    }

    @Option(names = "--cluster-name", defaultValue = "membus",
            description = "the cluster's membus.cluster-name (default: ${DEFAULT-VALUE}; the demo's is membus-demo)")
    String clusterName;

    @Option(names = "--bind-host", defaultValue = "127.0.0.1",
            description = "the local address the query listens on for the answer (default: ${DEFAULT-VALUE})")
    String bindHost;

    @Option(names = "--groups", description = "list every replica group, not only those not served, short of copies"
            + " or not in sync (docs/replication.md)")
    boolean allGroups;

    @Option(names = "--timeout", defaultValue = "10", description = "seconds to wait for the answer (default: ${DEFAULT-VALUE})")
    int timeoutSeconds;

    @Option(names = "--config", description = "a node's HOCON file: the query reaches the cluster as that node does"
            + " (its cluster secret or membus.tls certificates; without it, this user's ~/.membus/cluster-secret), and"
            + " uses its cluster-name when --cluster-name is not given")
    java.nio.file.Path config;

    @Override
    public Integer call() {
        String name = clusterName;
        Duration wait = Duration.ofSeconds(Math.max(1, timeoutSeconds));
        ClusterMessage.StatusReply reply;
        if (config != null) {
            NodeConfig node = NodeConfig.load(config);
            if (!clusterNameGiven()) {
                name = node.clusterName();
            }
            reply = ClusterStatus.query(seed, name, bindHost, wait, node);
        } else {
            reply = ClusterStatus.query(seed, name, bindHost, wait);
        }
        System.out.print(StatusText.clusterTable(reply, allGroups));
        return 0;
    }
}
