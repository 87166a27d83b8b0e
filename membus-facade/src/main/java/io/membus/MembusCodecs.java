package io.membus;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import io.membus.cluster.ClusterFacts;
import io.membus.cluster.DsmNode;
import io.membus.codec.CodecRegistry;
import io.membus.core.error.DsmConfigException;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Builds a node's {@link CodecRegistry} (classes given in code, then
 * {@code membus.codec.classes}) and checks it against the other members' before the
 * node serves: a node that registers any class publishes its registration lines as
 * the cluster fact {@value #FACT}; a node whose lines differ from a member's is
 * refused with the first difference. Nodes that register no class of their own (memory
 * nodes that never decode, {@code membus node}) publish nothing and are not compared.
 *
 * <p>Checked twice, before and after publishing (reads and writes go to a majority):
 * of two nodes starting at once with different lists, the one whose second read begins
 * after the other's publication completed is refused.
 *
 * <p><b>Note:</b> stateless; called once per {@link Membus} on its constructing thread.
 */
final class MembusCodecs {
    static final String KEY = "membus.codec.classes";
    static final String FACT = "codec-registrations";

    private MembusCodecs() {
    }

    static CodecRegistry registry(DsmNode node, CodecRegistry.Builder code) {
        Config raw = node.config().raw().withFallback(ConfigFactory.defaultReference(Membus.class.getClassLoader()));
        List<String> names;
        try {
            names = raw.getStringList(KEY);
        } catch (ConfigException e) {
            throw new DsmConfigException(KEY, raw.hasPath(KEY) ? raw.getValue(KEY).render() : "(missing)", "a list of class names, e.g. [\"com.acme.Order\","
                    + " \"com.acme.Order$Status\"] (docs/codecs.md): " + e.getMessage(), e);
        }
        ClassLoader loader = Thread.currentThread().getContextClassLoader() != null
                ? Thread.currentThread().getContextClassLoader() : Membus.class.getClassLoader();
        CodecRegistry registry = (code != null ? code : CodecRegistry.builder()).registerNames(names, loader, KEY).build();
        if (registry.hasUserClasses()) {
            ClusterFacts facts = node.facts();
            compare(registry, facts.read(FACT));
            facts.publish(FACT, String.join("\n", registry.lines()));
            try {
                compare(registry, facts.read(FACT));
            } catch (RuntimeException e) {
                try {
                    facts.remove(FACT);
                } catch (RuntimeException suppressed) {
                    e.addSuppressed(suppressed);
                }
                throw e;
            }
        }
        return registry;
    }

    private static void compare(CodecRegistry registry, Map<Integer, String> members) {
        members.forEach((id, text) -> registry.checkSameAs(Arrays.asList(text.split("\n")), "node " + id));
    }
}
