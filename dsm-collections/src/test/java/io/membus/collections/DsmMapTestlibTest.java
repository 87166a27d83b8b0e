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
 * (local transport). The map is created once on node 1 and opened on node 2, whose
 * instance the suite uses; each test starts from a cleared map, so the suite does not
 * rebuild the cluster between its few thousand tests. A JUnit 3 suite, run through
 * junit-vintage-engine.
 */
public class DsmMapTestlibTest {
    private static MapCluster cluster;
    private static DsmMap<String, String> map;

    public static Test suite() {
        TestSuite suite = ConcurrentMapTestSuiteBuilder.using(new TestStringMapGenerator() {
                    @Override
                    protected Map<String, String> create(Map.Entry<String, String>[] entries) {
                        DsmMap<String, String> m = map();
                        m.clear();
                        for (Map.Entry<String, String> e : entries) {
                            m.put(e.getKey(), e.getValue());
                        }
                        return m;
                    }
                })
                .named("DsmMap over a three-node local cluster")
                .withFeatures(MapFeature.GENERAL_PURPOSE, CollectionFeature.SUPPORTS_ITERATOR_REMOVE,
                        CollectionSize.ANY)
                .createTestSuite();
        return new TestSetup(suite) {
            @Override
            protected void tearDown() {
                if (cluster != null) {
                    cluster.close();
                    cluster = null;
                    map = null;
                }
            }
        };
    }

    private static synchronized DsmMap<String, String> map() {
        if (map == null) {
            cluster = new MapCluster("local", 3, 16 << 20);
            DsmMap<String, String> created = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.strings(),
                    DsmMapOptions.defaults().initialSlots(16).grace(Duration.ofMillis(50)));
            map = DsmMap.open(cluster.node(2), created.rootPtr(), Codecs.strings(), Codecs.strings());
        }
        return map;
    }
}
