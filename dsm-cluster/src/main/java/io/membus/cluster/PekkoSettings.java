package io.membus.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.BootstrapSetup;
import org.apache.pekko.actor.setup.ActorSystemSetup;
import org.apache.pekko.remote.artery.tcp.SSLEngineProviderSetup;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The Pekko settings of a node, derived from its {@link NodeConfig}: the node's
 * identity (address, roles, TLS), which wins; then the config's own {@code pekko}
 * section; then Membus' tuning (split-brain resolver, failure detector, gossip, join
 * retries); then application.conf, system properties and every reference.conf.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
final class PekkoSettings {
    /** How long Artery may take to bind the membership port. */
    static final Duration BIND_TIMEOUT = Duration.ofSeconds(15);

    private PekkoSettings() {
    }

    /** Pekko settings: identity from the node config (wins), then the config's own pekko section, then tuning. */
    static Config of(NodeConfig c) {
        Map<String, Object> identity = new HashMap<>();
        identity.put("pekko.actor.provider", "cluster");
        identity.put("pekko.remote.artery.canonical.hostname", c.host());
        identity.put("pekko.remote.artery.canonical.port", c.port());
        // the resolver's majority and the name arbiter count only memory nodes (NODE_ROLE), never clients
        identity.put("pekko.cluster.roles", List.of(c.isClient() ? ClusterAgent.CLIENT_ROLE : ClusterAgent.NODE_ROLE,
                ClusterAgent.ID_ROLE_PREFIX + c.nodeId()));
        identity.put("pekko.cluster.seed-nodes", List.of());
        identity.putAll(c.tls().arterySettings());
        if (c.membership() == NodeConfig.Membership.SECRET_TLS) {
            identity.putAll(MembershipTls.arterySettings());
        }
        Map<String, Object> tuning = new HashMap<>();
        tuning.put("pekko.loggers", List.of("org.apache.pekko.event.slf4j.Slf4jLogger"));
        // slf4j's levels, and no stream warnings while this node leaves cleanly (ShutdownLogFilter)
        tuning.put("pekko.logging-filter", ShutdownLogFilter.class.getName());
        // Pekko's standard-out logger runs while the loggers start and after they stop (in its own format, on
        // stdout; during the hand-over a line reaches both): with slf4j in place it has nothing to add
        tuning.put("pekko.stdout-loglevel", "OFF");
        tuning.put("pekko.log-dead-letters-during-shutdown", "off");
        tuning.put("pekko.log-dead-letters", "off");
        tuning.put("pekko.cluster.downing-provider-class", "org.apache.pekko.cluster.sbr.SplitBrainResolverProvider");
        tuning.put("pekko.cluster.split-brain-resolver.active-strategy", "keep-majority");
        tuning.put("pekko.cluster.split-brain-resolver.keep-majority.role", ClusterAgent.NODE_ROLE);
        tuning.put("pekko.cluster.split-brain-resolver.stable-after", ms(c.stableAfter()));
        tuning.put("pekko.cluster.failure-detector.heartbeat-interval", ms(c.heartbeatInterval()));
        tuning.put("pekko.cluster.failure-detector.acceptable-heartbeat-pause", ms(c.acceptableHeartbeatPause()));
        tuning.put("pekko.cluster.failure-detector.threshold", c.phiThreshold());
        tuning.put("pekko.cluster.gossip-interval", ms(c.gossipInterval()));
        tuning.put("pekko.cluster.leader-actions-interval", ms(c.gossipInterval()));
        tuning.put("pekko.cluster.unreachable-nodes-reaper-interval", ms(c.gossipInterval()));
        tuning.put("pekko.cluster.distributed-data.gossip-interval", ms(c.gossipInterval()));
        tuning.put("pekko.cluster.distributed-data.notify-subscribers-interval", "100ms");
        tuning.put("pekko.cluster.jmx.enabled", "off");
        // A node restarted on its old address joins while its previous incarnation is still a member: Pekko downs
        // the old one on that join, and the new one's join is answered only after that. With Pekko's 10 s retry
        // the restart waited one whole retry (12-19 s measured); retrying every second admits it in a few seconds.
        tuning.put("pekko.cluster.retry-unsuccessful-join-after", "1s");
        tuning.put("pekko.cluster.seed-node-timeout", "2s");
        tuning.put("pekko.coordinated-shutdown.exit-jvm", "off");
        // Pekko's threads never keep the JVM alive: a node stops them in close(), and when Artery's stop stalls (its
        // stream shutdown has no deadline in Pekko 1.7: "actor-system-terminate timed out after 10000 ms", seen on a
        // loaded machine) the application's main still returns and its JVM exits. `membus node` waits on its own.
        tuning.put("pekko.daemonic", "on");
        // Artery's bind of the membership port: Pekko's 3 s was seen to run out on a loaded machine (TLS set-up
        // included), and the start then failed as if the address were bad
        tuning.put("pekko.remote.artery.bind.bind-timeout", ms(BIND_TIMEOUT));
        Config user = c.raw().hasPath("pekko") ? c.raw().withOnlyPath("pekko") : ConfigFactory.empty();
        // ConfigFactory.load() below is application.conf and system properties over every reference.conf
        return ConfigFactory.parseMap(identity)
                .withFallback(user)
                .withFallback(ConfigFactory.parseMap(tuning))
                .withFallback(ConfigFactory.load(PekkoSettings.class.getClassLoader()));
    }

    /**
     * An actor system whose Artery gets its TLS engines from {@code tls} (credentials made
     * from the cluster secret, in memory) when it is not null; otherwise as its config says.
     */
    static ActorSystem system(String name, Config pekko, MembershipTls.Provider tls) {
        if (tls == null) {
            return ActorSystem.create(name, pekko);
        }
        return ActorSystem.create(name, ActorSystemSetup.create(BootstrapSetup.create(pekko),
                SSLEngineProviderSetup.create(system -> tls)));
    }

    private static String ms(Duration d) {
        return d.toMillis() + "ms";
    }
}
