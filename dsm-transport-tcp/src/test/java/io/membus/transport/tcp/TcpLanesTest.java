package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.test.Seeds;
import io.membus.core.transport.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The blocking lanes: RemoteMemory's blocking verbs over tcp run on them with the
 * pipelined channel's semantics (values, order, deadlines, failures), never more
 * lanes than configured, and a lane that timed out or lost its peer is never reused.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpLanesTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private final Nodes nodes = new Nodes();
    private final StaticDirectory directory = new StaticDirectory();

    @AfterEach
    void close() {
        nodes.close();
    }

    private Transport node(int id, Duration timeout, String... properties) {
        return nodes.member(id, timeout, directory, properties);
    }

    private static TcpConnection connection(Transport from, Transport to) {
        return Nodes.connection(from, to);
    }

    @Test
    void blockingVerbsFromManyThreadsRunOnAtMostTheConfiguredLanesWithExactResults() throws Exception {
        long seed = Seeds.seed("membus.test.seed", "TcpLanesTest.blockingVerbsFromManyThreads");
        Transport a = node(1, Duration.ofSeconds(20));
        node(2, Duration.ofSeconds(20), "tcp.blocking-lanes", "3");
        Transport c = node(3, Duration.ofSeconds(20), "tcp.blocking-lanes", "3");
        RemoteMemory memory = new RemoteMemory(c, directory, Duration.ofSeconds(20));
        long counter = RemotePtr.pack(1, 0, 0);
        int threads = 6;
        int each = 300;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            CountDownLatch start = new CountDownLatch(1);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long threadSeed = seed + t;
                done.add(pool.submit(() -> {
                    SplittableRandom random = new SplittableRandom(threadSeed);
                    start.await();
                    long mine = RemotePtr.pack(1, 0, 4096 + 512 * (threadSeed - seed));
                    byte[] data = new byte[100];
                    byte[] back = new byte[100];
                    for (int i = 0; i < each; i++) {
                        memory.fetchAndAdd(counter, 1);
                        random.nextBytes(data);
                        memory.write(mine, data);
                        memory.read(mine, back, 0, back.length);
                        assertArrayEquals(data, back, "read-your-write on a lane");
                    }
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> f : done) {
                f.get(90, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals((long) threads * each, memory.readLong(counter), "every increment counted once");
        int open = connection(c, a).lanesOpen();
        assertTrue(open >= 1 && open <= 3, "lanes open=" + open + ", configured 3");
    }

    /**
     * {@code readInOrder}: the second read sees every write the first saw, on a lane and
     * on the pipelined channel. A writer publishes a 64-byte block and then the word that
     * names its version; readers read the word and then the block, and never find a block
     * older than the word (reading the block first finds one within a few hundred pairs).
     */
    @Test
    void twoReadsInOrderNeverSeeTheGuardedBytesOlderThanTheWord() throws Exception {
        Transport a = node(1, Duration.ofSeconds(20), "tcp.io-threads", "2");
        Transport b = node(2, Duration.ofSeconds(20));
        Transport c = node(3, Duration.ofSeconds(20), "tcp.blocking-lanes", "0");
        RemoteMemory writer = new RemoteMemory(b, directory, Duration.ofSeconds(20));
        long word = RemotePtr.pack(1, 0, 8192);
        long block = RemotePtr.pack(1, 0, 8192 + 64);
        int versions = 4000;
        ExecutorService pool = Executors.newFixedThreadPool(3);
        try {
            CountDownLatch go = new CountDownLatch(1);
            Future<?> writing = pool.submit(() -> {
                byte[] bytes = new byte[64];
                go.await();
                for (long v = 1; v <= versions; v++) {
                    java.util.Arrays.fill(bytes, (byte) v);
                    io.membus.core.Words.putLong(bytes, 0, v);
                    writer.write(block, bytes);
                    writer.writeLong(word, v);
                }
                return null;
            });
            List<Future<Integer>> readers = new ArrayList<>();
            for (Transport from : List.of(b, c)) { // b: on a lane; c: two reads posted in issue order
                RemoteMemory memory = new RemoteMemory(from, directory, Duration.ofSeconds(20));
                readers.add(pool.submit(() -> {
                    byte[] w = new byte[8];
                    byte[] bytes = new byte[64];
                    go.await();
                    int pairs = 0;
                    while (!writing.isDone()) {
                        memory.readInOrder(word, w, block, bytes);
                        long named = io.membus.core.Words.getLong(w, 0);
                        long held = io.membus.core.Words.getLong(bytes, 0);
                        assertTrue(held >= named, "the block (version " + held + ") is older than the word read"
                                + " before it (version " + named + ")");
                        pairs++;
                    }
                    return pairs;
                }));
            }
            go.countDown();
            writing.get(90, TimeUnit.SECONDS);
            for (Future<Integer> r : readers) {
                assertTrue(r.get(90, TimeUnit.SECONDS) > 0);
            }
        } finally {
            pool.shutdownNow();
        }
        assertTrue(connection(b, a).lanesOpen() >= 1, "node 2's pairs ran on lanes");
        assertEquals(0, connection(c, a).lanesOpen());
    }

    @Test
    void aVerbTooLongForALaneTakesThePipelinedChannel() {
        Transport a = node(1, Duration.ofSeconds(20));
        Transport b = node(2, Duration.ofSeconds(20));
        RemoteMemory memory = new RemoteMemory(b, directory, Duration.ofSeconds(20));
        byte[] big = new byte[TcpLane.MAX_VERB_LENGTH + 1000];
        new SplittableRandom(3).nextBytes(big);
        memory.write(RemotePtr.pack(1, 0, 100), big);
        assertArrayEquals(big, memory.read(RemotePtr.pack(1, 0, 100), big.length));
        assertEquals(0, connection(b, a).lanesOpen(), "no lane opened for verbs it cannot carry");
    }

    @Test
    void noLanesAreOfferedWhenDisabledOrWhileAPostedVerbIsUnsettled() {
        Transport a = node(1, Duration.ofSeconds(20));
        Transport b = node(2, Duration.ofSeconds(20));
        Transport c = node(3, Duration.ofSeconds(20), "tcp.blocking-lanes", "0");
        assertNull(connection(c, a).blockingNow(), "blocking-lanes = 0");
        long key = a.table().get(0).remoteKey();
        TcpConnection ba = connection(b, a);
        assertNotNull(ba.blockingNow());
        a.faults().delay(2, Duration.ofMillis(300)); // the target holds node 2's verbs
        CompletableFuture<Long> held = ba.fetchAndAdd(RemotePtr.pack(1, 0, 0), key, 5);
        assertNull(ba.blockingNow(), "a blocking verb could overtake the held one");
        assertEquals(0L, RemoteMemory.await(held, WAIT));
        a.faults().clear();
        assertNotNull(ba.blockingNow(), "offered again once the posted verb was answered");
        assertEquals(5, ba.blockingNow().readLong(RemotePtr.pack(1, 0, 0), key));
        b.faults().delay(1, Duration.ofMillis(1)); // the initiator's own rules apply to posted verbs only
        assertNull(ba.blockingNow(), "no lanes while a fault rule of the initiator is set");
    }

    @Test
    void aLaneVerbThatTimesOutFailsWithItsDeadlineAndTheLaneIsNeverReused() {
        Transport a = node(1, Duration.ofSeconds(20));
        Transport b = node(2, Duration.ofMillis(400));
        RemoteMemory memory = new RemoteMemory(b, directory, Duration.ofMillis(400));
        long word = RemotePtr.pack(1, 0, 8);
        TcpConnection ba = connection(b, a);
        memory.writeLong(word, 1);
        assertEquals(1, ba.lanesOpen(), "the blocking write ran on a lane");
        a.faults().drop(2); // the target takes node 2's verbs and never answers
        DsmTimeoutException e = assertThrows(DsmTimeoutException.class, () -> memory.fetchAndAdd(word, 1));
        assertTrue(e.mayHaveRun(), "a verb that timed out on the wire may have run");
        assertEquals(0, ba.lanesOpen(), "the lane whose answer may still come is closed");
        a.faults().heal(2);
        assertEquals(1, memory.fetchAndAdd(word, 1), "the dropped verb never ran; a new lane serves");
        assertEquals(2, memory.readLong(word));
    }

    @Test
    void closingTheConnectionWakesACallerBlockedOnALane() throws Exception {
        Transport a = node(1, Duration.ofSeconds(20));
        Transport b = node(2, Duration.ofSeconds(60));
        RemoteMemory memory = new RemoteMemory(b, directory, Duration.ofSeconds(60));
        long word = RemotePtr.pack(1, 0, 8);
        TcpConnection ba = connection(b, a);
        memory.writeLong(word, 1);
        assertEquals(1, ba.lanesOpen(), "the blocking write ran on a lane");
        a.faults().delay(2, Duration.ofMinutes(5));
        CompletableFuture<Throwable> blocked = CompletableFuture.supplyAsync(() -> {
            try {
                memory.fetchAndAdd(word, 1);
                return null;
            } catch (RuntimeException e) {
                return e;
            }
        });
        Thread.sleep(200); // the caller is blocked on its lane by now (or the assertion below still holds)
        b.fence(1, "downed by the test");
        Throwable failure = blocked.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertTrue(failure instanceof NodeUnavailableException, "failed with " + failure);
        assertEquals(1, ((NodeUnavailableException) failure).nodeId());
        assertTrue(!ba.isOpen());
        a.faults().clear();
    }
    @Test
    void anotherThreadsUnsettledVerbDoesNotTakeTheLanesFromThisOne() throws Exception {
        Transport a = node(1, Duration.ofSeconds(20));
        Transport b = node(2, Duration.ofMillis(600));
        long key = a.table().get(0).remoteKey();
        long word = RemotePtr.pack(1, 0, 0);
        TcpConnection ba = connection(b, a);
        a.faults().delay(2, Duration.ofMillis(300)); // the target holds node 2's verbs
        CompletableFuture<Long> held = ba.fetchAndAdd(word, key, 5); // posted by this thread
        assertNull(ba.blockingNow(), "this thread's posted verb is unsettled");
        CompletableFuture<Boolean> other = CompletableFuture.supplyAsync(() -> ba.blockingNow() != null);
        assertTrue(other.get(30, TimeUnit.SECONDS), "another thread's verbs are settled: it may take a lane");
        assertEquals(0L, RemoteMemory.await(held, WAIT));
        a.faults().clear();

        // a verb that timed out on the wire may still run: its thread keeps to the pipeline until the channel ends
        a.faults().drop(2);
        CompletableFuture<Long> lost = ba.fetchAndAdd(word, key, 1);
        assertThrows(DsmTimeoutException.class, () -> RemoteMemory.await(lost, WAIT));
        assertNull(ba.blockingNow(), "the timed-out verb could still run after a lane verb of this thread");
        a.faults().heal(2);
        assertEquals(1, ((TcpTransport) a).disconnect(2, "test: end the channel"), "one pipelined channel");
        long until = System.nanoTime() + WAIT.toNanos();
        while (!(ba.isOpen() && ba.blockingNow() != null)) {
            assertTrue(System.nanoTime() < until, "the reconnected channel offers lanes again");
            Thread.sleep(20);
        }
        assertEquals(5, ba.blockingNow().readLong(word, key), "the dropped verb never ran");
    }
    @Test
    void directBuffersTravelOnLanesAndOnThePipelinedChannel() {
        Transport a = node(1, Duration.ofSeconds(20));
        Transport b = node(2, Duration.ofSeconds(20));
        RemoteMemory memory = new RemoteMemory(b, directory, Duration.ofSeconds(20));
        TcpConnection ba = connection(b, a);
        for (int size : new int[]{64, TcpLane.MAX_VERB_LENGTH + 100}) { // a lane's, and one only the channel carries
            byte[] data = new byte[size];
            new SplittableRandom(size).nextBytes(data);
            java.nio.ByteBuffer src = java.nio.ByteBuffer.allocateDirect(size).put(data).flip();
            memory.write(RemotePtr.pack(1, 0, 256), src);
            java.nio.ByteBuffer dst = java.nio.ByteBuffer.allocateDirect(size);
            memory.read(RemotePtr.pack(1, 0, 256), dst);
            byte[] back = new byte[size];
            dst.flip().get(back);
            assertArrayEquals(data, back, "size " + size);
        }
        assertEquals(1, ba.lanesOpen(), "the small one ran on a lane");
    }
}
