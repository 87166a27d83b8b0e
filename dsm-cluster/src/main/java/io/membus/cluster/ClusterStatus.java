package io.membus.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.membus.cluster.ClusterMessage.StatusReply;
import io.membus.cluster.ClusterMessage.StatusRequest;
import io.membus.core.config.HostPort;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import org.apache.pekko.actor.ActorSelection;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.pattern.Patterns;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * {@code membus status}: asks one running node how it sees the cluster (a {@link StatusReply}
 * of data; the command line lays it out), without
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
     * Asks the node at {@code hostPort} (its Pekko address) for the cluster's state, with
     * this user's default cluster secret ({@code membus.secret-file}'s default,
     * {@code ~/.membus/cluster-secret}): what a cluster of nodes with default settings
     * started by this user on this host answers to.
     *
     * @throws DsmTimeoutException when it does not answer within {@code timeout}
     */
    public static StatusReply query(String hostPort, String clusterName, String bindHost, Duration timeout) {
        String file = ConfigFactory.defaultReference(ClusterStatus.class.getClassLoader()).getString("membus.secret-file");
        return query(hostPort, clusterName, bindHost, timeout, null, ClusterSecret.resolve("", file));
    }

    /**
     * As {@link #query(String, String, String, Duration)}, reaching the cluster the way the
     * node of {@code node} does: with its {@code membus.tls} certificates, or with TLS made
     * from its cluster secret, or in plain text when its authentication is off.
     */
    public static StatusReply query(String hostPort, String clusterName, String bindHost, Duration timeout,
                                    NodeConfig node) {
        return switch (node.membership()) {
            case TLS_STORES -> query(hostPort, clusterName, bindHost, timeout, node.tls(), null);
            case SECRET_TLS -> query(hostPort, clusterName, bindHost, timeout, null, node.clusterSecret());
            case OFF -> query(hostPort, clusterName, bindHost, timeout, null, null);
        };
    }

    private static StatusReply query(String hostPort, String clusterName, String bindHost, Duration timeout,
                                     NodeConfig.Tls tls, ClusterSecret secret) {
        HostPort seed = HostPort.parse("seed", hostPort);
        Map<String, Object> transport = tls != null ? tls.arterySettings()
                : secret != null ? MembershipTls.arterySettings() : Map.of();
        Config config = ConfigFactory.parseMap(transport).withFallback(ConfigFactory.parseMap(Map.of(
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
            system = PekkoSettings.system(clusterName, config,
                    secret == null ? null : MembershipTls.provider(secret, clusterName + "/status"));
        } catch (RuntimeException e) {
            throw new io.membus.core.error.DsmConfigException("bind-host", bindHost, "a local address the query can"
                    + " listen on for the answer (e.g. 127.0.0.1): " + e.getMessage(), e);
        }
        try {
            ActorSelection agent = system.actorSelection("pekko://" + clusterName + "@" + seed + "/user/"
                    + ClusterAgent.NAME);
            return (StatusReply) Patterns.ask(agent, new StatusRequest(), timeout).toCompletableFuture()
                    .get(timeout.toMillis() + 500, TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
            throw new DsmTimeoutException("status (no answer from a membus node: seed=" + hostPort + ", cluster-name="
                    + clusterName + ")", 0, timeout, "check that a node runs there (membus node --config FILE) and"
                    + " that --cluster-name matches its membus.cluster-name");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw DsmException.internal("interrupted while asking " + hostPort, e);
        } finally {
            system.terminate();
            try {
                system.getWhenTerminated().toCompletableFuture().get(5, TimeUnit.SECONDS);
            } catch (Exception ignored) {
                // best effort: the process is about to print and exit
            }
        }
    }

}
