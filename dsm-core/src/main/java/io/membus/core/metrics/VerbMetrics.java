package io.membus.core.metrics;

import io.membus.core.transport.VerbObserver;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.IntUnaryOperator;

/**
 * The verb metrics of one node's transport, per peer: verbs and bytes per kind,
 * timeouts, errors, reconnects, verbs in flight, and a latency histogram
 * (HdrHistogram, 3 significant digits, from 1 µs... up to the largest seen). What
 * {@code membus status} prints and what the node's Micrometer registry exposes
 * (through JMX or Prometheus when {@code membus.metrics} turns them on; off by default):
 *
 * <pre>
 *   membus.verbs{transport, peer, kind}        verbs completed with a result (counter)
 *   membus.verb.bytes{transport, peer, kind}   their payload bytes (counter)
 *   membus.verb.timeouts{transport, peer}      verbs failed by their deadline (counter)
 *   membus.verb.errors{transport, peer}        verbs failed otherwise (counter)
 *   membus.reconnects{transport, peer}         connections that came back (counter)
 *   membus.verbs.in.flight{transport, peer}    verbs issued and not completed (gauge)
 *   membus.verb.latency{transport, peer, quantile = 0.5 | 0.99 | 0.999 | 1.0}
 *                                              since start, in seconds (gauges)
 * </pre>
 *
 * <p>What is counted: every verb that crosses a connection (posted verbs, tcp's
 * blocking lanes, rdma). Verbs that {@link io.membus.core.RemoteMemory} runs as
 * memory operations on the caller's thread (this node's own segments, {@code local}
 * and {@code shm} peers with no fault rule) are not: they cost a few nanoseconds,
 * and counting them would cost as much again.
 *
 * <p><b>Note:</b> thread-safe. Recording is wait-free (striped counters, an
 * HdrHistogram {@link Recorder}) and allocates nothing once a peer was seen; reading
 * (status, a registry's poll) folds the recorded interval into the totals under
 * the peer's lock.
 */
public final class VerbMetrics implements VerbObserver {
    private static final int DIRECT_PEERS = 1024;
    private static final String[] KINDS = {"read", "write", "cas", "faa"};

    private final String transport;
    private final AtomicReferenceArray<Peer> direct = new AtomicReferenceArray<>(DIRECT_PEERS);
    private final Map<Integer, Peer> others = new ConcurrentHashMap<>();
    private volatile IntUnaryOperator inFlight = peer -> 0;
    private volatile MeterRegistry registry;

    /** @param transport the transport's name, a tag of every meter */
    public VerbMetrics(String transport) {
        this.transport = transport;
    }

    /**
     * Tells the metrics how to read the verbs in flight to a peer (the transport's
     * connections know); 0 until set.
     */
    public void inFlight(IntUnaryOperator verbsInFlightToPeer) {
        this.inFlight = java.util.Objects.requireNonNull(verbsInFlightToPeer, "verbsInFlightToPeer");
    }

    /** Registers the meters of every peer seen, and of every peer seen later, with {@code registry}. */
    public synchronized void bindTo(MeterRegistry registry) {
        this.registry = registry;
        for (int i = 0; i < DIRECT_PEERS; i++) {
            Peer p = direct.get(i);
            if (p != null) {
                p.register(registry);
            }
        }
        others.values().forEach(p -> p.register(registry));
    }

    // ------------------------------------------------------------------ recording

    @Override
    public void completed(int peer, int kind, int bytes, long latencyNanos) {
        Peer p = peer(peer);
        p.verbs[kind].increment();
        p.bytes[kind].add(bytes);
        p.latency.recordValue(Math.max(0, latencyNanos));
    }

    @Override
    public void timedOut(int peer, int kind) {
        peer(peer).timeouts.increment();
    }

    @Override
    public void failed(int peer, int kind) {
        peer(peer).errors.increment();
    }

    @Override
    public void reconnected(int peer) {
        peer(peer).reconnects.increment();
    }

    private Peer peer(int node) {
        if (node >= 0 && node < DIRECT_PEERS) {
            Peer p = direct.get(node);
            return p != null ? p : create(node);
        }
        Peer p = others.get(node);
        return p != null ? p : create(node);
    }

    private synchronized Peer create(int node) {
        Peer p = node >= 0 && node < DIRECT_PEERS ? direct.get(node) : others.get(node);
        if (p != null) {
            return p;
        }
        p = new Peer(node);
        if (node >= 0 && node < DIRECT_PEERS) {
            direct.set(node, p);
        } else {
            others.put(node, p);
        }
        MeterRegistry r = registry;
        if (r != null) {
            p.register(r);
        }
        return p;
    }

    // ------------------------------------------------------------------ reading

    /**
     * One line per peer seen, for {@code membus status}: the key names the peer
     * ({@code node-2}), the value its counters and latency percentiles.
     */
    public Map<String, String> facts() {
        Map<String, String> out = new LinkedHashMap<>();
        out.put("transport", transport);
        java.util.List<Peer> peers = new java.util.ArrayList<>();
        for (int i = 0; i < DIRECT_PEERS; i++) {
            Peer p = direct.get(i);
            if (p != null) {
                peers.add(p);
            }
        }
        others.values().stream().sorted(java.util.Comparator.comparingInt(p -> p.node)).forEach(peers::add);
        for (Peer p : peers) {
            out.put("node-" + p.node, p.describe());
        }
        return out;
    }

    /** The totals of one peer, or null when it was never seen; for tests. */
    public Snapshot snapshot(int node) {
        Peer p = node >= 0 && node < DIRECT_PEERS ? direct.get(node) : others.get(node);
        return p == null ? null : p.snapshot();
    }

    /**
     * What was counted for one peer up to now.
     *
     * @param verbs      verbs completed with a result, by kind (read, write, cas, faa)
     * @param bytes      their payload bytes, by kind
     * @param p50Nanos   median latency (0 when none completed)
     * @param p99Nanos   99th percentile latency
     * @param maxNanos   longest latency
     */
    public record Snapshot(long[] verbs, long[] bytes, long timeouts, long errors, long reconnects, int inFlight,
                           long p50Nanos, long p99Nanos, long maxNanos) {
        /** Verbs of every kind. */
        public long totalVerbs() {
            long n = 0;
            for (long v : verbs) {
                n += v;
            }
            return n;
        }
    }

    /** One peer's counters and histogram. */
    private final class Peer {
        final int node;
        final LongAdder[] verbs = new LongAdder[KINDS.length];
        final LongAdder[] bytes = new LongAdder[KINDS.length];
        final LongAdder timeouts = new LongAdder();
        final LongAdder errors = new LongAdder();
        final LongAdder reconnects = new LongAdder();
        final Recorder latency = new Recorder(3);
        private final Histogram total = new Histogram(3); // guarded by this
        private Histogram interval;                       // guarded by this

        Peer(int node) {
            this.node = node;
            for (int k = 0; k < KINDS.length; k++) {
                verbs[k] = new LongAdder();
                bytes[k] = new LongAdder();
            }
        }

        /** The totals with the latest interval folded in. */
        synchronized Histogram latency() {
            interval = latency.getIntervalHistogram(interval);
            total.add(interval);
            return total;
        }

        synchronized double quantileSeconds(double q) {
            Histogram h = latency();
            if (h.getTotalCount() == 0) {
                return 0;
            }
            long nanos = q >= 1.0 ? h.getMaxValue() : h.getValueAtPercentile(q * 100);
            return nanos / 1e9;
        }

        synchronized Snapshot snapshot() {
            Histogram h = latency();
            long[] v = new long[KINDS.length];
            long[] b = new long[KINDS.length];
            for (int k = 0; k < KINDS.length; k++) {
                v[k] = verbs[k].sum();
                b[k] = bytes[k].sum();
            }
            boolean any = h.getTotalCount() > 0;
            return new Snapshot(v, b, timeouts.sum(), errors.sum(), reconnects.sum(), inFlight.applyAsInt(node),
                    any ? h.getValueAtPercentile(50) : 0, any ? h.getValueAtPercentile(99) : 0,
                    any ? h.getMaxValue() : 0);
        }

        String describe() {
            Snapshot s = snapshot();
            StringBuilder sb = new StringBuilder();
            sb.append("verbs=").append(s.totalVerbs()).append(" (");
            for (int k = 0; k < KINDS.length; k++) {
                sb.append(k == 0 ? "" : " ").append(KINDS[k]).append(' ').append(s.verbs()[k]);
            }
            long allBytes = 0;
            for (long x : s.bytes()) {
                allBytes += x;
            }
            sb.append(") bytes=").append(allBytes)
                    .append(" timeouts=").append(s.timeouts())
                    .append(" errors=").append(s.errors())
                    .append(" reconnects=").append(s.reconnects())
                    .append(" in-flight=").append(s.inFlight())
                    .append(" latency p50=").append(micros(s.p50Nanos()))
                    .append(" p99=").append(micros(s.p99Nanos()))
                    .append(" max=").append(micros(s.maxNanos()));
            return sb.toString();
        }

        void register(MeterRegistry r) {
            Tags tags = Tags.of("transport", transport, "peer", Integer.toString(node));
            for (int k = 0; k < KINDS.length; k++) {
                Tags kind = tags.and("kind", KINDS[k]);
                FunctionCounter.builder("membus.verbs", verbs[k], LongAdder::sum).tags(kind)
                        .description("verbs completed with a result").register(r);
                FunctionCounter.builder("membus.verb.bytes", bytes[k], LongAdder::sum).tags(kind)
                        .baseUnit("bytes").description("payload bytes of completed verbs").register(r);
            }
            FunctionCounter.builder("membus.verb.timeouts", timeouts, LongAdder::sum).tags(tags)
                    .description("verbs failed by their deadline (they may have run)").register(r);
            FunctionCounter.builder("membus.verb.errors", errors, LongAdder::sum).tags(tags)
                    .description("verbs refused by the target or lost with their connection").register(r);
            FunctionCounter.builder("membus.reconnects", reconnects, LongAdder::sum).tags(tags)
                    .description("connections to the peer that came back after a loss").register(r);
            // gauges hold their object weakly: this peer, which the metrics keep, not a lambda
            Gauge.builder("membus.verbs.in.flight", this, p -> inFlight.applyAsInt(p.node)).tags(tags)
                    .description("verbs issued and not completed").register(r);
            for (double q : new double[]{0.5, 0.99, 0.999, 1.0}) {
                Gauge.builder("membus.verb.latency", this, p -> p.quantileSeconds(q))
                        .tags(tags.and("quantile", q >= 1.0 ? "max" : Double.toString(q))).baseUnit("seconds")
                        .description("verb latency since start (HdrHistogram)").register(r);
            }
        }
    }

    private static String micros(long nanos) {
        if (nanos == 0) {
            return "-";
        }
        return nanos < 10_000 ? String.format(java.util.Locale.ROOT, "%.1fus", nanos / 1e3)
                : (nanos / 1000) + "us";
    }
}
