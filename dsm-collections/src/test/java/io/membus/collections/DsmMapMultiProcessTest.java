package io.membus.collections;

import io.membus.codec.Codecs;
import io.membus.core.SegmentDescriptor;
import io.membus.core.test.TestJvm;
import io.membus.core.directory.PeerInfo;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One map shared by three processes over {@code shm} and over {@code tcp}: this JVM runs two nodes (the
 * heaps), two child JVMs open the map by its root pointer. Every process adds to the
 * same counter keys with {@code merge} at once; the totals must be exact, and every
 * process's inserts must be visible to the others.
 */
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
class DsmMapMultiProcessTest {
    private MapCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    void processesShareOneMapWithExactMergeTotalsOverShm() throws Exception {
        run("shm");
    }

    @Test
    void processesShareOneMapWithExactMergeTotalsOverTcp() throws Exception {
        run("tcp");
    }

    private void run(String transport) throws Exception {
        cluster = new MapCluster(transport, 2, 32 << 20);
        DsmMap<String, Long> map = DsmMap.create(cluster.node(1), Codecs.strings(), Codecs.longs(),
                DsmMapOptions.defaults().initialSlots(16).grace(Duration.ofMillis(200)));
        DsmMap<String, Long> two = DsmMap.open(cluster.node(2), map.rootPtr(), Codecs.strings(), Codecs.longs());
        for (long k = 0; k < 100; k++) {
            map.put("parent-" + k, k);
        }
        int rounds = 300;
        int children = 2;
        try (TestJvm jvm = new TestJvm()) {
            for (int i = 0; i < children; i++) {
                List<String> args = new ArrayList<>(List.of(transport, String.valueOf(cluster.shmDir),
                        Integer.toString(20 + i),
                        Long.toString(map.rootPtr()), Integer.toString(rounds)));
                for (int node : cluster.transports.keySet()) {
                    PeerInfo p = cluster.transports.get(node).self();
                    SegmentDescriptor d = cluster.heaps.get(node);
                    args.add(p.nodeId() + "," + p.incarnation() + "," + p.address() + "," + d.index() + "," + d.size()
                            + "," + d.flags() + "," + d.remoteKey());
                }
                jvm.start(MapChild.class, args);
            }
            for (int r = 0; r < rounds; r++) {
                for (int c = 0; c < 4; c++) {
                    (r % 2 == 0 ? map : two).merge("counter-" + c, 1L, Long::sum);
                }
            }
            for (int i = 0; i < children; i++) {
                assertEquals(0, jvm.await(i, 120), "child " + i + " failed:\n" + jvm.output(i));
                assertTrue(jvm.output(i).contains("DONE"), jvm.output(i));
            }
        }
        for (int c = 0; c < 4; c++) {
            assertEquals((long) rounds * (children + 1), two.get("counter-" + c), "counter-" + c + " across processes");
        }
        for (int i = 0; i < children; i++) {
            for (long k = 0; k < 100; k++) {
                assertEquals(k, map.get("child-" + (20 + i) + "-" + k), "child " + (20 + i) + "'s key " + k);
            }
        }
        assertEquals(100 + 4 + children * 100, two.size());
    }
}
