package io.membus.cluster;

import io.membus.core.metrics.VerbMetrics;
import io.membus.core.transport.Transport;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.ArrayList;

/**
 * The metrics of one {@link DsmNode} (docs/metrics.md): its composite meter registry with
 * the JMX registry (when {@code membus.metrics.jmx = true}) and the Prometheus endpoint
 * (when enabled; both off by default), the meters of segments, channels and membership ({@link NodeMeters}), the
 * transport's verb metrics (also a {@code verbs} section of {@code membus status}); closed
 * with the node's transport.
 *
 * <p><b>Note:</b> thread-safe. {@link #install} runs once on the starting thread and
 * publishes the verb metrics and the endpoint through volatile fields; the registry is
 * Micrometer's composite (thread-safe); {@link #close()} runs once, under the node's
 * transport close.
 */
final class NodeMetrics {
    private static final Logger LOG = LoggerFactory.getLogger(DsmNode.class); // the node's lines, as before
    private final NodeConfig config;
    private final CompositeMeterRegistry meters = new CompositeMeterRegistry();
    private final NodeMeters.MembershipCounts membership = new NodeMeters.MembershipCounts();
    private volatile VerbMetrics verbMetrics;
    private volatile PrometheusEndpoint prometheus;

    NodeMetrics(NodeConfig config) {
        this.config = config;
    }

    /** The node's registry ({@link DsmNode#meterRegistry()}). */
    CompositeMeterRegistry registry() {
        return meters;
    }

    /** Membership's counts, fed by the {@link NodeMeters.Membership} actor. */
    NodeMeters.MembershipCounts membership() {
        return membership;
    }

    /**
     * Counts the transport's verbs per peer ({@link VerbMetrics}): a {@code verbs} section of
     * {@code membus status} (put in {@code report}), meters in {@link #registry()}, and JMX
     * MBeans under {@code membus.node<id>} when {@code membus.metrics.jmx = true} (off by
     * default); the Prometheus endpoint when {@code membus.metrics.prometheus.enabled}; the
     * meters of the segments and of membership ({@link NodeMeters}).
     */
    void install(Transport transport, NodeReport report) {
        if (config.metricsJmx()) {
            meters.add(new io.micrometer.jmx.JmxMeterRegistry(new io.micrometer.jmx.JmxConfig() {
                @Override
                public String get(String key) {
                    return null;
                }

                @Override
                public String domain() {
                    return "membus.node" + config.nodeId();
                }
            }, io.micrometer.core.instrument.Clock.SYSTEM));
        }
        if (config.prometheusEnabled()) {
            PrometheusEndpoint p = new PrometheusEndpoint(config.prometheusHost(), config.prometheusPort(),
                    config.nodeId());
            prometheus = p;
            meters.add(p.registry());
            LOG.info("node {}: Prometheus metrics at http://{}:{}/metrics", config.nodeId(), config.prometheusHost(),
                    p.address().getPort());
        }
        NodeMeters.bindSegments(meters, transport, config.segmentCount());
        NodeMeters.bindChannels(meters, transport);
        membership.bind(meters);
        if (!(transport instanceof io.membus.core.transport.AbstractTransport t)) {
            return;
        }
        VerbMetrics m = new VerbMetrics(transport.name());
        m.inFlight(t::inFlight);
        m.bindTo(meters);
        t.observe(m);
        verbMetrics = m;
        report.section("verbs", m::facts);
    }

    /** Meters the message channels {@code transport} has registered now (idempotent). */
    void bindChannels(Transport transport) {
        NodeMeters.bindChannels(meters, transport);
    }

    /** Where the Prometheus endpoint listens, or {@code null} when it is off (or not started). */
    InetSocketAddress prometheusAddress() {
        PrometheusEndpoint p = prometheus;
        return p == null ? null : p.address();
    }

    /** The transport's verb metrics, or {@code null} before the transport started. */
    VerbMetrics verbMetrics() {
        return verbMetrics;
    }

    /** Frees the Prometheus port (free once this returns) and closes every registry (unregisters the MBeans). */
    void close() {
        PrometheusEndpoint p = prometheus;
        if (p != null) {
            p.close(); // the port is free once close() returns
        }
        for (MeterRegistry r : new ArrayList<>(meters.getRegistries())) {
            meters.remove(r);
            r.close(); // unregisters the MBeans
        }
        meters.close();
    }
}
