package io.membus.collections;

import io.membus.codec.Codecs;
import io.membus.core.SegmentDescriptor;
import io.membus.core.test.TestJvm;
import io.membus.core.directory.PeerInfo;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The counter, the lock and the queue shared by three processes over {@code shm} and over
 * {@code tcp} (127.0.0.1; this JVM's nodes on ephemeral ports, each child on a free port
 * it is given so that every process can list the others as members):
 * this JVM runs two nodes (the heaps and the roots), two child JVMs open the
 * structures by name. Counts are exact, lock holders never overlap (an unprotected
 * read-then-write inside the lock loses no update), and every element the children
 * put is taken here exactly once, in each child's order.
 */
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
class CollectionsMultiProcessTest {
    /** The children's incarnation, so that this JVM can list them as live members before they start. */
    static final long CHILD_INCARNATION = 7;

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void processesShareCounterLockAndQueue(String transport) throws Exception {
        try (CollCluster cluster = new CollCluster(transport, 2)) {
            DsmCollections one = cluster.node(1);
            DsmCollections two = cluster.node(2);
            DsmAtomicLong hits = one.atomicLong("hits");
            DsmLock mutex = two.lock("mutex");
            DsmAtomicLong unprotected = two.atomicLong("unprotected");
            DsmQueue<Long> jobs = one.queue("jobs", Codecs.longs(), 8);
            int rounds = 300;
            int children = 2;
            List<List<Long>> received = List.of(new ArrayList<>());
            List<String> childAddresses = new ArrayList<>();
            for (int i = 0; i < children; i++) {
                childAddresses.add(transport.equals("shm") ? cluster.shmDir.toString() : "127.0.0.1:" + freePort());
                // live members for this JVM's nodes: a slot or lock a child holds is not a dead node's
                cluster.directory.addMember(new PeerInfo(20 + i, CHILD_INCARNATION, childAddresses.get(i)));
            }
            long start = System.nanoTime();
            try (TestJvm jvm = new TestJvm()) {
                for (int i = 0; i < children; i++) {
                    String address = childAddresses.get(i);
                    List<String> args = new ArrayList<>(List.of(transport, String.valueOf(cluster.shmDir),
                            Integer.toString(20 + i),
                            transport.equals("tcp")
                                    ? Integer.toString(io.membus.core.config.HostPort.parse("peer address", address).port())
                                    : "0",
                            Integer.toString(rounds), Long.toString(hits.root().block().ptr()),
                            Long.toString(mutex.root().block().ptr()), Long.toString(jobs.root().block().ptr()),
                            Long.toString(unprotected.root().block().ptr())));
                    for (int node : cluster.transports.keySet()) {
                        PeerInfo p = cluster.transports.get(node).self();
                        SegmentDescriptor d = cluster.heaps.get(node);
                        args.add(p.nodeId() + "," + p.incarnation() + "," + p.address() + "," + d.index() + ","
                                + d.size() + "," + d.flags() + "," + d.remoteKey());
                    }
                    for (int j = 0; j < children; j++) {
                        args.add("peer:" + (20 + j) + ":" + childAddresses.get(j));
                    }
                    jvm.start(CollChild.class, args);
                }
                for (int r = 0; r < rounds; r++) {
                    hits.incrementAndGet();
                    mutex.lock();
                    try {
                        unprotected.set(unprotected.get() + 1);
                    } finally {
                        mutex.unlock();
                    }
                }
                for (int k = 0; k < children * rounds; k++) {
                    Long e = jobs.poll(60, TimeUnit.SECONDS);
                    assertTrue(e != null, "element " + k + " not taken in time; children:\n" + jvm.output(0)
                            + "\n" + jvm.output(1));
                    received.get(0).add(e);
                }
                for (int i = 0; i < children; i++) {
                    assertEquals(0, jvm.await(i, 120), "child " + i + " failed:\n" + jvm.output(i));
                    assertTrue(jvm.output(i).contains("DONE"), jvm.output(i));
                }
            }
            System.out.printf("MEASURE %s: 3 processes x %d rounds (increment, lock + read-write + unlock, one"
                    + " queue element per child round) in %d ms, child JVM start-up included%n", transport, rounds,
                    (System.nanoTime() - start) / 1_000_000);
            assertEquals((long) rounds * (children + 1), two.atomicLong("hits").get());
            assertEquals((long) rounds * (children + 1), one.atomicLong("unprotected").get());
            int[] offered = new int[20 + children];
            for (int i = 0; i < children; i++) {
                offered[20 + i] = rounds;
            }
            assertEquals(List.of(), DeliveryCheck.problems(offered, received));
            assertEquals(0, jobs.size());
        }
    }

    /** A port free on 127.0.0.1 now (from the ephemeral range), for a child to serve tcp on. */
    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }
}
