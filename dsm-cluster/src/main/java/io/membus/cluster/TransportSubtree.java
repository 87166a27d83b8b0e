package io.membus.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;
import io.membus.core.error.DsmConfigException;
import io.membus.core.transport.TransportConfig;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The {@code membus.transports} subtree of a {@link NodeConfig}: what the user set (no
 * defaults), plus {@code <transport>.host} and {@code <transport>.secret} derived from
 * {@code membus.host} and {@code membus.secret} when the chosen transport has those keys
 * and the config leaves them unset; checked over every transport module's defaults; and
 * for each derived key, the key the user wrote, so a complaint names that one. One job:
 * deriving and checking the transport settings; the node's own keys stay in
 * {@link NodeConfig}.
 *
 * <p><b>Note:</b> immutable once built (final fields, a copied map); thread-safe, safely
 * published through {@link NodeConfig}'s final field.
 */
final class TransportSubtree {
    /** The subtree handed to the transport, with host and secret derived. */
    final Config transports;
    /** Paths (relative to membus.transports) this config derived from membus.host / membus.secret. */
    private final Map<String, String> derivedKeys;
    /** {@link #transports} over every transport module's defaults, checked. */
    final TransportConfig checked;

    /**
     * Derives and checks the subtree. The user's keys are checked before host and secret
     * join (a bad key is the user's, not derived); a bad derived value is reported under
     * {@code membus.host} / {@code membus.secret}.
     */
    TransportSubtree(Config given, Config merged, int nodeId, String transport, String host, ClusterSecret secret) {
        Config userTransports = userTransports(given, merged);
        TransportConfig.builder(nodeId).transports(userTransports).build(); // checks keys before host and secret join
        Map<String, String> derived = new LinkedHashMap<>();
        Config reference = TransportConfig.reference();
        String section = transport;
        if (reference.hasPath(section + ".host") && !userTransports.hasPath(section + ".host")) {
            derived.put(section + ".host", "membus.host");
            userTransports = userTransports.withValue(section + ".host", ConfigValueFactory.fromAnyRef(host));
        }
        if (reference.hasPath(section + ".secret") && !userTransports.hasPath(section + ".secret")) {
            derived.put(section + ".secret", secret.source().equals("membus.secret") ? "membus.secret"
                    : "membus.secret-file");
            userTransports = userTransports.withValue(section + ".secret", ConfigValueFactory.fromAnyRef(secret.value()));
        }
        this.transports = userTransports;
        this.derivedKeys = Map.copyOf(derived);
        try {
            this.checked = TransportConfig.builder(nodeId).transports(transports).build();
        } catch (DsmConfigException e) {
            throw reportedAsUserKey(e);
        }
    }

    /** The {@code membus.transports} subtree the user set (no defaults), its substitutions resolved. */
    private static Config userTransports(Config given, Config merged) {
        Config resolved = given.resolveWith(merged);
        String path = TransportConfig.ROOT;
        if (!resolved.hasPath(path)) {
            return ConfigFactory.empty();
        }
        try {
            return resolved.getConfig(path);
        } catch (ConfigException.WrongType e) {
            throw new DsmConfigException(path, resolved.getValue(path).render(),
                    "an object of transport settings, e.g. membus.transports.tcp { port = 0 }", e);
        }
    }

    /** See {@link NodeConfig#keyOfTransportSetting(String)}. */
    String keyOf(String fullKey) {
        if (fullKey.startsWith(TransportConfig.ROOT + ".")) {
            String from = derivedKeys.get(fullKey.substring(TransportConfig.ROOT.length() + 1));
            if (from != null) {
                return from;
            }
        }
        return fullKey;
    }

    /** The same complaint under the key the user wrote ({@code membus.secret}, not the tcp secret it became). */
    DsmConfigException reportedAsUserKey(DsmConfigException e) {
        String userKey = keyOf(e.key());
        return userKey.equals(e.key()) ? e : e.reportedAs(userKey);
    }
}
