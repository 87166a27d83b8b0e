package io.membus.collections;

import com.google.common.collect.testing.ConcurrentMapTestSuiteBuilder;
import com.google.common.collect.testing.TestStringMapGenerator;
import com.google.common.collect.testing.features.CollectionFeature;
import com.google.common.collect.testing.features.CollectionSize;
import com.google.common.collect.testing.features.MapFeature;
import io.membus.codec.Codecs;
import junit.extensions.TestSetup;
import junit.framework.Test;
import junit.framework.TestSuite;

import java.time.Duration;
import java.util.Map;

/**
 * Guava testlib's {@code ConcurrentMapTestSuiteBuilder} — the suite Guava runs on its
 * own concurrent maps — over a {@link DsmMap} of a three-node cluster in this JVM
 * (local transport), twice: through node 2, a memory node, and through node 3, a node
 * without a heap (a client: its puts place their entry on the table's node and write it
 * in the round trip that reads the window, issue 28). The map is created once on node 1 and opened on node 2, whose
 * instance the suite uses; each test starts from a cleared map, so the suite does not
 * rebuild the cluster between its few thousand tests. A JUnit 3 suite, run through
 * junit-vintage-engine.
 */
public class DsmMapTestlibTest {
    private static MapCluster cluster;
    private static DsmMap<String, String> map;
    private static DsmMap<String, String> onClient;

    public static Test suite() {
        TestSuite suite = new TestSuite("DsmMap");
        suite.addTest(suite(false));
        suite.addTest(suite(true));
        return new TestSetup(suite) {
            @Override
            protected void tearDown() {
                if (cluster != null) {
                    cluster.close();
                    cluster = null;
                    map = null;
                    onClient = null;
                }
            }
        };
    }

    /** The suite through node 2 (a memory node) or node 3 (a client). */
    private static TestSuite suite(boolean client) {
        return ConcurrentMapTestSuiteBuilder.using(new TestStringMapGenerator() {
                    @Override
                    protected Map<String, String> create(Map.Entry<String, String>[] entries) {
                        DsmMap<String, String> m = map(client);
                        m.clear();
                        for (Map.Entry<String, String> e : entries) {
                            m.put(e.getKey(), e.getValue());
                        }
                        return m;
                    }
                })
                .named("DsmMap over a three-node local cluster" + (client ? ", through a client" : ""))
                .withFeatures(MapFeature.GENERAL_PURPOSE, CollectionFeature.SUPPORTS_ITERATOR_REMOVE,
                        CollectionSize.ANY)
                .createTestSuite();
    }

    private static synchronized DsmMap<String, String> map(boolean client) {
        if (map == null) {
            cluster = new MapCluster("local", 3, 16 << 20, Duration.ofSeconds(10), (id, t) -> t, id -> id == 3);
            DsmMap<String, String> created = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.strings(),
                    DsmMapOptions.defaults().initialSlots(16).grace(Duration.ofMillis(50)));
            map = DsmMap.open(cluster.node(2), created.rootPtr(), Codecs.strings(), Codecs.strings());
            onClient = DsmMap.open(cluster.node(3), created.rootPtr(), Codecs.strings(), Codecs.strings());
        }
        return client ? onClient : map;
    }
}
