package io.membus;

import com.typesafe.config.ConfigFactory;
import io.membus.codec.Codecs;
import io.membus.coherence.RemoteRef;
import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmLock;
import io.membus.collections.DsmLongArray;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmQueue;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.ErrorCode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * After {@code close()}, every public call on a {@link Membus}, on its node and on the
 * structures it handed out before fails at once with {@link DsmClosedException} naming
 * what was closed: never a timeout, an unavailable node ("safe to retry") or a
 * configuration error. Two nodes over tcp; node 2 stays up, so node 1's handles that
 * point at node 2's memory would reach a live node if the close were not seen.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class MembusClosedTest {
    /** "At once": far below the operation timeout (5 s) and any Pekko ask. */
    private static final long AT_ONCE_MILLIS = 1000;

    private static String tcpConfig(int id, int port, int seed) {
        return MembusTest.FAST + "membus.node-id = " + id + "\n"
                + "membus.cluster-name = closed-test\n"
                + "membus.host = \"127.0.0.1\"\n"
                + "membus.port = " + port + "\n"
                + "membus.seed-nodes = [\"127.0.0.1:" + seed + "\"]\n"
                + "membus.transport = tcp\n"
                + "membus.secret = \"closed-test-secret-0123456789\"\n"
                + "membus.transports.tcp.port = 0\n"
                + "membus.segments.count = 2\n"
                + "membus.segments.size = 4MiB\n"
                + "membus.heap.segments = [1]\n";
    }

    private static void closedAtOnce(List<String> problems, String call, String expectedWhat, Executable e) {
        long t0 = System.nanoTime();
        Throwable thrown = null;
        try {
            e.execute();
        } catch (Throwable t) {
            thrown = t;
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        if (!(thrown instanceof DsmClosedException c)) {
            problems.add(call + ": " + (thrown == null ? "returned normally" : thrown));
            return;
        }
        if (c.code() != ErrorCode.CLOSED || c.mayHaveRun() || !c.getMessage().contains(expectedWhat)
                || !c.what().contains(expectedWhat)) {
            problems.add(call + ": does not name " + expectedWhat + ": " + c.getMessage());
        }
        if (ms > AT_ONCE_MILLIS) {
            problems.add(call + ": took " + ms + " ms");
        }
    }

    /** Handles name their structure (its type and name), not the node's memory under them. */
    @Test
    void everyCallOnAClosedMembusItsNodeAndItsHandlesFailsAtOnceNamingWhatWasClosed() throws Exception {
        int seed = MembusTest.freePort();
        try (Membus two = Membus.start(ConfigFactory.parseString(tcpConfig(2, seed, seed)))) {
            Membus one = Membus.start(ConfigFactory.parseString(tcpConfig(1, MembusTest.freePort(), seed)));
            one.awaitMembers(2, Duration.ofSeconds(30));
            two.awaitMembers(2, Duration.ofSeconds(30));
            DsmMap<String, Long> map = one.map("orders", String.class, Long.class);
            map.put("a", 1L);
            DsmAtomicLong counter = one.atomicLong("hits");
            counter.incrementAndGet();
            DsmQueue<String> queue = one.queue("jobs", String.class, 8);
            queue.offer("j");
            DsmLock lock = one.lock("ledger");
            DsmLongArray array = one.longArray("arr", 4);
            io.membus.collections.DsmDoubleArray weights = one.doubleArray("w", 4);
            DsmMap<String, Long> prices = one.map("prices", String.class, Long.class,
                    io.membus.collections.DsmMapOptions.defaults().leasedReads(true));
            prices.put("p", 7L);
            assertEquals(7L, prices.get("p"));
            assertEquals(7L, prices.get("p")); // a leased hit now: after the close it must fail too
            RemoteRef<String> ref = one.create(Codecs.strings(), "v1", io.membus.alloc.Placement.node(2));
            assertEquals("v1", ref.get());
            RemoteRef<String> named = one.ref("settings", String.class, () -> "s1"); // a coherent object by name
            assertEquals("s1", named.get());
            long remote = two.allocator().allocate(64).payload(); // a word of live node 2
            var node = one.node();
            var memory = one.remoteMemory();

            one.close();

            List<String> problems = new ArrayList<>();
            String membus = "membus instance of node 1";
            closedAtOnce(problems, "map()", membus, () -> one.map("orders", String.class, Long.class));
            closedAtOnce(problems, "atomicLong()", membus, () -> one.atomicLong("hits"));
            closedAtOnce(problems, "queue()", membus, () -> one.queue("jobs", String.class, 8));
            closedAtOnce(problems, "lock()", membus, () -> one.lock("ledger"));
            closedAtOnce(problems, "longArray()", membus, () -> one.longArray("arr", 4));
            closedAtOnce(problems, "doubleArray()", membus, () -> one.doubleArray("w", 4));
            closedAtOnce(problems, "ref()", membus, () -> one.ref("settings", Codecs.strings()));
            closedAtOnce(problems, "destroy()", membus, () -> one.destroy("orders"));
            closedAtOnce(problems, "create()", membus, () -> one.create(Codecs.strings(), "x",
                    io.membus.alloc.Placement.node(2)));
            closedAtOnce(problems, "heap()", membus, one::heap);
            closedAtOnce(problems, "allocator()", membus, one::allocator);
            closedAtOnce(problems, "awaitMembers()", membus, () -> one.awaitMembers(2, Duration.ofSeconds(5)));

            String nodeOne = "node 1";
            closedAtOnce(problems, "node.awaitMembers()", nodeOne, () -> node.awaitMembers(2, Duration.ofSeconds(5)));
            closedAtOnce(problems, "node.allocator()", nodeOne, node::allocator);
            closedAtOnce(problems, "node.names().lookup()", nodeOne, () -> node.names().lookup("orders"));
            closedAtOnce(problems, "node.names().bind()", nodeOne, () -> node.names().bind("other", remote));
            closedAtOnce(problems, "remoteMemory.readLong()", nodeOne, () -> memory.readLong(remote));
            closedAtOnce(problems, "remoteMemory.readAsync()", nodeOne,
                    () -> memory.await(memory.readAsync(remote, 8)));
            closedAtOnce(problems, "messaging.request()", nodeOne, () -> node.messaging().request(2,
                    (short) 0x7777, new byte[1]));

            closedAtOnce(problems, "map.get()", "DsmMap 'orders'", () -> map.get("a"));
            closedAtOnce(problems, "map.put()", "DsmMap 'orders'", () -> map.put("b", 2L));
            closedAtOnce(problems, "counter.get()", "DsmAtomicLong 'hits'", counter::get);
            closedAtOnce(problems, "counter.incrementAndGet()", "DsmAtomicLong 'hits'", counter::incrementAndGet);
            closedAtOnce(problems, "queue.offer()", "DsmQueue 'jobs'", () -> queue.offer("k"));
            closedAtOnce(problems, "queue.poll()", "DsmQueue 'jobs'", queue::poll);
            closedAtOnce(problems, "lock.tryLock()", "DsmLock 'ledger'", lock::tryLock);
            closedAtOnce(problems, "array.get()", "DsmLongArray 'arr'", () -> array.get(0));
            closedAtOnce(problems, "doubleArray.get()", "DsmDoubleArray 'w'", () -> weights.get(0));
            closedAtOnce(problems, "leased map.get() (a cache hit before the close)", "DsmMap 'prices'",
                    () -> prices.get("p"));
            closedAtOnce(problems, "ref.get()", "coherent heap of node 1", ref::get);
            closedAtOnce(problems, "ref.set()", "coherent heap of node 1", () -> ref.set("v2"));
            closedAtOnce(problems, "named ref.get()", "coherent heap of node 1", named::get);
            closedAtOnce(problems, "named ref.update()", "coherent heap of node 1", () -> named.update(v -> v + "!"));
            if (!problems.isEmpty()) {
                fail("calls after close() that did not fail at once with DsmClosedException naming what was"
                        + " closed:\n  " + String.join("\n  ", problems));
            }
            // the live node is untouched
            two.remoteMemory().writeLong(remote, 42);
            assertEquals(42L, two.remoteMemory().readLong(remote));
            assertFalse(two.remoteMemory().transport().isClosed());
            assertTrue(node.transport().isClosed());
        }
    }
}
