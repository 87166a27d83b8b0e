package io.membus.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.membus.cluster.ClusterMessage.MemberRow;
import io.membus.cluster.ClusterMessage.StatusReply;
import io.membus.cluster.ClusterMessage.StatusRequest;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;
import org.apache.pekko.actor.ActorSelection;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.pattern.Patterns;

import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * {@code membus status}: asks one running node how it sees the cluster, without
 * joining it. A short-lived actor system (provider {@code remote}, an ephemeral port)
 * sends a {@link StatusRequest} to the node's agent and waits for the answer; being
 * no member, it takes no part in membership or the split-brain resolver's majority.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class ClusterStatus {
    private ClusterStatus() {
    }

    /**
     * Asks the node at {@code hostPort} (its Pekko address) for the cluster's state.
     *
     * @throws DsmTimeoutException when it does not answer within {@code timeout}
     */
    public static StatusReply query(String hostPort, String clusterName, String bindHost, Duration timeout) {
        return query(hostPort, clusterName, bindHost, timeout, null);
    }

    /**
     * As {@link #query(String, String, String, Duration)}, speaking TLS with the
     * certificates of {@code tls} when it is enabled (a cluster with membus.tls on
     * answers nobody else).
     */
    public static StatusReply query(String hostPort, String clusterName, String bindHost, Duration timeout,
                                    NodeConfig.Tls tls) {
        String[] hp = NodeConfig.parseHostPort("seed", hostPort);
        Config config = ConfigFactory.parseMap(tls == null ? Map.of() : tls.arterySettings()).withFallback(ConfigFactory.parseMap(Map.of(
                        "pekko.actor.provider", "remote",
                        "pekko.remote.artery.canonical.hostname", bindHost,
                        "pekko.remote.artery.canonical.port", 0,
                        "pekko.loggers", java.util.List.of("org.apache.pekko.event.slf4j.Slf4jLogger"),
                        "pekko.logging-filter", "org.apache.pekko.event.slf4j.Slf4jLoggingFilter",
                        "pekko.loglevel", "ERROR",
                        "pekko.remote.warn-about-direct-use", "off",
                        "pekko.remote.warn-unsafe-watch-outside-cluster", "off",
                        "pekko.log-dead-letters", "off",
                        "pekko.coordinated-shutdown.run-by-jvm-shutdown-hook", "off")))
                .withFallback(ConfigFactory.load(ClusterStatus.class.getClassLoader()));
        if (clusterName == null || !clusterName.matches("[A-Za-z0-9][A-Za-z0-9_-]*")) {
            throw new io.membus.core.error.DsmConfigException("cluster-name", clusterName,
                    "the cluster's membus.cluster-name: letters, digits, '-' and '_', starting with a letter or digit");
        }
        ActorSystem system;
        try {
            system = ActorSystem.create(clusterName, config);
        } catch (RuntimeException e) {
            throw new io.membus.core.error.DsmConfigException("bind-host", bindHost, "a local address the query can"
                    + " listen on for the answer (e.g. 127.0.0.1): " + e.getMessage(), e);
        }
        try {
            ActorSelection agent = system.actorSelection("pekko://" + clusterName + "@" + hp[0] + ":" + hp[1] + "/user/"
                    + ClusterAgent.NAME);
            return (StatusReply) Patterns.ask(agent, new StatusRequest(), timeout).toCompletableFuture()
                    .get(timeout.toMillis() + 500, TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
            throw new DsmException(ErrorCode.TIMEOUT, "no answer from a membus node: seed=" + hostPort + ", cluster-name="
                    + clusterName + ", waited=" + timeout.toMillis() + "ms; check that a node runs there (membus node"
                    + " --config FILE) and that --cluster-name matches its membus.cluster-name");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DsmException(ErrorCode.INTERNAL, "interrupted while asking " + hostPort, e);
        } finally {
            system.terminate();
            try {
                system.getWhenTerminated().toCompletableFuture().get(5, TimeUnit.SECONDS);
            } catch (Exception ignored) {
                // best effort: the process is about to print and exit
            }
        }
    }

    /** The reply as a table: one row per member, then totals. */
    public static String format(StatusReply reply) {
        StringBuilder sb = new StringBuilder();
        String header = String.format(Locale.ROOT, "%-5s %-40s %-8s %-11s %-9s %-22s %8s %12s",
                "node", "member", "status", "reachable", "transport", "incarnation", "segments", "exported");
        sb.append(header).append('\n').append("-".repeat(header.length())).append('\n');
        long totalBytes = 0;
        int totalSegments = 0;
        int up = 0;
        for (MemberRow m : reply.members()) {
            String node = m.nodeId() == 0 ? "-" : Integer.toString(m.nodeId());
            if (m.entry() != null) {
                long bytes = 0;
                for (SegmentDescriptor d : m.entry().segments()) {
                    bytes += d.size();
                }
                totalBytes += bytes;
                totalSegments += m.entry().segments().size();
                sb.append(String.format(Locale.ROOT, "%-5s %-40s %-8s %-11s %-9s %-22d %8d %12s%n", node, m.address(),
                        m.status(), m.reachable() ? "yes" : "NO", m.entry().transport(), m.entry().incarnation(),
                        m.entry().segments().size(), DsmNode.human(bytes)));
            } else {
                sb.append(String.format(Locale.ROOT, "%-5s %-40s %-8s %-11s %-9s %-22s %8s %12s%n", node, m.address(),
                        m.status(), m.reachable() ? "yes" : "NO", "-", "(no directory entry)", "-", "-"));
            }
            if ("Up".equals(m.status())) {
                up++;
            }
        }
        sb.append('\n').append(String.format(Locale.ROOT,
                "%d members (%d Up), %d segments, %s exported, %d names bound; answered by node %d; leader %s%n",
                reply.members().size(), up, totalSegments, DsmNode.human(totalBytes), reply.names(), reply.fromNode(),
                reply.leader().isEmpty() ? "-" : reply.leader()));
        if (!reply.heap().isEmpty()) {
            sb.append("\nheap segments (global allocator), read by node ").append(reply.fromNode()).append(":\n")
                    .append(reply.heap());
        }
        if (!reply.channels().isEmpty()) {
            sb.append("\nmessage channels of node ").append(reply.fromNode()).append(":\n");
            sb.append(String.format(Locale.ROOT, "  %-7s %-24s %12s %12s %12s %12s %8s%n", "channel", "name",
                    "msgs in", "bytes in", "msgs out", "bytes out", "errors"));
            for (ClusterMessage.ChannelRow c : reply.channels()) {
                sb.append(String.format(Locale.ROOT, "  %-7d %-24s %12d %12d %12d %12d %8d%n", c.channel(), c.name(),
                        c.messagesIn(), c.bytesIn(), c.messagesOut(), c.bytesOut(), c.errors()));
            }
        }
        return sb.toString();
    }
}
