package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What 16 reads in flight on one pipelined connection cost in hand-offs and writes
 * ({@link VerbPathCounts}), the shape of {@code TcpSyncBenchmark.inFlight16}: one thread
 * issues 16 reads of 64 B with {@code readAsync} and waits for the last. Printed per 16
 * reads (the evidence of a change to the path that does not depend on the machine's
 * load), with how often each thread blocked (voluntary context switches, Linux only: the
 * caller, and the I/O threads of both nodes, named {@code membus-tcp-<node>-...}); checked: every verb ran once, and the target answers every read batch of verbs
 * with one write at most (the batching floor's rule: replies to requests that arrived
 * together leave together).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class VerbPathCountsTest {
    private static final int IN_FLIGHT = 16;
    private static final Duration WAIT = Duration.ofSeconds(30);

    @Test
    void sixteenReadsInFlightLeaveTogetherAndTheirAnswersInOneWritePerReadBatch() {
        try (Nodes nodes = new Nodes()) {
            StaticDirectory directory = new StaticDirectory();
            Transport target = nodes.start(1);
            Transport client = nodes.start(2, "tcp.blocking-lanes", "0"); // no lanes: the pipelined channel
            joinWithSegment(directory, target, client);
            measure(new RemoteMemory(client, directory, WAIT));
        }
    }

    /**
     * The same 16 reads with blocking lanes (the default): held on a lane until the caller
     * waits ({@link LaneFlight}), sent in one write and answered to the caller itself; the
     * pipelined channel's I/O threads take no part.
     */
    @Test
    void sixteenReadsInFlightOnALaneLeaveInOneWriteAndWakeNoIoThread() {
        try (Nodes nodes = new Nodes()) {
            StaticDirectory directory = new StaticDirectory();
            Transport target = nodes.start(1);
            Transport client = nodes.start(2);
            joinWithSegment(directory, target, client);
            RemoteMemory.await(client.connect(target.self()), WAIT); // open: the first blocking write takes a lane
            RemoteMemory memory = new RemoteMemory(client, directory, WAIT);
            long ptr = RemotePtr.pack(1, 0, 4096);
            byte[] expected = new byte[64];
            for (int i = 0; i < expected.length; i++) {
                expected[i] = (byte) (i * 5 + 3);
            }
            memory.write(ptr, expected);
            rounds(memory, ptr, expected, 300);
            long[] before = VerbPathCounts.snapshot();
            long writes = VerbPathCounts.flightWrites.sum();
            long polls = VerbPathCounts.flightPolls.sum();
            Map<String, Long> blocksBefore = blocks();
            int rounds = 1000;
            rounds(memory, ptr, expected, rounds);
            Map<String, Long> blocksAfter = blocks();
            long[] after = VerbPathCounts.snapshot();
            long w = VerbPathCounts.flightWrites.sum() - writes;
            StringBuilder line = new StringBuilder(String.format("per %d reads held on a lane: writes=%.2f"
                    + " fallbackPolls=%.2f", IN_FLIGHT, w / (double) rounds,
                    (VerbPathCounts.flightPolls.sum() - polls) / (double) rounds));
            for (int i = 0; i < after.length; i++) {
                line.append(String.format(" %s=%.2f", VerbPathCounts.NAMES[i], (after[i] - before[i]) / (double) rounds));
            }
            for (Map.Entry<String, Long> e : blocksAfter.entrySet()) {
                long n = e.getValue() - blocksBefore.getOrDefault(e.getKey(), 0L);
                if (n >= rounds / 10) {
                    line.append(String.format(" blocks[%s]=%.2f", e.getKey(), n / (double) rounds));
                }
            }
            System.out.println(line);
            // the counts are the JVM's: a flight an earlier test left unwaited may be sent by the fallback meanwhile
            assertTrue(w >= rounds && w <= rounds + rounds / 10, "one write per 16 reads held on a lane: " + w);
            assertTrue(after[0] - before[0] <= rounds / 10, "no wake-up of the initiator's I/O thread");
            assertTrue(after[4] - before[4] <= rounds / 10, "no verb on the pipelined channel");
        }
    }

    /**
     * Replication on (the default): every routed {@code readAsync} gets {@code GroupRouter}'s relay, a callback
     * on the read's future. The relay says the caller will wait ({@code WaitHelp.whenCompleteOwnerWaits}), so 16
     * routed reads and a wait for the last ask no flight reader (a thread hand-off each): the waiter reads.
     */
    @Test
    void sixteenRoutedReadsOnAReplicatedSegmentAskNoFlightReader() {
        try (Nodes nodes = new Nodes()) {
            StaticDirectory directory = new StaticDirectory();
            Transport target = nodes.start(1);
            Transport client = nodes.start(2);
            joinWithSegment(directory, target, client);
            long key = target.table().get(0).remoteKey();
            // node 1's segment 0 is a replica group served by node 1: reads are routed (RemoteMemory's router)
            directory.publish(1, java.util.List.of(new io.membus.core.replication.GroupClaim(
                    io.membus.core.replication.GroupId.of(1, 0), io.membus.core.replication.Ballot.initial(1),
                    io.membus.core.replication.GroupClaim.Role.PRIMARY, 64 * 1024, io.membus.core.Access.ALL, key,
                    new int[0], 0))).join();
            RemoteMemory.await(client.connect(target.self()), WAIT);
            RemoteMemory memory = new RemoteMemory(client, directory, WAIT);
            long ptr = RemotePtr.pack(1, 0, 4096);
            byte[] expected = new byte[64];
            for (int i = 0; i < expected.length; i++) {
                expected[i] = (byte) (i * 3 + 1);
            }
            memory.write(ptr, expected);
            CompletableFuture<byte[]> probe = memory.readAsync(ptr, 64);
            assertTrue(!(probe instanceof LaneFlight.Flight), "routed: the caller gets the router's future");
            memory.await(probe);
            rounds(memory, ptr, expected, 100);
            long asks = VerbPathCounts.flightReaderAsks.sum();
            long readerReads = VerbPathCounts.flightReaderReads.sum();
            long writes = VerbPathCounts.flightWrites.sum();
            long[] before = VerbPathCounts.snapshot();
            int rounds = 500;
            rounds(memory, ptr, expected, rounds);
            long[] after = VerbPathCounts.snapshot();
            long a = VerbPathCounts.flightReaderAsks.sum() - asks;
            long rr = VerbPathCounts.flightReaderReads.sum() - readerReads;
            long w = VerbPathCounts.flightWrites.sum() - writes;
            System.out.printf("per %d routed reads held on a lane: writes=%.2f flightReaderAsks=%.2f"
                    + " flightReaderReads=%.2f clientWakes=%.2f%n", IN_FLIGHT, w / (double) rounds, a / (double) rounds,
                    rr / (double) rounds, (after[0] - before[0]) / (double) rounds);
            assertTrue(w >= rounds && w <= rounds + rounds / 10, "one write per 16 routed reads: " + w);
            // the fallback asks one when this thread was descheduled for 0.5 ms between a read and its wait
            assertTrue(a <= rounds / 10, "no flight reader asked for routed reads the caller waits for: " + a);
            assertTrue(after[0] - before[0] <= rounds / 10, "no wake-up of the initiator's I/O thread");
        }
    }

    private static void measure(RemoteMemory memory) {
        long ptr = RemotePtr.pack(1, 0, 4096);
        byte[] expected = new byte[64];
        for (int i = 0; i < expected.length; i++) {
            expected[i] = (byte) (i * 7 + 1);
        }
        memory.write(ptr, expected);
        rounds(memory, ptr, expected, 300); // warm-up: JIT, buffers, connection
        long[] before = VerbPathCounts.snapshot();
        Map<String, Long> blocksBefore = blocks();
        int rounds = 1000;
        rounds(memory, ptr, expected, rounds);
        Map<String, Long> blocksAfter = blocks();
        long[] after = VerbPathCounts.snapshot();
        long[] d = new long[before.length];
        StringBuilder line = new StringBuilder("per " + IN_FLIGHT + " reads in flight:");
        for (int i = 0; i < d.length; i++) {
            d[i] = after[i] - before[i];
            line.append(String.format(" %s=%.2f", VerbPathCounts.NAMES[i], d[i] / (double) rounds));
        }
        // thread wake-ups: each time a thread blocked (Linux only), per 16 reads, for the threads that did
        for (Map.Entry<String, Long> e : blocksAfter.entrySet()) {
            long n = e.getValue() - blocksBefore.getOrDefault(e.getKey(), 0L);
            if (n >= rounds / 10) {
                line.append(String.format(" blocks[%s]=%.2f", e.getKey(), n / (double) rounds));
            }
        }
        System.out.println(line);
        assertEquals((long) rounds * IN_FLIGHT, d[4], "every read ran once at the target");
        assertTrue(d[5] <= d[3], "the target wrote its answers at most once per read batch of verbs: flushes="
                + d[5] + ", read batches=" + d[3]);
        assertTrue(d[1] >= rounds && d[1] <= (long) rounds * IN_FLIGHT, "request flushes=" + d[1]);
    }

    /**
     * Voluntary context switches (times a thread blocked: in a wait, a lock, epoll or a read) of
     * this test's thread, the tcp I/O threads and the lane server's threads, by thread name;
     * empty where /proc is missing. {@code TcpReadEachTest} prints them too.
     */
    static Map<String, Long> blocks() {
        Map<String, Long> m = new TreeMap<>();
        File[] tasks = new File("/proc/self/task").listFiles();
        if (tasks == null) {
            return m;
        }
        String me = "caller";
        long myTid = -1;
        try {
            myTid = Long.parseLong(new File("/proc/thread-self").getCanonicalFile().getName());
        } catch (IOException | NumberFormatException e) {
            return m;
        }
        for (File t : tasks) {
            try {
                String name = Files.readString(new File(t, "comm").toPath()).trim();
                boolean caller = t.getName().equals(Long.toString(myTid));
                if (!caller && !name.startsWith("membus-tcp") && !name.startsWith("membus-lane-")) {
                    continue;
                }
                for (String l : Files.readAllLines(new File(t, "status").toPath())) {
                    if (l.startsWith("voluntary_ctxt_switches:")) {
                        m.merge(caller ? me : name, Long.parseLong(l.substring(l.indexOf(':') + 1).trim()), Long::sum);
                    }
                }
            } catch (IOException | RuntimeException e) {
                // the thread ended meanwhile
            }
        }
        return m;
    }

    private static void rounds(RemoteMemory memory, long ptr, byte[] expected, int rounds) {
        for (int r = 0; r < rounds; r++) {
            CompletableFuture<byte[]> first = null;
            CompletableFuture<byte[]> last = null;
            for (int i = 0; i < IN_FLIGHT; i++) {
                last = memory.readAsync(ptr, 64);
                if (first == null) {
                    first = last;
                }
            }
            assertArrayEquals(expected, memory.await(last));
            assertTrue(first.isDone(), "completion in issue order: the first is done when the last is");
        }
    }

    /** Makes {@code nodes} members of {@code directory}, each exporting a 64 KiB segment 0 it names. */
    private static void joinWithSegment(StaticDirectory directory, Transport... nodes) {
        for (Transport t : nodes) {
            directory.addMember(t.self());
            directory.addSegment(t.export(SegmentSpec.of(0, 64 * 1024)).descriptor());
        }
    }
}
