package io.membus.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import io.membus.core.Access;
import io.membus.core.RemotePtr;
import io.membus.core.config.HostPort;
import io.membus.core.config.KnownKeys;
import io.membus.core.error.DsmConfigException;
import io.membus.core.replication.ReplicationConfig;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.TransportProvider;
import io.membus.core.transport.Transports;

import org.slf4j.LoggerFactory;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static io.membus.cluster.ConfigValues.bad;
import static io.membus.cluster.ConfigValues.bool;
import static io.membus.cluster.ConfigValues.bytes;
import static io.membus.cluster.ConfigValues.duration;
import static io.membus.cluster.ConfigValues.intIn;
import static io.membus.cluster.ConfigValues.render;
import static io.membus.cluster.ConfigValues.size;
import static io.membus.cluster.ConfigValues.string;

/**
 * A node's settings, read from the {@code membus} section of a HOCON config
 * ({@code reference.conf} of this module holds and documents every default). Every
 * value is checked here, so a bad config fails before anything starts, with a
 * {@link DsmConfigException} naming the key ({@code membus.segments.size}), the value
 * and what is allowed.
 *
 * <p>The config's own {@code pekko} section, if any, is kept ({@link #raw()}) so tests
 * and operators can tune Pekko directly; Membus' derived settings (address, seeds,
 * roles, failure detection) are laid over it in {@link DsmNode}.
 *
 * <p>This class holds which keys a node has, their cross-checks and where the text comes
 * from (file, text, {@code application.conf} with system properties); the typed read of one
 * key is {@link ConfigValues}', the {@code membus.transports} subtree with its derived host
 * and secret is {@link TransportSubtree}'s.
 *
 * <p><b>Note:</b> immutable (final fields, copied lists); thread-safe, safely published.
 */
public final class NodeConfig {
    private final Config raw;
    private final int nodeId;
    private final String clusterName;
    private final String host;
    private final int port;
    private final List<String> seedNodes;
    private final String secret;
    private final ClusterSecret clusterSecret;
    private final boolean authenticate;
    private final String transport;
    /** The {@code membus.transports} subtree, with host and secret derived, and its check. */
    private final TransportSubtree transportSubtree;
    private final Duration operationTimeout;
    private final Tls tls;
    private final Duration connectTimeout;
    private final Duration startTimeout;
    private final int segmentCount;
    private final boolean client;
    private final long segmentSize;
    private final int segmentAccess;
    private final boolean fileBacked;
    private final boolean metricsJmx;
    private final boolean prometheusEnabled;
    private final String prometheusHost;
    private final int prometheusPort;
    private final Path segmentDir;
    private final List<Integer> heapSegments;
    private final int heapChunkSize;
    private final Duration heartbeatInterval;
    private final Duration acceptableHeartbeatPause;
    private final double phiThreshold;
    private final Duration stableAfter;
    private final Duration gossipInterval;
    /** {@code membus.replication} as configured (a client ignores it: see {@link #replication()}). */
    private final ReplicationConfig replication;
    /** {@code membus.replication.leave-timeout}: how long a graceful leave hands its groups over. */
    private final Duration replicationLeaveTimeout;

    private NodeConfig(Config config, Config given) {
        this.raw = given;
        Config m = config.getConfig("membus");
        this.nodeId = intIn(m, "node-id", 1, RemotePtr.MAX_NODE_ID, "an integer 1.." + RemotePtr.MAX_NODE_ID
                + " unique in the cluster (there is no default: set membus.node-id)");
        this.clusterName = string(m, "cluster-name");
        if (!clusterName.matches("[A-Za-z0-9][A-Za-z0-9_-]*")) {
            throw bad("cluster-name", clusterName, "letters, digits, '-' and '_', starting with a letter or digit");
        }
        this.host = string(m, "host");
        if (host.isBlank()) {
            throw bad("host", host, "a host name or IP address this node's members can reach, e.g. 127.0.0.1");
        }
        this.port = intIn(m, "port", 0, 65535, "a TCP port 0..65535 (0: ephemeral)");
        this.seedNodes = new ArrayList<>();
        try {
            for (String s : m.getStringList("seed-nodes")) {
                HostPort.parse("membus.seed-nodes", s);
                seedNodes.add(s.trim());
            }
        } catch (ConfigException.WrongType e) {
            throw bad("seed-nodes", m.getValue("seed-nodes").render(), "a list of \"host:port\" strings", e);
        }
        this.clusterSecret = ClusterSecret.resolve(string(m, "secret"), string(m, "secret-file"));
        this.secret = clusterSecret.value();
        this.authenticate = bool(m, "security.authenticate");
        this.transport = string(m, "transport");
        List<String> found = Transports.providers().stream().map(TransportProvider::name).sorted().toList();
        if (!found.contains(transport)) {
            throw bad("transport", transport, "one of " + String.join(", ", found)
                    + " (the transports on the class path; add a transport's module, e.g. dsm-transport-rdma, to use it)");
        }
        this.transportSubtree = new TransportSubtree(given, config, nodeId, transport, host, clusterSecret);
        this.operationTimeout = duration(m, "operation-timeout");
        this.connectTimeout = duration(m, "connect-timeout");
        this.startTimeout = duration(m, "start-timeout");
        this.segmentCount = intIn(m, "segments.count", 0, RemotePtr.MAX_SEGMENT_INDEX + 1,
                "an integer 0.." + (RemotePtr.MAX_SEGMENT_INDEX + 1));
        this.segmentSize = bytes(m, "segments.size", 4096, RemotePtr.MAX_OFFSET + 1);
        String access = string(m, "segments.access");
        try {
            this.segmentAccess = Access.parse(access);
        } catch (IllegalArgumentException e) {
            throw bad("segments.access", access, "a non-empty mix of the letters r (read), w (write), a (atomics)", e);
        }
        this.fileBacked = bool(m, "segments.file-backed");
        this.metricsJmx = bool(m, "metrics.jmx");
        this.prometheusEnabled = bool(m, "metrics.prometheus.enabled");
        this.prometheusHost = string(m, "metrics.prometheus.host");
        if (prometheusHost.isBlank()) {
            throw bad("metrics.prometheus.host", "\"\"", "the local address the scrape endpoint listens on, e.g."
                    + " 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)");
        }
        this.prometheusPort = intIn(m, "metrics.prometheus.port", 0, 65535,
                "a TCP port 1..65535 for the scrape endpoint, or 0 for an ephemeral one");
        this.segmentDir = Path.of(string(m, "segments.dir"));
        String role = string(m, "role");
        switch (role) {
            case "auto" -> this.client = segmentCount == 0;
            case "member" -> this.client = false;
            case "client" -> this.client = true;
            default -> throw bad("role", role, "member, client or auto (client when membus.segments.count = 0)");
        }
        if (client && segmentCount > 0) {
            throw bad("role", role, "member or auto: a client exports no memory, and this node has membus.segments.count="
                    + segmentCount);
        }
        String heapAllowed = "a list of this node's segment indexes 0.." + (segmentCount - 1)
                + " (membus.segments.count=" + segmentCount + "), each once; [] for no heap";
        this.heapSegments = new ArrayList<>();
        try {
            for (int i : m.getIntList("heap.segments")) {
                if (i < 0 || i >= segmentCount || heapSegments.contains(i)) {
                    throw bad("heap.segments", m.getValue("heap.segments").render(), heapAllowed);
                }
                heapSegments.add(i);
            }
        } catch (ConfigException e) {
            throw bad("heap.segments", render(m, "heap.segments"), heapAllowed, e);
        }
        long chunk;
        try {
            chunk = m.getBytes("heap.chunk-size");
        } catch (ConfigException e) {
            throw bad("heap.chunk-size", render(m, "heap.chunk-size"), "a power of two 4KiB..1GiB", e);
        }
        if (chunk < 4096 || chunk > (1L << 30) || Long.bitCount(chunk) != 1) {
            throw bad("heap.chunk-size", chunk, "a power of two 4KiB..1GiB");
        }
        this.heapChunkSize = (int) chunk;
        this.tls = Tls.read(m);
        this.heartbeatInterval = duration(m, "failure-detection.heartbeat-interval");
        this.acceptableHeartbeatPause = duration(m, "failure-detection.acceptable-heartbeat-pause");
        this.stableAfter = duration(m, "failure-detection.stable-after");
        this.gossipInterval = duration(m, "failure-detection.gossip-interval");
        try {
            this.phiThreshold = m.getDouble("failure-detection.threshold");
        } catch (ConfigException.WrongType e) {
            throw bad("failure-detection.threshold", m.getValue("failure-detection.threshold").render(),
                    "a number above 1, e.g. 8.0", e);
        }
        if (!(phiThreshold > 1.0)) {
            throw bad("failure-detection.threshold", phiThreshold, "a number above 1, e.g. 8.0");
        }
        this.replication = readReplication(m);
        this.replicationLeaveTimeout = duration(m, "replication.leave-timeout");
    }

    /** {@code membus.replication}: each key's type here, its range in {@link ReplicationConfig}. */
    private static ReplicationConfig readReplication(Config m) {
        int backups = intIn(m, "replication.backups", Integer.MIN_VALUE, Integer.MAX_VALUE,
                "an integer 0.." + ReplicationConfig.MAX_BACKUPS);
        int windowEffects = intIn(m, "replication.window-effects", Integer.MIN_VALUE, Integer.MAX_VALUE,
                "an integer >= 1");
        long windowBytes = size(m, "replication.window-bytes", "a size >= 1 byte (HOCON sizes such as 64MiB work)");
        long chunk = size(m, "replication.chunk", "a size 4KiB..16MiB, a multiple of 8");
        if (chunk > Integer.MAX_VALUE) {
            throw bad("replication.chunk", chunk, "a size 4KiB..16MiB, a multiple of 8");
        }
        long rate = size(m, "replication.rereplication-rate", "bytes per second >= 0 (HOCON sizes: 64MiB is 64 MiB/s;"
                + " 0: no cap)");
        return new ReplicationConfig(backups, windowEffects, windowBytes, (int) chunk, rate);
    }

    /** The subtree under {@code membus} whose keys {@code TransportConfig} checks. */
    private static final String TRANSPORTS_KEY = "transports";

    /** A key that moved: refused with where it went (before the unknown-key check, which cannot say that). */
    private static void refuseMovedKeys(Config user) {
        if (user.hasPath("membus.transport-properties")) {
            throw bad("transport-properties", user.getValue("membus.transport-properties").render(), "nothing:"
                    + " transport settings moved to membus.transports.<transport> { ... }, e.g. membus.transports.tcp.port"
                    + " = 0 for what was membus.transport-properties { \"tcp.port\" = 0 } (each transport module's"
                    + " reference.conf lists its keys)");
        }
    }

    /**
     * Reads {@code config} (its {@code membus} section over this module's defaults).
     *
     * @throws DsmConfigException for a bad value, or a key under {@code membus} that no
     *         {@code reference.conf} on the class path defines (naming the closest known key
     *         and the file and line it was set at)
     */
    public static NodeConfig from(Config config) {
        try {
            Config reference = ConfigFactory.defaultReference(NodeConfig.class.getClassLoader());
            Config merged = config.withFallback(reference).resolve();
            Config user = config.resolveWith(merged);
            refuseMovedKeys(user);
            KnownKeys.check(user, reference, java.util.Set.of(TRANSPORTS_KEY)); // TransportConfig checks those
            return new NodeConfig(merged, config);
        } catch (ConfigException e) {
            throw new DsmConfigException(e.origin() == null ? "membus" : String.valueOf(e.origin().description()),
                    "<unreadable>", "valid HOCON: " + e.getMessage(), e);
        }
    }

    /** Reads a HOCON file (its {@code membus} section), over this module's defaults. */
    public static NodeConfig load(Path file) {
        if (!Files.isRegularFile(file)) {
            throw new DsmConfigException("config file", file, "a readable HOCON file (e.g. node.conf with a membus { } section)");
        }
        try {
            return from(ConfigFactory.parseFile(file.toFile()));
        } catch (ConfigException e) {
            throw new DsmConfigException("config file", file, "valid HOCON: " + e.getMessage(), e);
        }
    }

    /** {@code application.conf} (and system properties) over this module's defaults. */
    public static NodeConfig load() {
        return from(knownSystemProperties().withFallback(ConfigFactory.defaultApplication(
                NodeConfig.class.getClassLoader())));
    }

    /**
     * The JVM's system properties without the {@code membus.*} ones no {@code reference.conf}
     * defines: system properties are one namespace for the whole JVM (a test's
     * {@code -Dmembus.seed}, the command line's {@code -Dmembus.debug}), so those are logged
     * and left out rather than refused; keys in a config file or text are refused.
     */
    private static Config knownSystemProperties() {
        Config sys = ConfigFactory.systemProperties();
        Config reference = ConfigFactory.defaultReference(NodeConfig.class.getClassLoader());
        for (String path : KnownKeys.unknownPaths(sys, reference, java.util.Set.of(TRANSPORTS_KEY))) {
            LoggerFactory.getLogger(NodeConfig.class).warn("system property {} is not a membus setting: ignored"
                    + " (see the reference.conf files of the membus modules for the keys)", path);
            sys = sys.withoutPath(path);
        }
        return sys;
    }

    /** Parses HOCON text, e.g. {@code "membus.node-id = 3"}. */
    public static NodeConfig parse(String hocon) {
        try {
            return from(ConfigFactory.parseString(hocon));
        } catch (ConfigException e) {
            throw new DsmConfigException("config", "<text>", "valid HOCON: " + e.getMessage(), e);
        }
    }

    /** The config as given (without defaults), including any {@code pekko} section. */
    public Config raw() {
        return raw;
    }

    public int nodeId() {
        return nodeId;
    }

    public String clusterName() {
        return clusterName;
    }

    public String host() {
        return host;
    }

    public int port() {
        return port;
    }

    public List<String> seedNodes() {
        return List.copyOf(seedNodes);
    }

    /**
     * The cluster secret: {@code membus.secret}, or when that is empty the content of
     * {@code membus.secret-file} (made on first use). Never printed.
     */
    public String secret() {
        return secret;
    }

    /** The cluster secret and where it came from (for logs), with its derived keys. */
    ClusterSecret clusterSecret() {
        return clusterSecret;
    }

    /**
     * {@code membus.security.authenticate}: whether membership runs over TLS with
     * credentials made from the cluster secret (when {@code membus.tls} brings no
     * certificates of its own). Turning it off is logged at WARN at every start.
     */
    public boolean authenticate() {
        return authenticate;
    }

    /** How membership traffic is protected, as configured. */
    public Membership membership() {
        return tls.enabled() ? Membership.TLS_STORES : authenticate ? Membership.SECRET_TLS : Membership.OFF;
    }

    /** How membership (Pekko Artery) traffic is protected. */
    public enum Membership {
        /** Mutual TLS with credentials made from the cluster secret (the default). */
        SECRET_TLS,
        /** Mutual TLS with the certificates of {@code membus.tls} (the user's own PKI). */
        TLS_STORES,
        /** Neither encrypted nor authenticated ({@code membus.security.authenticate = off}). */
        OFF
    }

    public String transport() {
        return transport;
    }

    /**
     * The {@code membus.transports} subtree handed to the transport ({@link
     * TransportConfig.Builder#transports}): what the config sets, plus
     * {@code <transport>.host} and {@code <transport>.secret} from {@code membus.host} and
     * {@code membus.secret} when the transport has those keys and the config leaves them
     * unset. Defaults are not included (the transport modules' {@code reference.conf} add them).
     */
    public Config transports() {
        return transportSubtree.transports;
    }

    /** {@link #transports()} over every transport module's defaults: what the transport will read. */
    public TransportConfig transportSettings() {
        return transportSubtree.checked;
    }

    /**
     * Where the user sets a transport setting given by its full key
     * ({@code membus.transports.tcp.secret}): {@code membus.secret} / {@code membus.host}
     * when the value came from them, else the key itself.
     */
    public String keyOfTransportSetting(String fullKey) {
        return transportSubtree.keyOf(fullKey);
    }

    /** The same complaint under the key the user wrote ({@code membus.secret}, not the tcp secret it became). */
    DsmConfigException reportedAsUserKey(DsmConfigException e) {
        return transportSubtree.reportedAsUserKey(e);
    }

    /** Membership TLS ({@code membus.tls}): Pekko Artery over TLS with mutual authentication. */
    public Tls tls() {
        return tls;
    }

    public Duration operationTimeout() {
        return operationTimeout;
    }

    public Duration connectTimeout() {
        return connectTimeout;
    }

    public Duration startTimeout() {
        return startTimeout;
    }

    /**
     * Whether this node is a client: it exports no memory, never counts in the
     * split-brain resolver's decision and never arbitrates names, so clients coming and
     * going can never make the memory nodes down themselves.
     */
    public boolean isClient() {
        return client;
    }

    public int segmentCount() {
        return segmentCount;
    }

    public long segmentSize() {
        return segmentSize;
    }

    public int segmentAccess() {
        return segmentAccess;
    }

    /** Segment indexes formatted as allocator heaps; empty when this node runs no allocator. */
    public List<Integer> heapSegments() {
        return List.copyOf(heapSegments);
    }

    public int heapChunkSize() {
        return heapChunkSize;
    }

    /** {@code membus.metrics.jmx}: whether the node's metrics are exported as JMX MBeans (default false). */
    public boolean metricsJmx() {
        return metricsJmx;
    }

    /** {@code membus.metrics.prometheus.enabled}: whether the node serves a Prometheus scrape endpoint. */
    public boolean prometheusEnabled() {
        return prometheusEnabled;
    }

    /** {@code membus.metrics.prometheus.host}: the address the scrape endpoint listens on. */
    public String prometheusHost() {
        return prometheusHost;
    }

    /** {@code membus.metrics.prometheus.port}: its port (0: an ephemeral one, see {@link DsmNode#prometheusAddress()}). */
    public int prometheusPort() {
        return prometheusPort;
    }

    public boolean fileBacked() {
        return fileBacked;
    }

    public Path segmentDir() {
        return segmentDir;
    }

    public Duration heartbeatInterval() {
        return heartbeatInterval;
    }

    public Duration acceptableHeartbeatPause() {
        return acceptableHeartbeatPause;
    }

    public double phiThreshold() {
        return phiThreshold;
    }

    public Duration stableAfter() {
        return stableAfter;
    }

    public Duration gossipInterval() {
        return gossipInterval;
    }

    /**
     * {@code membus.replication} as this node applies it: what the config says on a memory
     * node; on a client ({@link #isClient()}), which holds no copies, the same with
     * {@code backups = 0} (a client ignores the setting: it is neither compared at join nor
     * refused on a transport that cannot replicate).
     */
    public ReplicationConfig replication() {
        return client ? replication.withBackups(0) : replication;
    }

    /**
     * {@code membus.replication.leave-timeout}: the most a graceful leave ({@code DsmNode.close()})
     * waits for its groups' copies to get in sync and hands the groups over to them
     * (docs/replication.md §17.9); past it the node leaves anyway and its copies take over
     * once membership has removed it.
     */
    public Duration replicationLeaveTimeout() {
        return replicationLeaveTimeout;
    }

    /** {@code membus.replication} exactly as configured, also on a client. */
    public ReplicationConfig configuredReplication() {
        return replication;
    }

    @Override
    public String toString() {
        return "NodeConfig{node-id=" + nodeId + ", cluster-name=" + clusterName + ", host=" + host + ", port=" + port
                + ", seed-nodes=" + seedNodes + ", secret=" + (secret.isEmpty() ? "<none>" : "<hidden>")
                + ", transport=" + transport + ", segments=" + segmentCount + "x" + segmentSize + " "
                + Access.toString(segmentAccess) + (fileBacked ? " file-backed" : "") + "}";
    }

    /**
     * {@code membus.tls}: membership traffic (Pekko Artery) over TLS with mutual
     * authentication. Both stores are PKCS12 (or JKS) files; every node presents the
     * key in its key store and accepts peers whose certificate its trust store vouches
     * for, so only holders of a cluster certificate can join or talk to members.
     *
     * <p><b>Note:</b> immutable; thread-safe.
     */
    public record Tls(boolean enabled, String keyStore, String keyStorePassword, String trustStore,
                      String trustStorePassword, String protocol) {

        static Tls read(Config m) {
            boolean enabled = bool(m, "tls.enabled");
            Tls t = new Tls(enabled, string(m, "tls.key-store"), string(m, "tls.key-store-password"),
                    string(m, "tls.trust-store"), string(m, "tls.trust-store-password"), string(m, "tls.protocol"));
            if (enabled) {
                for (String[] store : new String[][] {{"tls.key-store", t.keyStore}, {"tls.trust-store", t.trustStore}}) {
                    if (store[1].isEmpty() || !Files.isReadable(Path.of(store[1]))) {
                        throw bad(store[0], store[1], "a readable PKCS12 or JKS file (membus.tls.enabled = true;"
                                + " see docs/cluster.md, \"Membership over TLS\")");
                    }
                }
                if (!t.protocol.equals("TLSv1.3") && !t.protocol.equals("TLSv1.2")) {
                    throw bad("tls.protocol", t.protocol, "TLSv1.3 or TLSv1.2");
                }
            }
            return t;
        }

        /** The Artery settings of this TLS config (empty when disabled). */
        public Map<String, Object> arterySettings() {
            Map<String, Object> a = new LinkedHashMap<>();
            if (!enabled) {
                return a;
            }
            String engine = "pekko.remote.artery.ssl.config-ssl-engine.";
            a.put("pekko.remote.artery.transport", "tls-tcp");
            a.put("pekko.remote.artery.ssl.ssl-engine-provider", "org.apache.pekko.remote.artery.tcp.ConfigSSLEngineProvider");
            a.put(engine + "key-store", keyStore);
            a.put(engine + "key-store-password", keyStorePassword);
            a.put(engine + "key-password", keyStorePassword);
            a.put(engine + "trust-store", trustStore);
            a.put(engine + "trust-store-password", trustStorePassword);
            a.put(engine + "protocol", protocol);
            a.put(engine + "enabled-algorithms", protocol.equals("TLSv1.3")
                    ? List.of("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384")
                    : List.of("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"));
            a.put(engine + "require-mutual-authentication", "on");
            a.put(engine + "hostname-verification", "off");
            return a;
        }

        @Override
        public String toString() {
            return "Tls[enabled=" + enabled + ", keyStore=" + keyStore + ", trustStore=" + trustStore + ", protocol="
                    + protocol + "]"; // never the passwords
        }
    }
}
